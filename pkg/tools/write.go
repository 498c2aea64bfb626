package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/model"
)

// Write creates or replaces a file, creating its directories.
type Write struct{ ws *Workspace }

var _ agent.Tool = (*Write)(nil)

// Spec implements agent.Tool.
func (w *Write) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name:        "write",
		Description: fmt.Sprintf("Create or overwrite a file in the workspace (%s) with the given content; missing directories are created. Any size works. To change part of a file, use edit.", w.ws.Root()),
		Parameters: schema([]string{"path", "content"},
			`"path":{"type":"string","description":"File path, relative to the workspace or absolute inside it"}`,
			`"content":{"type":"string","description":"The complete new content of the file"}`,
		),
	}
}

type writeArgs struct {
	Path    string  `json:"path"`
	Content *string `json:"content"`
}

// Run implements agent.Tool.
func (w *Write) Run(_ context.Context, raw json.RawMessage) (agent.Result, error) {
	var a writeArgs
	if err := decode("write", raw, &a); err != nil {
		return agent.Result{}, err
	}
	if strings.TrimSpace(a.Path) == "" {
		return agent.Result{}, missing("write", "path")
	}
	if a.Content == nil {
		return agent.Result{}, missing("write", "content")
	}
	abs, err := w.ws.Resolve(a.Path)
	if err != nil {
		return agent.Result{}, fmt.Errorf("write: %w", err)
	}
	rel := w.ws.Rel(abs)
	if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
		return agent.Result{}, fmt.Errorf("write: %s is a directory", rel)
	}
	if err := mkdirInside(w.ws, filepath.Dir(abs)); err != nil {
		return agent.Result{}, fmt.Errorf("write: %s: %w", rel, err)
	}
	if err := writeFile(abs, []byte(*a.Content)); err != nil {
		return agent.Result{}, fmt.Errorf("write: %s: %w", rel, err)
	}
	return agent.Result{Text: fmt.Sprintf("Wrote %s (%s, %d lines).", rel, humanBytes(int64(len(*a.Content))), countLines([]byte(*a.Content)))}, nil
}

// mkdirInside creates dir (resolved, inside the workspace) and its parents,
// refusing to create through anything that is not a directory.
func mkdirInside(ws *Workspace, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return unwrapPath(err)
	}
	// Re-check after creating: a component that appeared meanwhile as a
	// link must not have taken the write elsewhere.
	if _, err := ws.Resolve(dir); err != nil {
		return err
	}
	return nil
}

// writeFile replaces path's content through a temporary file and a rename,
// keeping an existing file's permissions.
func writeFile(path string, data []byte) error {
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return unwrapPath(err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return unwrapPath(err)
	}
	name := tmp.Name()
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(name, mode)); err != nil {
		os.Remove(name)
		return unwrapPath(err)
	}
	if err := os.Rename(name, path); err != nil {
		os.Remove(name)
		return unwrapPath(err)
	}
	return nil
}
