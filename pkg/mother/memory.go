package mother

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/prompt"
)

// MemoryTool is Mother's update_memory tool: it rewrites or appends to the
// channel's MEMORY.md (budget prompt.BudgetChannelMemory characters) or
// the workspace's (prompt.BudgetGlobalMemory), atomically, and refuses a
// write that would exceed the budget.
func MemoryTool(workspace string) agent.Tool { return &memoryTool{workspace: workspace} }

type memoryTool struct {
	workspace string
	mu        sync.Mutex // serialises read-modify-write of the files
}

var _ agent.Tool = (*memoryTool)(nil)

func (t *memoryTool) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name: "update_memory",
		Description: fmt.Sprintf("Update a memory file that is shown to you on every run: scope \"channel\" (this channel, at most %d characters) "+
			"or \"workspace\" (shared by all channels, at most %d characters). mode \"append\" adds a line; \"replace\" rewrites the whole file "+
			"(use it to shorten). Keep only durable facts.", prompt.BudgetChannelMemory, prompt.BudgetGlobalMemory),
		Parameters: json.RawMessage(`{"type":"object","properties":{
"scope":{"type":"string","enum":["channel","workspace"]},
"mode":{"type":"string","enum":["append","replace"]},
"content":{"type":"string"}},"required":["scope","mode","content"]}`),
	}
}

func (t *memoryTool) Run(ctx context.Context, raw json.RawMessage) (agent.Result, error) {
	var a struct {
		Scope   string `json:"scope"`
		Mode    string `json:"mode"`
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return agent.Result{}, fmt.Errorf("arguments: %w", err)
	}
	var path string
	var budget int
	switch a.Scope {
	case "channel":
		info, ok := chat.RunInfoFrom(ctx)
		if !ok || info.ChannelDir == "" {
			return agent.Result{}, errors.New("no channel: channel memory can only be updated inside a channel's run")
		}
		path, budget = filepath.Join(info.ChannelDir, "MEMORY.md"), prompt.BudgetChannelMemory
	case "workspace":
		path, budget = filepath.Join(t.workspace, "MEMORY.md"), prompt.BudgetGlobalMemory
	default:
		return agent.Result{}, fmt.Errorf("scope: %q is not \"channel\" or \"workspace\"", a.Scope)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return agent.Result{}, fmt.Errorf("read memory: %w", err)
	}
	var text string
	switch a.Mode {
	case "replace":
		text = strings.TrimSpace(a.Content) + "\n"
	case "append":
		cur := strings.TrimRight(string(old), "\n")
		add := strings.TrimSpace(a.Content)
		if cur == "" {
			text = add + "\n"
		} else {
			text = cur + "\n" + add + "\n"
		}
	default:
		return agent.Result{}, fmt.Errorf("mode: %q is not \"append\" or \"replace\"", a.Mode)
	}
	if strings.TrimSpace(text) == "" {
		text = ""
	}
	if n := len([]rune(text)); n > budget {
		return agent.Result{}, fmt.Errorf("refused: %s memory would be %d characters, over its budget of %d (it now has %d). Nothing was written; shorten it with mode \"replace\"",
			a.Scope, n, budget, len([]rune(string(old))))
	}
	if err := atomicfile.WriteFile(path, []byte(text), 0o600); err != nil {
		return agent.Result{}, fmt.Errorf("write memory: %w", err)
	}
	return agent.Result{Text: fmt.Sprintf("Updated %s memory (%d of %d characters).", a.Scope, len([]rune(text)), budget)}, nil
}
