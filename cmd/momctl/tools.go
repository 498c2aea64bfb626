package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// toolServerJSON is the --json form of a host tool server.
type toolServerJSON struct {
	Name        string     `json:"name"`
	Transport   string     `json:"transport"`
	State       string     `json:"state"`
	Error       string     `json:"error,omitempty"`
	Restarts    int32      `json:"restarts"`
	Since       time.Time  `json:"since"`
	NextAttempt *time.Time `json:"nextAttempt,omitempty"`
	Tools       []toolJSON `json:"tools"`
}

type toolJSON struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// tools lists the host tool servers (config.json's mcpServers), their
// state and their tools.
func (c *cli) tools(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tools ls", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := c.parse(fs, args); err != nil {
		return usageError{"tools ls [--json]"}
	}
	var resp *pb.ListToolsResponse
	err := c.do(ctx, 10*time.Second, func(ctx context.Context, api pb.AdminServiceClient) (err error) {
		resp, err = api.ListTools(ctx, &pb.ListToolsRequest{})
		return err
	})
	if err != nil {
		return err
	}
	now := c.clock.Now()
	out := []toolServerJSON{}
	for _, s := range resp.GetServers() {
		js := toolServerJSON{Name: s.GetName(), Transport: wire.ToolTransportName(s.GetTransport()), State: wire.ToolServerStateName(s.GetState()), Error: s.GetError(),
			Restarts: s.GetRestarts(), Since: s.GetSince().AsTime(), Tools: []toolJSON{}}
		if s.GetNextAttempt() != nil {
			t := s.GetNextAttempt().AsTime()
			js.NextAttempt = &t
		}
		for _, t := range s.GetTools() {
			js.Tools = append(js.Tools, toolJSON{Name: t.GetName(), Description: t.GetDescription(), Parameters: rawOrNil(t.GetParametersJson())})
		}
		out = append(out, js)
	}
	return c.print(*asJSON, out, func(w io.Writer) error { return toolsText(w, resp.GetServers(), now) })
}

// toolsText is momctl tools ls for a person.
func toolsText(w io.Writer, servers []*pb.ToolServerInfo, now time.Time) error {
	if len(servers) == 0 {
		fmt.Fprintln(w, "no host tool servers (config.json has no mcpServers)")
		return nil
	}
	for i, s := range servers {
		if i > 0 {
			fmt.Fprintln(w)
		}
		line := fmt.Sprintf("%s (%s): %s for %s", s.GetName(), wire.ToolTransportName(s.GetTransport()), wire.ToolServerStateName(s.GetState()), age(now.Sub(s.GetSince().AsTime())))
		if n := s.GetRestarts(); n > 0 {
			line += fmt.Sprintf(", %d restart(s)", n)
		}
		if s.GetNextAttempt() != nil {
			line += ", next attempt in " + age(max(0, s.GetNextAttempt().AsTime().Sub(now)))
		}
		fmt.Fprintln(w, line)
		if e := s.GetError(); e != "" {
			fmt.Fprintf(w, "  error: %s\n", e)
		}
		for _, t := range s.GetTools() {
			desc := firstLine(t.GetDescription())
			if desc != "" {
				desc = ": " + desc
			}
			fmt.Fprintf(w, "  %s%s\n", signature(t.GetName(), t.GetParametersJson()), desc)
		}
		if len(s.GetTools()) == 0 && s.GetState() != pb.ToolServerState_TOOL_SERVER_STATE_DISABLED {
			fmt.Fprintln(w, "  (no tools known)")
		}
	}
	return nil
}

func rawOrNil(s string) json.RawMessage {
	if s == "" || !json.Valid([]byte(s)) {
		return nil
	}
	return json.RawMessage(s)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > 100 {
		s = string(r[:99]) + "…"
	}
	return s
}

// signature renders name(required, optional?) from a JSON schema.
func signature(name, schema string) string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	_ = json.Unmarshal([]byte(schema), &s)
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	var names []string
	for p := range s.Properties {
		names = append(names, p)
	}
	sort.Slice(names, func(i, j int) bool {
		if req[names[i]] != req[names[j]] {
			return req[names[i]]
		}
		return names[i] < names[j]
	})
	for i, n := range names {
		if !req[n] {
			names[i] = n + "?"
		}
	}
	return name + "(" + strings.Join(names, ", ") + ")"
}
