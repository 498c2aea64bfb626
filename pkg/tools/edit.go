package tools

import (
	"bytes"
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

// Edit replaces one exact, unique occurrence of a text in a file.
type Edit struct{ ws *Workspace }

var _ agent.Tool = (*Edit)(nil)

// Spec implements agent.Tool.
func (e *Edit) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name: "edit",
		Description: fmt.Sprintf("Replace text in a file in the workspace (%s). oldText must occur exactly once, matching whitespace and line breaks exactly; "+
			"include enough surrounding lines to make it unique. Returns a unified diff of the change.", e.ws.Root()),
		Parameters: schema([]string{"path", "oldText", "newText"},
			`"path":{"type":"string","description":"File path, relative to the workspace or absolute inside it"}`,
			`"oldText":{"type":"string","description":"The exact text to replace; it must occur exactly once"}`,
			`"newText":{"type":"string","description":"The replacement text"}`,
		),
	}
}

type editArgs struct {
	Path    string  `json:"path"`
	OldText *string `json:"oldText"`
	NewText *string `json:"newText"`
}

// Run implements agent.Tool.
func (e *Edit) Run(_ context.Context, raw json.RawMessage) (agent.Result, error) {
	var a editArgs
	if err := decode("edit", raw, &a); err != nil {
		return agent.Result{}, err
	}
	switch {
	case strings.TrimSpace(a.Path) == "":
		return agent.Result{}, missing("edit", "path")
	case a.OldText == nil:
		return agent.Result{}, missing("edit", "oldText")
	case a.NewText == nil:
		return agent.Result{}, missing("edit", "newText")
	case *a.OldText == "":
		return agent.Result{}, errors.New("edit: oldText is empty; to create or overwrite a whole file use write")
	case *a.OldText == *a.NewText:
		return agent.Result{}, errors.New("edit: oldText and newText are identical, so there is nothing to change")
	}
	abs, err := e.ws.Resolve(a.Path)
	if err != nil {
		return agent.Result{}, fmt.Errorf("edit: %w", err)
	}
	rel := e.ws.Rel(abs)
	old, err := os.ReadFile(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return agent.Result{}, fmt.Errorf("edit: %s: no such file; create it with write", rel)
	}
	if err != nil {
		return agent.Result{}, fmt.Errorf("edit: %s: %w", rel, unwrapPath(err))
	}
	oldText, newText := []byte(*a.OldText), []byte(*a.NewText)
	at := bytes.Index(old, oldText)
	if at < 0 {
		hint := ""
		if bytes.Contains(bytes.ReplaceAll(old, []byte("\r\n"), []byte("\n")), bytes.ReplaceAll(oldText, []byte("\r\n"), []byte("\n"))) {
			hint = " (it would match with different line endings: the file uses \\r\\n)"
		} else if bytes.Contains(collapseSpace(old), collapseSpace(oldText)) {
			hint = " (it would match with different whitespace: copy it exactly, indentation included)"
		}
		return agent.Result{}, fmt.Errorf("edit: oldText was not found in %s%s; read the file and copy the text exactly", rel, hint)
	}
	if n := bytes.Count(old, oldText); n > 1 {
		return agent.Result{}, fmt.Errorf("edit: oldText occurs %d times in %s (first at line %d); include more surrounding text so it occurs exactly once", n, rel, 1+bytes.Count(old[:at], []byte("\n")))
	}
	updated := make([]byte, 0, len(old)-len(oldText)+len(newText))
	updated = append(updated, old[:at]...)
	updated = append(updated, newText...)
	updated = append(updated, old[at+len(oldText):]...)
	if err := writeFile(abs, updated); err != nil {
		return agent.Result{}, fmt.Errorf("edit: %s: %w", rel, err)
	}
	return agent.Result{Text: UnifiedDiff(rel, old, updated, 3)}, nil
}

func collapseSpace(b []byte) []byte { return []byte(strings.Join(strings.Fields(string(b)), " ")) }

// UnifiedDiff renders the difference between a and b (which differ in one
// contiguous region, as an edit leaves them) as a unified diff with ctx
// lines of context.
func UnifiedDiff(name string, a, b []byte, ctx int) string {
	al, bl := splitLines(a), splitLines(b)
	// Common prefix and suffix lines bound the changed region.
	pre := 0
	for pre < len(al) && pre < len(bl) && al[pre] == bl[pre] {
		pre++
	}
	suf := 0
	for suf < len(al)-pre && suf < len(bl)-pre && al[len(al)-1-suf] == bl[len(bl)-1-suf] {
		suf++
	}
	if pre == len(al) && pre == len(bl) {
		return ""
	}
	start := max(pre-ctx, 0)
	aEnd := min(len(al)-suf+ctx, len(al))
	bEnd := min(len(bl)-suf+ctx, len(bl))
	var w strings.Builder
	fmt.Fprintf(&w, "--- a/%s\n+++ b/%s\n", name, name)
	fmt.Fprintf(&w, "@@ -%s +%s @@\n", hunkRange(start, aEnd-start), hunkRange(start, bEnd-start))
	for _, l := range al[start:pre] {
		writeDiffLine(&w, ' ', l)
	}
	for _, l := range al[pre : len(al)-suf] {
		writeDiffLine(&w, '-', l)
	}
	for _, l := range bl[pre : len(bl)-suf] {
		writeDiffLine(&w, '+', l)
	}
	for _, l := range al[len(al)-suf : aEnd] {
		writeDiffLine(&w, ' ', l)
	}
	return w.String()
}

// hunkRange is "start,count" with 1-based start (0 for an empty range at the
// top, as diff prints it).
func hunkRange(start, count int) string {
	if count == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if count == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, count)
}

func writeDiffLine(w *strings.Builder, op byte, l string) {
	w.WriteByte(op)
	if strings.HasSuffix(l, "\n") {
		w.WriteString(l)
		return
	}
	w.WriteString(l)
	w.WriteString("\n\\ No newline at end of file\n")
}

// splitLines splits after each newline, keeping it; a last line without one
// is kept as it is.
func splitLines(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, string(b))
			break
		}
		out = append(out, string(b[:i+1]))
		b = b[i+1:]
	}
	return out
}
