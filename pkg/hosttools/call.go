package hosttools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/model"
)

// Errors callers branch on; the texts the model sees wrap them.
var (
	// ErrUnknownTool: no configured server has a tool by that name.
	ErrUnknownTool = errors.New("unknown host tool")
	// ErrAmbiguous: a bare tool name that several servers have.
	ErrAmbiguous = errors.New("ambiguous host tool name")
	// ErrBadArguments: the arguments do not match the tool's schema; the
	// server was not called.
	ErrBadArguments = errors.New("arguments do not match the tool's parameters")
	// ErrTimeout: the server did not answer within its timeout.
	ErrTimeout = errors.New("host tool timed out")
	// ErrServerDown: the server is not running, or ended during the call.
	ErrServerDown = errors.New("host tool server not running")
)

// kindError is an error the model reads as it is, of a kind callers can
// test with errors.Is.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

func kindf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// Call runs one host tool: name is "server.tool" (or the bare tool name
// when exactly one server has a tool by that name), args a JSON object.
// The arguments are checked against the tool's schema before anything is
// sent. A returned error is meant for the model as it is; a result the
// server marks as an error has IsError set.
func (m *Manager) Call(ctx context.Context, name string, args json.RawMessage) (agent.Result, error) {
	return m.call(ctx, name, args, nil)
}

// call is Call limited to the tools allow accepts (nil: all).
func (m *Manager) call(ctx context.Context, name string, args json.RawMessage, allow func(qualified string) bool) (agent.Result, error) {
	s, toolName, err := m.resolve(name, allow)
	if err != nil {
		return agent.Result{}, err
	}
	l, t, err := s.current(toolName)
	if err != nil {
		return agent.Result{}, err
	}
	obj, err := decodeArgs(args)
	if err != nil {
		return agent.Result{}, kindf(ErrBadArguments, "%s was not called: %v.\nParameters: %s", t.Qualified, err, t.Prompt().Details())
	}
	if t.validator != nil {
		if err := t.validator.Validate(obj); err != nil {
			return agent.Result{}, kindf(ErrBadArguments, "%s was not called: its arguments do not match its parameters: %v.\nParameters: %s", t.Qualified, trimValidation(err), t.Prompt().Details())
		}
	}
	return s.call(ctx, l, t, obj)
}

// trimValidation drops the validator's "validating root: " style prefixes
// so the model reads the problem first.
func trimValidation(err error) string {
	msg := err.Error()
	for _, p := range []string{"validating root: ", "validating /: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

// resolve finds the server and tool for a name. Server names may contain
// dots, so every split is tried, the longest server name first.
func (m *Manager) resolve(name string, allow func(string) bool) (*server, string, error) {
	name = strings.TrimSpace(name)
	all := m.snapshot()
	visible := func(q string) bool { return allow == nil || allow(q) }
	sort.SliceStable(all, func(i, j int) bool { return len(all[i].name) > len(all[j].name) })
	for _, s := range all {
		rest, ok := strings.CutPrefix(name, s.name+".")
		if !ok || rest == "" {
			continue
		}
		if !visible(s.name + "." + rest) {
			return nil, "", m.unknown(name, allow)
		}
		switch st := s.status(); st.State {
		case StateDisabled:
			return nil, "", kindf(ErrServerDown, "host tool server %s is disabled in config.json", s.name)
		case StateStopped:
			continue
		}
		return s, rest, nil
	}
	// A bare tool name, when it is unambiguous.
	var found []Tool
	for _, t := range m.Tools() {
		if t.Name == name && visible(t.Qualified) {
			found = append(found, t)
		}
	}
	switch len(found) {
	case 1:
		for _, s := range all {
			if s.name == found[0].Server {
				return s, found[0].Name, nil
			}
		}
	case 0:
	default:
		var names []string
		for _, t := range found {
			names = append(names, t.Qualified)
		}
		return nil, "", kindf(ErrAmbiguous, "host tool name %q is ambiguous: use one of %s", name, strings.Join(names, ", "))
	}
	return nil, "", m.unknown(name, allow)
}

// unknown is the error for a name that matches nothing visible: it lists
// the names that do exist, so the model can correct itself.
func (m *Manager) unknown(name string, allow func(string) bool) error {
	var names []string
	for _, t := range m.Tools() {
		if allow == nil || allow(t.Qualified) {
			names = append(names, t.Qualified)
		}
	}
	if len(names) == 0 {
		return kindf(ErrUnknownTool, "unknown host tool %q: no host tools are available", name)
	}
	const show = 60
	list := strings.Join(names[:min(len(names), show)], ", ")
	if len(names) > show {
		list += fmt.Sprintf(", ... (%d more)", len(names)-show)
	}
	return kindf(ErrUnknownTool, "unknown host tool %q; available: %s", name, list)
}

// call sends one validated call to the live session, within the server's
// timeout, and turns every way it can fail into a clear error.
func (s *server) call(ctx context.Context, l *session, t *Tool, args map[string]any) (agent.Result, error) {
	timeout := s.cfg.Timeout.Duration
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := s.m.opts.Clock.Now()
	res, err := l.cs.CallTool(cctx, &mcp.CallToolParams{Name: t.Name, Arguments: args})
	lg := s.logger.With("tool", t.Name, "duration", clock.Since(s.m.opts.Clock, start).Round(time.Millisecond))
	if err != nil {
		var rpcErr *jsonrpc.Error
		switch {
		case ctx.Err() != nil:
			lg.Info("host tool call aborted")
			return agent.Result{}, fmt.Errorf("%s: aborted", t.Qualified)
		case errors.Is(cctx.Err(), context.DeadlineExceeded):
			lg.Warn("host tool call timed out", "timeout", timeout)
			return agent.Result{}, kindf(ErrTimeout, "%s did not answer within %s; the call was cancelled (it may still have had an effect)", t.Qualified, timeout)
		case errors.As(err, &rpcErr) && !transportCode(rpcErr.Code):
			lg.Warn("host tool call refused", "code", rpcErr.Code, "err", rpcErr.Message)
			return agent.Result{}, fmt.Errorf("%s failed: %s", t.Qualified, rpcErr.Message)
		case s.ended(l):
			lg.Warn("host tool server ended during a call", "err", err)
			return agent.Result{}, kindf(ErrServerDown, "host tool server %s stopped during the call to %s and is being restarted; the call may or may not have taken effect", s.name, t.Qualified)
		default:
			// The connection is broken (an HTTP server gone away, say):
			// close it so the supervisor reconnects.
			lg.Warn("host tool call failed; reconnecting", "err", err)
			go s.close(l)
			return agent.Result{}, kindf(ErrServerDown, "could not reach host tool server %s for %s (%v); reconnecting, try again later", s.name, t.Qualified, err)
		}
	}
	r := s.m.result(t, res)
	lg.Info("host tool called", "is_error", r.IsError, "bytes", len(r.Text))
	return r, nil
}

// transportCode reports whether a JSON-RPC error code is the SDK's own
// for a request that never reached the server (rejected by the transport,
// client or server closing) rather than the server's answer.
func transportCode(code int64) bool {
	switch code {
	case -32005, -32004, -32003:
		return true
	}
	return false
}

// ended reports whether the session ended, waiting a moment: a process
// that died mid-call fails the call a little before the session notices.
func (s *server) ended(l *session) bool {
	select {
	case <-l.done:
		return true
	case <-clock.After(s.m.opts.Clock, 2*time.Second):
		return false
	}
}

// result turns an MCP result into what the model sees: the text parts
// joined, images passed on, other content named, capped at MaxResultBytes.
func (m *Manager) result(t *Tool, res *mcp.CallToolResult) agent.Result {
	var parts []string
	var images []model.Image
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			images = append(images, model.Image{MimeType: c.MIMEType, Data: c.Data})
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio (%s) not shown]", c.MIMEType))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s: %s]", c.Name, c.URI))
		case *mcp.EmbeddedResource:
			switch {
			case c.Resource == nil:
			case c.Resource.Text != "":
				parts = append(parts, c.Resource.Text)
			default:
				parts = append(parts, fmt.Sprintf("[resource %s (%s, %d bytes) not shown]", c.Resource.URI, c.Resource.MIMEType, len(c.Resource.Blob)))
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	text := strings.Join(parts, "\n")
	if len(text) > m.opts.MaxResultBytes {
		cut := m.opts.MaxResultBytes
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + fmt.Sprintf("\n[... result cut at %d bytes of %d]", cut, len(text))
	}
	switch {
	case res.IsError && text == "":
		text = t.Qualified + " failed (the server gave no details)"
	case res.IsError:
		text = t.Qualified + " failed: " + text
	case text == "" && len(images) == 0:
		text = "(no output)"
	}
	return agent.Result{Text: text, Images: images, IsError: res.IsError}
}
