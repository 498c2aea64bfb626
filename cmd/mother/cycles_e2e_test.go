package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// The cycles tests run the real binary in the terminal against a model
// that goes round in circles in ways the same-call guard did not see
// (issue 44): two or three calls in turn with the same results, which ran
// to the fifty-turn limit; a loop whose results change, which must run
// on; and a tool call whose arguments come as a JSON string holding the
// object, which the Ollama client's decoder refused (docs/agent.md, "What
// Mother does with a messy model").

// cyclesCalls are the calls a circling model makes: read notes.txt, list
// the events, read the reference.
var cyclesCalls = []ollamatest.Call{
	{Name: "read", Args: map[string]any{"label": "Reading the notes", "path": "notes.txt"}},
	{Name: "list_events", Args: map[string]any{"label": "Checking the events"}},
	{Name: "read", Args: map[string]any{"label": "Reading the reference", "path": "REFERENCE.md", "limit": 3}},
}

// cyclesMother runs Mother in the terminal on one ask, with data as her
// data directory and notes.txt in her workspace, against a model that
// answers with turn(k, r), k being the tool results since the ask; it
// returns stdout and the model calls made.
func cyclesMother(t *testing.T, data, ask string, turn func(k int, r ollamatest.Request) ollamatest.Turn) (string, []ollamatest.Request) {
	t.Helper()
	var mu sync.Mutex
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		mu.Lock()
		defer mu.Unlock()
		return turn(toolResultsSinceAsk(r), r)
	})
	defer fake.Close()
	ws := filepath.Join(data, "workspace")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("buy milk\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runMother(t, ask+"\n", []string{"MOTHER_OLLAMA_URL=" + fake.URL, "MOTHER_MODEL_ID=qwen3:30b-a3b"}, "--cli", data)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	return r.stdout, fake.Requests()
}

// cyclesNotes are the notes the loop added to tool results, in order.
func cyclesNotes(reqs []ollamatest.Request) []string {
	var notes []string
	last := reqs[len(reqs)-1]
	for _, m := range last.Messages {
		if m.Role == "tool" {
			_, note, _ := strings.Cut(m.Content, "[note] ")
			notes = append(notes, note)
		}
	}
	return notes
}

// TestCyclesTerminalTwoCalls: a model that reads notes.txt, lists the
// events, reads notes.txt again, and so on, getting the same results, is
// noted from the end of the second round and stopped before its fourth:
// seven model calls, not fifty. The answer says what was tried.
func TestCyclesTerminalTwoCalls(t *testing.T) {
	t.Parallel()
	out, reqs := cyclesMother(t, t.TempDir(), "tidy my notes", func(k int, r ollamatest.Request) ollamatest.Turn {
		return ollamatest.Turn{Calls: []ollamatest.Call{cyclesCalls[k%2]}}
	})
	if len(reqs) > 8 {
		t.Errorf("the model was called %d times, want at most 8 (7: three rounds of two, then the fourth round's first call, not made)", len(reqs))
	}
	want := "I stopped here: I was going round in circles, making the same two calls in turn (read (Reading the notes), then list_events (Checking the events)) three times over and getting the same results each time."
	if !strings.Contains(out, want) {
		t.Errorf("stdout lacks %q:\n%s", want, out)
	}
	if notes := cyclesNotes(reqs); len(notes) < 4 || notes[2] != "" || !strings.Contains(notes[3], "You are going round in circles: you have now made these two calls in this order twice") {
		t.Errorf("notes on the tool results: %q; want the first on the fourth", notes)
	}
}

// TestCyclesTerminalThreeCalls: the same with three calls in turn: ten
// model calls.
func TestCyclesTerminalThreeCalls(t *testing.T) {
	t.Parallel()
	out, reqs := cyclesMother(t, t.TempDir(), "tidy my notes", func(k int, r ollamatest.Request) ollamatest.Turn {
		return ollamatest.Turn{Calls: []ollamatest.Call{cyclesCalls[k%3]}}
	})
	if len(reqs) > 10 {
		t.Errorf("the model was called %d times, want at most 10 (three rounds of three, then the fourth round's first call, not made)", len(reqs))
	}
	want := "making the same three calls in turn (read (Reading the notes), then list_events (Checking the events), then read (Reading the reference)) three times over"
	if !strings.Contains(out, want) {
		t.Errorf("stdout lacks %q:\n%s", want, out)
	}
}

// TestCyclesTerminalGrowingFile: a model that reads a log that grows and
// lists the events, in turn, eight times each, is making progress (the
// log is longer each time): it is not stopped, and answers.
func TestCyclesTerminalGrowingFile(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	grow := filepath.Join(data, "workspace", "grow.txt")
	out, reqs := cyclesMother(t, data, "watch the log grow", func(k int, r ollamatest.Request) ollamatest.Turn {
		switch {
		case k >= 16:
			return ollamatest.Turn{Text: fmt.Sprintf("The log has grown to %d lines.", k/2)}
		case k%2 == 1:
			return ollamatest.Turn{Calls: []ollamatest.Call{cyclesCalls[1]}}
		}
		f, err := os.OpenFile(grow, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return ollamatest.Turn{Text: err.Error()}
		}
		fmt.Fprintf(f, "line %d\n", k/2+1)
		f.Close()
		return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "read", Args: map[string]any{"label": "Reading the log", "path": "grow.txt"}}}}
	})
	if !strings.Contains(out, "The log has grown to 8 lines.") || strings.Contains(out, "I stopped here") {
		t.Errorf("stdout:\n%s", out)
	}
	if len(reqs) != 17 {
		t.Errorf("the model was called %d times, want 17 (sixteen calls, then the answer)", len(reqs))
	}
	for i, n := range cyclesNotes(reqs) {
		if n != "" {
			t.Errorf("tool result %d has a note: %q", i, n)
		}
	}
}

// TestCyclesTerminalArgumentsAsString: a tool call whose arguments come as
// a JSON string holding the object (servers imitating Ollama's API send
// them so) is made with the object, and the model answers; before, the
// Ollama client's decoder refused the line, and the user read a parser
// error after three attempts.
func TestCyclesTerminalArgumentsAsString(t *testing.T) {
	t.Parallel()
	out, reqs := cyclesMother(t, t.TempDir(), "what do my notes say?", func(k int, r ollamatest.Request) ollamatest.Turn {
		if k == 0 {
			return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "read", RawArgs: json.RawMessage(`"{\"label\": \"Reading the notes\", \"path\": \"notes.txt\"}"`)}}}
		}
		res := toolResults(r)
		if strings.Contains(res[len(res)-1], "buy milk") {
			return ollamatest.Turn{Text: "Your notes say: buy milk."}
		}
		return ollamatest.Turn{Text: "The read failed: " + res[len(res)-1]}
	})
	if !strings.Contains(out, "Your notes say: buy milk.") {
		t.Errorf("stdout:\n%s", out)
	}
	for _, bad := range []string{"Error", "Value looks like object", "ollama:", "attempts"} {
		if strings.Contains(out, bad) {
			t.Errorf("stdout shows %q:\n%s", bad, out)
		}
	}
	if len(reqs) != 2 {
		t.Fatalf("the model was called %d times, want 2", len(reqs))
	}
	// The call goes back to the model with the object as its arguments.
	for _, m := range reqs[1].Messages {
		for _, c := range m.ToolCalls {
			var tc struct {
				Function struct {
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			}
			json.Unmarshal(c, &tc)
			if string(tc.Function.Arguments) != `{"label":"Reading the notes","path":"notes.txt"}` {
				t.Errorf("the call went back with arguments %s", tc.Function.Arguments)
			}
		}
	}
}

// TestCyclesTerminalNothingNew: a model that wanders over the same three
// calls in no fixed order, getting the same results, brings nothing new
// after its first three calls: noted from the sixth repeat, stopped
// before the ninth (twelve model calls, not fifty).
func TestCyclesTerminalNothingNew(t *testing.T) {
	t.Parallel()
	order := []int{0, 1, 2, 0, 2, 1, 2, 0, 1, 0, 2, 1, 0, 2, 1, 0}
	out, reqs := cyclesMother(t, t.TempDir(), "tidy my notes", func(k int, r ollamatest.Request) ollamatest.Turn {
		return ollamatest.Turn{Calls: []ollamatest.Call{cyclesCalls[order[k%len(order)]]}}
	})
	if len(reqs) != 12 {
		t.Errorf("the model was called %d times, want 12 (three new calls, eight that brought nothing new, then one not made)", len(reqs))
	}
	want := "I stopped here: my last eight calls brought nothing new, each one a call I had made before that got the same result again. What I tried:"
	if !strings.Contains(out, want) {
		t.Errorf("stdout lacks %q:\n%s", want, out)
	}
	if notes := cyclesNotes(reqs); len(notes) < 9 || notes[7] != "" || !strings.Contains(notes[8], "Your last six calls each repeated a call you had made before") {
		t.Errorf("notes on the tool results: %q; want the first on the ninth", notes)
	}
}

// TestCyclesChickTwoCalls: a chick's loop is the same agent: its model
// running two commands in turn with the same output is stopped before the
// fourth round (seven model calls), and the chick's answer, which says
// what was tried, reaches the channel.
func TestCyclesChickTwoCalls(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	data, _ := chickData(t, api, nil)
	var mu sync.Mutex
	chickCalls := 0
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		switch r.Model {
		case motherModel:
			if !hasToolResult(r) {
				return motherTurn("Count the files in the workspace.")
			}
			return ollamatest.Turn{Text: "A chick is on it."}
		case chickModel:
			mu.Lock()
			chickCalls++
			mu.Unlock()
			k := len(toolResults(r))
			cmds := []string{"echo checking", "ls -a / | wc -l"}
			return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "bash", Args: map[string]any{"label": fmt.Sprintf("Step %d", k%2+1), "command": cmds[k%2]}}}}
		}
		return ollamatest.Turn{Status: 404, Error: "unknown model " + r.Model}
	})
	defer fake.Close()

	p := startChickMother(t, data, chickEnv(fake))
	io.WriteString(p.stdin, "please count the files\n")
	want := "I stopped here: I was going round in circles, making the same two calls in turn (bash (Step 1), then bash (Step 2)) three times over"
	p.waitOut(t, want, 3*time.Minute)
	waitUntil(t, "the chick's answer in log.jsonl", func() bool {
		b, _ := os.ReadFile(filepath.Join(data, "workspace/channels/cli/local/log.jsonl"))
		return strings.Contains(string(b), want)
	})
	p.stdin.Close()
	if code := p.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, p.out(), p.errs())
	}
	mu.Lock()
	defer mu.Unlock()
	if chickCalls > 8 {
		t.Errorf("the chick's model was called %d times, want at most 8", chickCalls)
	}
}
