package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/model"
)

// guardStep is one call the model makes and the result it gets; "-"
// marks a compaction before the call.
type guardStep struct {
	call, result string
}

// steps reads "a=x b=y -a=x": call a gets result x; a leading "-" is a
// compaction before the call. A call's arguments are {"path": name}.
func steps(s string) []guardStep {
	var out []guardStep
	for _, f := range strings.Fields(s) {
		c, r, _ := strings.Cut(f, "=")
		out = append(out, guardStep{c, r})
	}
	return out
}

// runGuard feeds steps to a guard as the loop does and returns, per step,
// "." for no note, "1", "c" or "n" for the note of the same call, of a
// cycle or of nothing new, and "stop" for the call that is not made (the
// last), with why.
func runGuard(t *testing.T, ss []guardStep) (marks []string, why string, g *loopGuard) {
	t.Helper()
	g = &loopGuard{}
	for i, s := range ss {
		name := s.call
		if strings.HasPrefix(name, "-") {
			name = name[1:]
			g.compacted()
		}
		args, _ := json.Marshal(map[string]string{"path": name})
		c := model.ToolCall{ID: fmt.Sprint("call_", i), Name: "read", Args: args}
		if g.next(c) {
			return append(marks, "stop"), g.why, g
		}
		note := g.result(c, Result{Text: "result " + s.result})
		switch {
		case note == "":
			marks = append(marks, ".")
		case strings.Contains(note, "with these same arguments"):
			marks = append(marks, "1")
		case strings.Contains(note, "going round in circles"):
			marks = append(marks, "c")
		case strings.Contains(note, "nothing new"):
			marks = append(marks, "n")
		default:
			t.Fatalf("step %d: unknown note %q", i, note)
		}
	}
	return marks, "", g
}

func TestLoopGuard(t *testing.T) {
	for _, tc := range []struct {
		name, steps string
		marks       string // one mark a step, space-separated
		why         string
	}{
		{"same call, same result", "a=1 a=1 a=1 a=1 a=1",
			". 1 1 stop", stopSameCall},
		{"same call, changing result: the fourth is still not made", "a=1 a=2 a=3 a=4",
			". . 1 stop", stopSameCall},
		{"period 2", "a=1 b=2 a=1 b=2 a=1 b=2 a=1 b=2",
			". . . c c c stop", stopCycle},
		{"period 2 after other calls", "x=0 y=0 a=1 b=2 a=1 b=2 a=1 b=2 a=1",
			". . . . . c c c stop", stopCycle},
		{"period 3", "a=1 b=2 c=3 a=1 b=2 c=3 a=1 b=2 c=3 a=1",
			". . . . . c c c c stop", stopCycle},
		{"period 4", "a=1 b=2 c=3 d=4 a=1 b=2 c=3 d=4 a=1 b=2 c=3 d=4 a=1",
			". . . . . . . c c c c c stop", stopCycle},
		{"period 4 with a call twice in it", "a=1 b=2 a=1 c=3 a=1 b=2 a=1 c=3 a=1 b=2 a=1 c=3 a=1",
			". . . . . . . c c c c c stop", stopCycle},
		{"period 2, one result changing: a poll, never stopped", "a=1 b=0 a=2 b=0 a=3 b=0 a=4 b=0 a=5 b=0 a=6 b=0 a=7 b=0 a=8 b=0",
			". . . . . . . . . . . . . . . .", ""},
		{"period 3, a result changing every round", "a=1 b=0 c=0 a=2 b=0 c=0 a=3 b=0 c=0 a=4 b=0 c=0 a=5 b=0 c=0",
			". . . . . . . . . . . . . . .", ""},
		{"a cycle broken by a new call starts again", "a=1 b=2 a=1 b=2 x=9 a=1 b=2 a=1 b=2",
			". . . c . . . . c", ""},
		{"interleaved calls bringing nothing new", "a=1 b=2 c=3 a=1 c=3 b=2 c=3 a=1 b=2 a=1 c=3 b=2 a=1 c=3",
			". . . . . . . . n n n stop", stopNothingNew},
		{"a new result resets nothing new (the calls after it then cycle)", "a=1 b=2 c=3 a=1 c=3 b=2 c=3 a=1 b=2 a=1 c=9 b=2 a=1 c=9 b=2",
			". . . . . . . . n n . . . c c", ""},
		{"a compaction starts afresh", "a=1 b=2 a=1 b=2 a=1 b=2 -a=1 b=2 a=1",
			". . . c c c . . .", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			marks, why, _ := runGuard(t, steps(tc.steps))
			if got := strings.Join(marks, " "); got != tc.marks || why != tc.why {
				t.Errorf("guard over %q = %q (stop %q), want %q (stop %q)", tc.steps, got, why, tc.marks, tc.why)
			}
		})
	}
}

// TestLoopGuardSpellings: the same arguments spelt two ways are the same
// call; an error result is not the same as a result with its text.
func TestLoopGuardSpellings(t *testing.T) {
	g := &loopGuard{}
	a := model.ToolCall{Name: "bash", Args: json.RawMessage(`{"command":"ls","label":"x"}`)}
	b := model.ToolCall{Name: "bash", Args: json.RawMessage(`{ "label": "x", "command": "ls" }`)}
	c := model.ToolCall{Name: "read", Args: json.RawMessage(`{"path":"n"}`)}
	seq := []struct {
		call model.ToolCall
		res  Result
	}{{a, Result{Text: "x"}}, {c, Result{Text: "y"}}, {b, Result{Text: "x"}}, {c, Result{Text: "y"}}, {a, Result{Text: "x"}}, {c, Result{Text: "y", IsError: true}}}
	var notes []bool
	for _, s := range seq {
		if g.next(s.call) {
			t.Fatal("stopped")
		}
		notes = append(notes, g.result(s.call, s.res) != "")
	}
	if want := []bool{false, false, false, true, true, false}; fmt.Sprint(notes) != fmt.Sprint(want) {
		t.Errorf("notes %v, want %v (the error result breaks the cycle)", notes, want)
	}
}

// TestLoopGuardAnswers: what the stop tells the user names the calls, and
// is bounded.
func TestLoopGuardAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, steps string
		want        []string
	}{
		{"cycle", "x=0 a=1 b=2 a=1 b=2 a=1 b=2 a=1", []string{
			`I stopped here: I was going round in circles, making the same two calls in turn (read {"path":"a"}, then read {"path":"b"}) three times over and getting the same results each time.`,
			`Before that I tried: read {"path":"x"}.`, "The last result was: result 2"}},
		{"nothing new", "a=1 b=2 c=3 a=1 c=3 b=2 c=3 a=1 b=2 a=1 c=3 b=2 a=1 c=3", []string{
			"I stopped here: my last eight calls brought nothing new", `(4 earlier calls); read {"path":"c"}; read {"path":"b"}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, why, g := runGuard(t, steps(tc.steps))
			if why == "" {
				t.Fatal("not stopped")
			}
			r := &run{loops: *g, a: &Agent{cfg: Config{Clock: clock.Real{}}}, emit: func(Event) {}}
			out := r.stopRepeating()
			t.Logf("answer: %s", out.Final)
			for _, w := range tc.want {
				if !strings.Contains(out.Final, w) {
					t.Errorf("answer %q lacks %q", out.Final, w)
				}
			}
			if len(out.Final) > 1200 || out.StopReason != StopRepeating {
				t.Errorf("answer of %d bytes, stop %s", len(out.Final), out.StopReason)
			}
		})
	}
}
