package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
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
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stderr:\n%s", p.stderr.String())
		}
	})
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
	if err := atomicfile.WriteFile(filepath.Join(data, "config.json"), []byte(`{"mcpServers": {"notes": {}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the refusal", func() bool { return strings.Contains(p.stderr.String(), "config.json changed but is not valid") })
	if !strings.Contains(p.stderr.String(), `mcpServers.notes: needs \"command\"`) {
		t.Errorf("the refusal does not say why:\n%s", p.stderr.String())
	}

	// config.json itself changes (an editor's save replaces the symlink):
	// the file watch reloads, the server is stopped.
	if err := atomicfile.WriteFile(filepath.Join(data, "config.json"), []byte(`{}`), 0o600); err != nil {
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
	if err := p.wait(); err != nil {
		t.Fatalf("mother: %v\n%s", err, p.stderr.String())
	}
	if strings.Contains(p.stderr.String(), "level=ERROR") && !strings.Contains(p.stderr.String(), "not valid") {
		t.Errorf("errors logged:\n%s", p.stderr.String())
	}
}

// TestMomctlToolsLs: momctl tools ls shows each server with its transport,
// state and tools (a failing one with its error, a disabled one as such),
// in text and JSON.
func TestMomctlToolsLs(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	notesFile := filepath.Join(t.TempDir(), "notes.jsonl")
	cfg := fmt.Sprintf(`{"mcpServers": {
		"notes": {"command": %q, "args": ["--file", %q]},
		"broken": {"command": "/nonexistent/mcp-mail"},
		"off": {"url": "http://127.0.0.1:1/mcp", "disabled": true}}}`, notesBinary(t), notesFile)
	os.WriteFile(filepath.Join(data, "config.json"), []byte(cfg), 0o600)
	p := startMother(t, nil, "--cli", data)
	defer p.stdin.Close()
	var out string
	waitUntil(t, "momctl tools ls", func() bool {
		var code int
		out, code = momctl(t, data, "tools", "ls")
		return code == 0 && strings.Contains(out, "notes (stdio): running") && strings.Contains(out, "broken (stdio): retrying")
	})
	for _, want := range []string{
		"  notes.add(text, tags?): Add a note. Returns its number.\n",
		"  notes.search(query, limit?): Find notes containing all the words of a query.\n",
		"  error: start: fork/exec /nonexistent/mcp-mail: no such file or directory\n",
		"off (http): disabled",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("momctl tools ls lacks %q:\n%s", want, out)
		}
	}
	js, code := momctl(t, data, "tools", "ls", "--json")
	var servers []struct {
		Name, Transport, State, Error string
		Restarts                      int
		NextAttempt                   *string
		Tools                         []struct {
			Name       string
			Parameters map[string]any
		}
	}
	if code != 0 || json.Unmarshal([]byte(js), &servers) != nil || len(servers) != 3 {
		t.Fatalf("momctl tools ls --json = %s (exit %d)", js, code)
	}
	byName := map[string]int{}
	for i, s := range servers {
		byName[s.Name] = i
	}
	notes, broken, off := servers[byName["notes"]], servers[byName["broken"]], servers[byName["off"]]
	if notes.State != "running" || len(notes.Tools) != 4 || notes.Tools[0].Name != "notes.add" || notes.Tools[0].Parameters["type"] != "object" {
		t.Errorf("notes = %+v", notes)
	}
	if broken.State != "retrying" || broken.NextAttempt == nil || !strings.Contains(broken.Error, "no such file") {
		t.Errorf("broken = %+v", broken)
	}
	if off.State != "disabled" || off.Transport != "http" || len(off.Tools) != 0 {
		t.Errorf("off = %+v", off)
	}
}

// TestChickHostTools: a real chick (a hardened container from the offline
// image) asks Mother for host tools: the one chicks.hostTools allows runs
// on Mother's host (the example server writes its file there), the one it
// does not allow is refused with the allowed list and never reaches the
// server. The chick's prompt lists only the allowed tools.
func TestChickHostTools(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	data, _ := chickData(t, api, nil)
	notesFile := filepath.Join(t.TempDir(), "notes.jsonl")
	cfgPath := filepath.Join(data, "config.json")
	var cfg map[string]any
	b, _ := os.ReadFile(cfgPath)
	json.Unmarshal(b, &cfg)
	cfg["chicks"].(map[string]any)["hostTools"] = []string{"notes.add", "notes.search"}
	cfg["mcpServers"] = map[string]any{"notes": map[string]any{"command": notesBinary(t), "args": []string{"--file", notesFile}}}
	b, _ = json.Marshal(cfg)
	os.WriteFile(cfgPath, b, 0o600)

	var mu sync.Mutex
	var chickReqs []ollamatest.Request
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		switch r.Model {
		case motherModel:
			if !hasToolResult(r) {
				return motherTurn("Write down that the backup ran, then tidy up the notes.")
			}
			return ollamatest.Turn{Text: "A chick is on it."}
		case chickModel:
			mu.Lock()
			chickReqs = append(chickReqs, r)
			mu.Unlock()
			res := toolResults(r)
			switch len(res) {
			case 0:
				return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "host_tool", Args: map[string]any{"tool": "notes.add", "args": map[string]any{"text": "the backup ran"}}}}}
			case 1:
				return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "host_tool", Args: map[string]any{"tool": "notes.delete", "args": map[string]any{"id": 1}}}}}
			}
			return ollamatest.Turn{Text: "Chick says: " + strings.Join(res, " | ")}
		}
		return ollamatest.Turn{Status: 404, Error: "unknown model " + r.Model}
	})
	defer fake.Close()

	p := startChickMother(t, data, chickEnv(fake))
	io.WriteString(p.stdin, "note the backup and tidy up\n")
	p.waitOut(t, "Chick says:", 2*time.Minute)
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, p.out(), p.errs())
	}
	out := p.out()
	if !strings.Contains(out, "Chick says: Added note 1. | ") {
		t.Errorf("the allowed tool did not run for the chick:\n%s", out)
	}
	// The chick's own loop refuses it first: host_tool's schema lists the
	// tools chicks may call (a chick that goes around its loop meets
	// Mother's refusal, TestInvokeForChick in pkg/hosttools).
	if !strings.Contains(out, `field "tool" must be one of "notes.add", "notes.search", got string "notes.delete"`) {
		t.Errorf("the forbidden tool was not refused clearly:\n%s", out)
	}
	notes, err := os.ReadFile(notesFile)
	if err != nil || !strings.Contains(string(notes), `"text":"the backup ran"`) || strings.Contains(string(notes), "deleted") {
		t.Errorf("notes file = %q, %v", notes, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(chickReqs) == 0 {
		t.Fatal("the chick never called its model")
	}
	sys := chickReqs[0].System()
	if !strings.Contains(sys, "## Host tools\n") || !strings.Contains(sys, "with host_tool") || !strings.Contains(sys, "- notes.add(text: string") ||
		strings.Contains(sys, "notes.delete") {
		t.Errorf("chick prompt's host tools section is wrong:\n%s", sys)
	}
	var tools []string
	for _, raw := range chickReqs[0].Tools {
		tools = append(tools, string(raw))
	}
	if all := strings.Join(tools, ","); !strings.Contains(all, `"name":"host_tool"`) || !strings.Contains(all, `"enum":["notes.add","notes.search"]`) {
		t.Errorf("chick tools = %s", all)
	}
}
