package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mother-chat/mother/pkg/model"
)

// stopRepeating ends a run that went round in circles, telling the user
// in plain words what was tried.
func (r *run) stopRepeating() Output {
	g := &r.loops
	final := fmt.Sprintf("I stopped here: I was going round in circles, making the same call (%s) four times in a row", g.describe(g.lastCall))
	if g.sameResult {
		final += " and getting the same result each time"
	}
	final += ". What I tried: " + g.triedList() + "."
	if g.lastResult != "" {
		final += "\n\nThe last result was: " + clip(strings.TrimSpace(g.lastResult), 300)
	}
	r.out.Final = final
	if err := r.add(r.in.OnMessage, model.Message{Role: model.RoleAssistant, Content: final}); err != nil {
		return r.finish(StopError, err)
	}
	return r.finish(StopRepeating, fmt.Errorf("the same %s call four times in a row", g.lastCall.Name))
}

// loopGuard watches the run's calls for a model going round in circles:
// the same call (the same tool with the same arguments) several times in
// a row. The third time, or the second when the result did not change,
// its result gets a note; the fourth time it is not made.
type loopGuard struct {
	key        string // the last call's tool and canonical arguments
	n          int    // times in a row
	lastCall   model.ToolCall
	lastResult string
	haveResult bool
	sameResult bool
	// tried are the run's calls, consecutive repeats folded.
	tried []triedCall
}

type triedCall struct {
	what string
	n    int
}

// maxTried bounds the calls the final message lists.
const maxTried = 8

// next records a call about to be made and reports whether it is the
// fourth in a row, which is not made.
func (g *loopGuard) next(c model.ToolCall) (stop bool) {
	key := c.Name + "\x00" + canonicalJSON(c.Args)
	if key == g.key {
		g.n++
	} else {
		g.key, g.n, g.haveResult, g.sameResult = key, 1, false, false
	}
	g.lastCall = c
	what := g.describe(c)
	if k := len(g.tried); k > 0 && g.tried[k-1].what == what {
		g.tried[k-1].n++
	} else {
		g.tried = append(g.tried, triedCall{what: what, n: 1})
	}
	return g.n >= 4
}

// result records a call's result and returns the note to add to it, if
// the model is repeating itself.
func (g *loopGuard) result(c model.ToolCall, res Result) string {
	text := res.Text
	if res.IsError {
		text = "error: " + text
	}
	g.sameResult = g.haveResult && text == g.lastResult
	g.lastResult, g.haveResult = text, true
	if g.n < 3 && !(g.n >= 2 && g.sameResult) {
		return ""
	}
	was := "its result was the same"
	if !g.sameResult {
		was = "its result this time is above"
	}
	times := map[int]string{2: "twice", 3: "three times"}[g.n]
	return fmt.Sprintf("\n\n[note] You have now called %s with these same arguments %s in a row; %s: %q. "+
		"Do not call it again: answer with what you have, or do something else.", c.Name, times, was, clip(strings.TrimSpace(res.Text), 200))
}

// describe is a call for people: the tool and its label or arguments.
func (g *loopGuard) describe(c model.ToolCall) string {
	if l := LabelOf(c.Args); l != "" {
		return c.Name + " (" + clip(l, 60) + ")"
	}
	return c.Name + " " + clip(canonicalJSON(c.Args), 80)
}

// triedList lists the run's calls for the final message.
func (g *loopGuard) triedList() string {
	tried := g.tried
	var parts []string
	if len(tried) > maxTried {
		parts = append(parts, fmt.Sprintf("(%d earlier calls)", len(tried)-maxTried))
		tried = tried[len(tried)-maxTried:]
	}
	for _, t := range tried {
		if t.n > 1 {
			parts = append(parts, fmt.Sprintf("%s, %d times", t.what, t.n))
		} else {
			parts = append(parts, t.what)
		}
	}
	return strings.Join(parts, "; ")
}

// canonicalJSON is args with its keys sorted and its spacing dropped, so
// the same arguments spelt two ways compare equal; args that are not JSON
// are returned as they are.
func canonicalJSON(args json.RawMessage) string {
	var v any
	if len(args) == 0 || json.Unmarshal(args, &v) != nil {
		return string(args)
	}
	if v == nil {
		return "{}"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return string(args)
	}
	return string(b)
}
