package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/model"
)

// Attach marks a workspace file for delivery to the channel.
type Attach struct {
	ws      *Workspace
	deliver AttachFunc
}

var _ agent.Tool = (*Attach)(nil)

// Spec implements agent.Tool.
func (t *Attach) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name:        "attach",
		Description: fmt.Sprintf("Share a file from the workspace (%s) with the people in the channel. Only files inside the workspace can be attached.", t.ws.Root()),
		Parameters: schema([]string{"path"},
			`"path":{"type":"string","description":"File path, relative to the workspace or absolute inside it"}`,
			`"title":{"type":"string","description":"Optional title shown with the file"}`,
		),
	}
}

type attachArgs struct {
	Path  string `json:"path"`
	Title string `json:"title"`
}

// Run implements agent.Tool.
func (t *Attach) Run(ctx context.Context, raw json.RawMessage) (agent.Result, error) {
	var a attachArgs
	if err := decode("attach", raw, &a); err != nil {
		return agent.Result{}, err
	}
	if strings.TrimSpace(a.Path) == "" {
		return agent.Result{}, missing("attach", "path")
	}
	abs, err := t.ws.Resolve(a.Path)
	if err != nil {
		return agent.Result{}, fmt.Errorf("attach: %w", err)
	}
	rel := t.ws.Rel(abs)
	fi, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return agent.Result{}, fmt.Errorf("attach: %s: no such file", rel)
	}
	if err != nil {
		return agent.Result{}, fmt.Errorf("attach: %s: %w", rel, unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		return agent.Result{}, fmt.Errorf("attach: %s is not a regular file", rel)
	}
	if t.deliver == nil {
		return agent.Result{}, errNoAttach
	}
	if err := ctx.Err(); err != nil {
		return agent.Result{}, fmt.Errorf("attach: %w", err)
	}
	if err := t.deliver(abs, a.Title); err != nil {
		return agent.Result{}, fmt.Errorf("attach: %s: %w", rel, err)
	}
	return agent.Result{Text: fmt.Sprintf("Attached %s (%s).", rel, humanBytes(fi.Size()))}, nil
}
