package chick

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/model"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// accessTool is an isolated chick's request_access: it asks Mother for a
// network destination its allowlist does not hold; an admin answers in
// the chat.
type accessTool struct{ r *runner }

var _ agent.Tool = (*accessTool)(nil)

func (t *accessTool) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name: "request_access",
		Description: "Ask for network access to one destination. Your network is isolated: you reach only what is allowed for you, " +
			"and a refused connection answers 403 with a line like \"blocked: pypi.org:443 (not allowed for this chick)\". " +
			"This asks the admins of your channel in the chat, with your reason, and waits for their answer (it may take minutes); " +
			"it returns whether it was granted. Once granted, the destination is allowed through the HTTP(S) proxy already " +
			"configured in your environment (HTTP_PROXY/HTTPS_PROXY: curl, pip, git and most tools use it by themselves); " +
			"retry what was blocked. Loopback, private and link-local addresses stay refused (only the operator can allow them): " +
			"asking for one is refused at once. Ask only for what the goal needs, one host and port per call, and say why.",
		Parameters: json.RawMessage(`{"type":"object","properties":{
"label":{"type":"string","description":"A few words shown to the user while this runs"},
"destination":{"type":"string","description":"one host and port, e.g. \"pypi.org:443\" (an https:// or http:// URL is taken as its host and port); wildcards such as \"*.example.com\" and destinations without a port are refused: only the operator can allow those"},
"reason":{"type":"string","description":"why the goal needs it, in one sentence, for the admins"}},
"required":["destination","reason"]}`),
	}
}

func (t *accessTool) Run(ctx context.Context, raw json.RawMessage) (agent.Result, error) {
	var a struct {
		Destination string `json:"destination"`
		Reason      string `json:"reason"`
	}
	if len(strings.TrimSpace(string(raw))) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return agent.Result{}, fmt.Errorf("request_access: invalid arguments: %v", err)
	}
	dest, err := destination(a.Destination)
	if err != nil {
		return agent.Result{}, fmt.Errorf("request_access: %w", err)
	}
	reason := strings.TrimSpace(a.Reason)
	if reason == "" {
		return agent.Result{}, errors.New("request_access: say why the goal needs it (reason)")
	}
	var resp *pb.RequestAccessResponse
	err = t.r.retry(ctx, "request access", func(ctx context.Context) error {
		var err error
		resp, err = t.r.client.RequestAccess(ctx, &pb.RequestAccessRequest{Destination: dest, Reason: reason})
		return err
	})
	if err != nil {
		if st, ok := status.FromError(err); ok {
			return agent.Result{}, fmt.Errorf("request_access: %s", st.Message())
		}
		return agent.Result{}, fmt.Errorf("request_access: %w", err)
	}
	msg := strings.TrimSpace(resp.GetMessage())
	switch {
	case msg != "":
	case resp.GetGranted() && resp.GetScope() == pb.AccessScope_ACCESS_SCOPE_CHANNEL:
		msg = "granted for this channel"
	case resp.GetGranted():
		msg = "granted for this chick"
	default:
		msg = "refused"
	}
	if resp.GetGranted() {
		// Allowed is all Mother can say: the gate still checks the
		// address the name resolves to when the chick connects.
		msg += "\n" + dest + " is now allowed through the proxy: retry what was blocked (a refusal answers 403 with the reason)."
	}
	return agent.Result{Text: msg}, nil
}

// destination normalises what a model may write for a destination:
// "host", "host:port", or a URL (its host, and its scheme's port).
func destination(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("missing required argument \"destination\" (host or host:port)")
	}
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil || u.Hostname() == "" {
			return "", fmt.Errorf("destination %q: want host or host:port", s)
		}
		port := u.Port()
		if port == "" {
			switch strings.ToLower(u.Scheme) {
			case "https":
				port = "443"
			case "http":
				port = "80"
			}
		}
		if port == "" {
			return u.Hostname(), nil
		}
		return net.JoinHostPort(u.Hostname(), port), nil
	}
	if strings.ContainsAny(s, " /\t\n") {
		return "", fmt.Errorf("destination %q: want host or host:port", s)
	}
	return s, nil
}
