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
	msg, err := updateMemoryFile(path, a.Scope, budget, a.Mode, a.Content)
	if err != nil {
		return agent.Result{}, err
	}
	return agent.Result{Text: msg}, nil
}

// memoryMu serialises the read-modify-write of memory files: Mother's
// update_memory and chicks' UpdateMemory both go through it.
var memoryMu sync.Mutex

// errMemoryRefused marks a memory update refused on its arguments or
// budget (the message is for the model); other errors are I/O.
var errMemoryRefused = errors.New("refused")

// updateMemoryFile appends to or replaces the memory file path (scope
// names it for the messages), atomically, refusing a result over budget
// characters.
func updateMemoryFile(path, scope string, budget int, mode, content string) (string, error) {
	memoryMu.Lock()
	defer memoryMu.Unlock()
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read memory: %w", err)
	}
	var text string
	switch mode {
	case "replace":
		text = strings.TrimSpace(content) + "\n"
	case "append":
		cur := strings.TrimRight(string(old), "\n")
		add := strings.TrimSpace(content)
		if cur == "" {
			text = add + "\n"
		} else {
			text = cur + "\n" + add + "\n"
		}
	default:
		return "", fmt.Errorf("%w: mode: %q is not \"append\" or \"replace\"", errMemoryRefused, mode)
	}
	if strings.TrimSpace(text) == "" {
		text = ""
	}
	if n := len([]rune(text)); n > budget {
		return "", fmt.Errorf("%w: %s memory would be %d characters, over its budget of %d (it now has %d). Nothing was written; shorten it with mode \"replace\"",
			errMemoryRefused, scope, n, budget, len([]rune(string(old))))
	}
	if err := atomicfile.WriteFile(path, []byte(text), 0o600); err != nil {
		return "", fmt.Errorf("write memory: %w", err)
	}
	return fmt.Sprintf("Updated %s memory (%d of %d characters).", scope, len([]rune(text)), budget), nil
}
