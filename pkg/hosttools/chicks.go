package hosttools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/prompt"
)

// ErrNotAllowed means a chick asked for a host tool that config.json's
// chicks.hostTools does not allow (or that does not exist).
var ErrNotAllowed = errors.New("host tool not allowed for chicks")

// ChickInvoker runs host tools on behalf of chicks, limited to the tools
// config.json's chicks.hostTools allows ("server.tool" or "server.*";
// default none), so a prompt-injected chick cannot reach the host freely.
// The nest serves ChickService.InvokeHostTool with InvokeForChick and
// fills JoinResponse.host_tools from Tools.
type ChickInvoker struct {
	m      *Manager
	logger *slog.Logger

	mu    sync.RWMutex
	allow []string
}

// NewChickInvoker returns an invoker allowing the given patterns.
func NewChickInvoker(m *Manager, allow []string, logger *slog.Logger) *ChickInvoker {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &ChickInvoker{m: m, logger: logger.With("component", "hosttools")}
	c.SetAllowed(allow)
	return c
}

// SetAllowed replaces the allow-list (on a config reload).
func (c *ChickInvoker) SetAllowed(patterns []string) {
	clean := make([]string, 0, len(patterns))
	for _, p := range patterns {
		if p = strings.TrimSpace(p); p != "" {
			clean = append(clean, p)
		}
	}
	c.mu.Lock()
	c.allow = clean
	c.mu.Unlock()
}

// Allowed reports whether chicks may call the qualified tool
// ("server.tool").
func (c *ChickInvoker) Allowed(qualified string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, p := range c.allow {
		if server, ok := strings.CutSuffix(p, ".*"); ok {
			if rest, ok := strings.CutPrefix(qualified, server+"."); ok && rest != "" {
				return true
			}
			continue
		}
		if p == qualified {
			return true
		}
	}
	return false
}

// Tools are the host tools chicks may call now (for
// JoinResponse.host_tools and the chick's prompt).
func (c *ChickInvoker) Tools() []Tool {
	var out []Tool
	for _, t := range c.m.Tools() {
		if c.Allowed(t.Qualified) {
			out = append(out, t)
		}
	}
	return out
}

// PromptTools describes the tools chicks may call, for the chick's system
// prompt.
func (c *ChickInvoker) PromptTools() []prompt.HostTool { return promptTools(c.Tools()) }

// Specs are the tools chicks may call, by qualified name with their input
// schema (JoinResponse.host_tools).
func (c *ChickInvoker) Specs() []model.ToolSpec {
	var out []model.ToolSpec
	for _, t := range c.Tools() {
		out = append(out, model.ToolSpec{Name: t.Qualified, Description: t.Description, Parameters: t.Schema})
	}
	return out
}

// InvokeForChick runs a host tool for the chick working in chickChannel
// ("adapter/channel", for the log). A tool the allow-list does not cover
// is refused with ErrNotAllowed (the server never hears of it); a tool's
// own failure (bad arguments, timeout, an error result) comes back as
// result text with isError set, as for Mother's invoke_tool.
func (c *ChickInvoker) InvokeForChick(ctx context.Context, chickChannel, tool, argsJSON string) (result string, isError bool, err error) {
	lg := c.logger.With("channel", chickChannel, "tool", tool)
	res, err := c.m.call(ctx, tool, json.RawMessage(argsJSON), c.Allowed)
	if err != nil {
		if errors.Is(err, ErrUnknownTool) {
			// Unknown and forbidden look the same to the chick: it learns
			// only what it may use.
			lg.Warn("chick asked for a host tool it may not use")
			return "", true, c.refusal(tool)
		}
		lg.Info("host tool call for a chick failed", "err", err)
		return err.Error(), true, nil
	}
	lg.Info("host tool called for a chick", "is_error", res.IsError)
	text := res.Text
	if len(res.Images) > 0 {
		text += fmt.Sprintf("\n[%d image(s) not passed to chicks]", len(res.Images))
	}
	return text, res.IsError, nil
}

func (c *ChickInvoker) refusal(tool string) error {
	var names []string
	for _, t := range c.Tools() {
		names = append(names, t.Qualified)
	}
	allowed := "none"
	if len(names) > 0 {
		allowed = strings.Join(names, ", ")
	}
	return kindf(ErrNotAllowed, "%q is not available to chicks (the configuration, chicks.hostTools, allows: %s)", tool, allowed)
}
