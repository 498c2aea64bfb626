package hosttools

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/model"
)

// InvokeToolName is the name of Mother's tool for host tools.
const InvokeToolName = "invoke_tool"

// InvokeTool is Mother's invoke_tool: it runs one host tool by name with
// its arguments. The tools themselves are described in her system prompt
// (PromptTools), so her tool list stays one entry long however many
// servers are configured, and a reload needs no new agent.
func (m *Manager) InvokeTool() agent.Tool { return invokeTool{m} }

type invokeTool struct{ m *Manager }

var _ agent.Tool = invokeTool{}

func (invokeTool) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name: InvokeToolName,
		Description: "Run a host tool: one of the tools listed under \"Host tools\" in your instructions, which run on Mother's host (they can reach services and accounts a chick cannot). " +
			"tool is its name as listed (server.tool); args is an object with its parameters.",
		Parameters: json.RawMessage(`{"type":"object","properties":{
"tool":{"type":"string","description":"the host tool's name, e.g. notes.add"},
"args":{"type":"object","description":"the tool's parameters as a JSON object"}},
"required":["tool"]}`),
	}
}

func (t invokeTool) Run(ctx context.Context, raw json.RawMessage) (agent.Result, error) {
	var a struct {
		Tool string          `json:"tool"`
		Args json.RawMessage `json:"args"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return agent.Result{}, fmt.Errorf("arguments: %w", err)
	}
	if a.Tool == "" {
		return agent.Result{}, t.m.unknown("", nil)
	}
	return t.m.Call(ctx, a.Tool, a.Args)
}
