package chick

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/model"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// hostTool is the chick's host_tool: it asks Mother to run one of the host
// tools (MCP servers on her host) that config.json's chicks.hostTools
// allows. Mother checks the allow-list on every call; the names Join
// returned are only what the chick may expect.
type hostTool struct {
	r     *runner
	names []string
}

var _ agent.Tool = (*hostTool)(nil)

// hostTools returns the host_tool tool when Mother offered host tools.
func (r *runner) hostTools(join *pb.JoinResponse) []agent.Tool {
	var names []string
	for _, t := range join.GetHostTools() {
		names = append(names, t.GetName())
	}
	if len(names) == 0 {
		return nil
	}
	return []agent.Tool{&hostTool{r: r, names: names}}
}

func (t *hostTool) Spec() model.ToolSpec {
	enum, _ := json.Marshal(t.names)
	return model.ToolSpec{
		Name: "host_tool",
		Description: "Ask Mother to run a host tool on her host (the tools under \"Host tools\" in your instructions: " + strings.Join(t.names, ", ") + "). " +
			"tool is its name; args an object with its parameters.",
		Parameters: json.RawMessage(`{"type":"object","properties":{
"tool":{"type":"string","enum":` + string(enum) + `,"description":"the host tool's name"},
"args":{"type":"object","description":"the tool's parameters as a JSON object"}},
"required":["tool"]}`),
	}
}

func (t *hostTool) Run(ctx context.Context, raw json.RawMessage) (agent.Result, error) {
	var a struct {
		Tool string          `json:"tool"`
		Args json.RawMessage `json:"args"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return agent.Result{}, fmt.Errorf("arguments: %w", err)
	}
	args := strings.TrimSpace(string(a.Args))
	if args == "" || args == "null" {
		args = "{}"
	}
	resp, err := t.r.client.InvokeHostTool(t.r.auth(ctx), &pb.InvokeHostToolRequest{Tool: a.Tool, ArgsJson: args})
	if err != nil {
		if st, ok := status.FromError(err); ok {
			return agent.Result{}, fmt.Errorf("%s", st.Message())
		}
		return agent.Result{}, err
	}
	return agent.Result{Text: resp.GetResult(), IsError: resp.GetIsError()}, nil
}
