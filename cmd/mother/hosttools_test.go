package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/store"
)

var (
	notesOnce sync.Once
	notesPath string
	notesErr  error
)

// notesBinary builds examples/mcp-notes once for the tests of this package.
func notesBinary(t *testing.T) string {
	t.Helper()
	notesOnce.Do(func() {
		notesPath = filepath.Join(filepath.Dir(motherBin), "mcp-notes")
		out, err := exec.Command("go", "build", "-o", notesPath, "../../examples/mcp-notes").CombinedOutput()
		if err != nil {
			notesErr = fmt.Errorf("build examples/mcp-notes: %v\n%s", err, out)
		}
	})
	if notesErr != nil {
		t.Fatal(notesErr)
	}
	return notesPath
}

func notesConfig(t *testing.T, notesFile string) string {
	return fmt.Sprintf(`{"mcpServers": {"notes": {"command": %q, "args": ["--file", %q], "timeout": "20s"}}}`, notesBinary(t), notesFile)
}

func toolResult(r ollamatest.Request) string {
	last := r.Messages[len(r.Messages)-1]
	if last.Role != "tool" {
		return ""
	}
	return last.Content
}

// TestTerminalHostTool: Mother starts the example MCP server from
// config.json, her prompt lists its tools, her model calls one through
// invoke_tool, the note lands in the server's file, and the result goes
// back to the model; at exit the server is stopped.
func TestTerminalHostTool(t *testing.T) {
	t.Parallel()
	fake := ollamatest.New(
		ollamatest.Turn{Calls: []ollamatest.Call{{Name: "invoke_tool", Args: map[string]any{"tool": "notes.add", "args": map[string]any{"text": "buy milk", "tags": []any{"shopping"}}}}}},
		ollamatest.Turn{Text: "Noted: buy milk."},
	)
	defer fake.Close()
	data := t.TempDir()
	notesFile := filepath.Join(t.TempDir(), "notes.jsonl")
	os.WriteFile(filepath.Join(data, "config.json"), []byte(notesConfig(t, notesFile)), 0o600)

	r := runMother(t, "remember to buy milk\n", []string{"MOTHER_OLLAMA_URL=" + fake.URL}, "--cli", data)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if got, want := r.stdout, "→ invoke_tool\nNoted: buy milk.\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls", len(reqs))
	}
	sys := reqs[0].System()
	for _, want := range []string{"## Host tools\n", "Call them with invoke_tool", "- notes.add(text: string, tags?: string[]): Add a note. Returns its number.\n  text: the note's text",
		"- notes.search(query: string, limit?: integer)"} {
		if !strings.Contains(sys, want) {
			t.Errorf("system prompt lacks %q", want)
		}
	}
	var tools []string
	for _, raw := range reqs[0].Tools {
		tools = append(tools, string(raw))
	}
	if !strings.Contains(strings.Join(tools, ","), `"name":"invoke_tool"`) {
		t.Errorf("invoke_tool not among Mother's tools")
	}
	if got := toolResult(reqs[1]); got != "Added note 1." {
		t.Errorf("tool result = %q", got)
	}
	b, err := os.ReadFile(notesFile)
	if err != nil || !strings.Contains(string(b), `"text":"buy milk","tags":["shopping"]`) {
		t.Errorf("notes file = %q, %v", b, err)
	}
}

// TestHostToolsReload: the real mother binary picks up new MCP servers on
// SIGHUP (config.json is a symlink whose target changes, which the file
// watch cannot see) and drops them when config.json itself changes, with
// no restart; a broken config.json is refused and the servers keep
// running.
func TestHostToolsReload(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var script []ollamatest.Turn
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		mu.Lock()
		defer mu.Unlock()
		if len(script) == 0 {
			return ollamatest.Turn{Text: "(unscripted)"}
		}
		next := script[0]
		script = script[1:]
		return next
	})
	defer fake.Close()
	push := func(turns ...ollamatest.Turn) {
		mu.Lock()
		script = append(script, turns...)
		mu.Unlock()
	}
	data := t.TempDir()
	elsewhere := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(elsewhere, []byte(`{}`), 0o600)
	if err := os.Symlink(elsewhere, filepath.Join(data, "config.json")); err != nil {
		t.Fatal(err)
	}
	notesFile := filepath.Join(t.TempDir(), "notes.jsonl")
	p := startMother(t, []string{"MOTHER_OLLAMA_URL=" + fake.URL}, "--cli", "--log-level", "info", data)
	waitUntil(t, "the config watch", func() bool { return strings.Contains(p.stderr.String(), "level=INFO") })

	// No servers yet: no host tools in the prompt.
	push(ollamatest.Turn{Text: "Nothing on the host."})
	io.WriteString(p.stdin, "what host tools do you have?\n")
	waitUntil(t, "the first answer", func() bool { return strings.Contains(p.stdout.String(), "Nothing on the host.") })
	if sys := fake.Requests()[0].System(); strings.Contains(sys, "Host tools") {
		t.Errorf("prompt lists host tools with none configured")
	}

	// The symlink's target changes: only SIGHUP tells Mother.
	os.WriteFile(elsewhere, []byte(notesConfig(t, notesFile)), 0o600)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the notes server", func() bool {
		return strings.Contains(p.stderr.String(), `msg="host tool server running" component=hosttools server=notes`)
	})
	push(
		ollamatest.Turn{Calls: []ollamatest.Call{{Name: "invoke_tool", Args: map[string]any{"tool": "notes.add", "args": map[string]any{"text": "reloaded"}}}}},
		ollamatest.Turn{Text: "Added."},
	)
	io.WriteString(p.stdin, "note: reloaded\n")
	waitUntil(t, "the second answer", func() bool { return strings.Contains(p.stdout.String(), "Added.") })
	reqs := fake.Requests()
	if sys := reqs[1].System(); !strings.Contains(sys, "- notes.add(text: string") {
		t.Errorf("prompt after SIGHUP lacks the notes tools")
	}
	if got := toolResult(reqs[2]); got != "Added note 1." {
		t.Errorf("tool result after SIGHUP = %q", got)
	}

	// A broken config.json is refused; the server keeps running.
	if err := store.WriteFileAtomic(filepath.Join(data, "config.json"), []byte(`{"mcpServers": {"notes": {}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the refusal", func() bool { return strings.Contains(p.stderr.String(), "config.json changed but is not valid") })
	if !strings.Contains(p.stderr.String(), `mcpServers.notes: needs \"command\"`) {
		t.Errorf("the refusal does not say why:\n%s", p.stderr.String())
	}

	// config.json itself changes (an editor's save replaces the symlink):
	// the file watch reloads, the server is stopped.
	if err := store.WriteFileAtomic(filepath.Join(data, "config.json"), []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the server to be removed", func() bool { return strings.Contains(p.stderr.String(), "removed=notes") })
	push(
		ollamatest.Turn{Calls: []ollamatest.Call{{Name: "invoke_tool", Args: map[string]any{"tool": "notes.list"}}}},
		ollamatest.Turn{Text: "Gone."},
	)
	io.WriteString(p.stdin, "list my notes\n")
	waitUntil(t, "the third answer", func() bool { return strings.Contains(p.stdout.String(), "Gone.") })
	reqs = fake.Requests()
	if sys := reqs[3].System(); strings.Contains(sys, "Host tools") {
		t.Errorf("prompt still lists host tools after they were removed")
	}
	if got := toolResult(reqs[4]); !strings.Contains(got, `unknown host tool "notes.list": no host tools are available`) {
		t.Errorf("tool result after removal = %q", got)
	}
	p.stdin.Close()
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("mother: %v\n%s", err, p.stderr.String())
	}
	if strings.Contains(p.stderr.String(), "level=ERROR") && !strings.Contains(p.stderr.String(), "not valid") {
		t.Errorf("errors logged:\n%s", p.stderr.String())
	}
}
