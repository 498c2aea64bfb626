package agent

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mother-chat/mother/pkg/model"
)

// A model that has lost track makes calls that bring it nothing new. The
// loop guard catches three shapes of that (docs/agent.md, "What Mother
// does with a messy model"), each with a note on the call's result and
// then a stop, before a call that is not made:
//
//   - the same call again and again in a row: a note the second time when
//     the result did not change, and the third time in any case; the
//     fourth is not made;
//   - a cycle of two to four calls made again in the same order with the
//     same results (A, B, A, B): a note from the end of its second round;
//     the fourth round is not begun;
//   - calls that bring nothing new: noNewStop calls in a row, each one a
//     call made before in the run that got the same result as then (a
//     wander over the same few calls in no fixed order); a note from
//     noNewNote on; the next call made before is not made.
//
// A loop whose results change (a poll of a file that grows) is neither of
// the last two. A compaction starts those two afresh: the model lost the
// results it had, and may fetch them again.

const (
	// maxPeriod is the longest cycle looked for.
	maxPeriod = 4
	// noNewNote and noNewStop are how many calls in a row may repeat an
	// earlier call and its result before the note, and before the stop.
	// Eight is twice the longest cycle: a check made again once or twice,
	// or re-reading a few files to be sure, stays well below it, while a
	// model wandering over the same calls has by then spent eight of its
	// fifty turns learning nothing. A cycle of four reaches it as its
	// third round ends, in step with the cycle's own stop.
	noNewNote = 6
	noNewStop = 8
)

// Why a run was stopped.
const (
	stopSameCall   = "same call"
	stopCycle      = "cycle"
	stopNothingNew = "nothing new"
)

// loopGuard watches the run's calls for a model going round in circles.
type loopGuard struct {
	// The same call in a row.
	key        string // the last call's tool and canonical arguments
	n          int    // times in a row
	lastCall   model.ToolCall
	lastResult string
	haveResult bool
	sameResult bool

	// made are the run's calls as people read them, in order, the one not
	// made included.
	made []string

	// Cycles and calls that bring nothing new, since the run began or its
	// last compaction: the calls with their results, the call-and-result
	// pairs seen and the calls made.
	calls  []guardCall
	seen   map[[32]byte]bool
	keys   map[string]bool
	streak int // the last calls in a row whose pair was seen before

	// why is set when next stops the run: one of the stop kinds, with the
	// cycle's period and length for a cycle.
	why           string
	period, cycle int
}

// guardCall is a call made and its result.
type guardCall struct {
	key    string
	what   string
	result [32]byte
}

// maxTried bounds the calls the final message lists.
const maxTried = 8

// next records a call about to be made and reports whether it is not
// made: the run stops (stop says why).
func (g *loopGuard) next(c model.ToolCall) (stop bool) {
	key := c.Name + "\x00" + canonicalJSON(c.Args)
	if key == g.key {
		g.n++
	} else {
		g.key, g.n, g.haveResult, g.sameResult = key, 1, false, false
	}
	g.lastCall = c
	g.made = append(g.made, g.describe(c))
	if g.n >= 4 {
		g.why = stopSameCall
		return true
	}
	if p, m := g.periodic(); p >= 2 && m >= 2*p && g.calls[len(g.calls)-p].key == key {
		g.why, g.period, g.cycle = stopCycle, p, m+p
		return true
	}
	if g.streak >= noNewStop && g.keys[key] {
		g.why = stopNothingNew
		return true
	}
	return false
}

// result records a call's result and returns the note to add to it, if
// the model is going round in circles.
func (g *loopGuard) result(c model.ToolCall, res Result) string {
	text := res.Text
	if res.IsError {
		text = "error: " + text
	}
	g.sameResult = g.haveResult && text == g.lastResult
	g.lastResult, g.haveResult = text, true

	key := c.Name + "\x00" + canonicalJSON(c.Args)
	h := sha256.New()
	h.Write([]byte(text))
	for _, img := range res.Images {
		h.Write([]byte("\x00" + img.MimeType + "\x00"))
		h.Write(img.Data)
	}
	gc := guardCall{key: key, what: g.describe(c)}
	h.Sum(gc.result[:0])
	g.calls = append(g.calls, gc)
	pair := sha256.Sum256(append(append([]byte(key), 0), gc.result[:]...))
	if g.seen == nil {
		g.seen, g.keys = map[[32]byte]bool{}, map[string]bool{}
	}
	if g.seen[pair] {
		g.streak++
	} else {
		g.streak = 0
	}
	g.seen[pair], g.keys[key] = true, true

	if g.n >= 3 || g.n >= 2 && g.sameResult {
		was := "its result was the same"
		if !g.sameResult {
			was = "its result this time is above"
		}
		times := map[int]string{2: "twice", 3: "three times"}[g.n]
		return fmt.Sprintf("\n\n[note] You have now called %s with these same arguments %s in a row; %s: %q. "+
			"Do not call it again: answer with what you have, or do something else.", c.Name, times, was, clip(strings.TrimSpace(res.Text), 200))
	}
	if p, m := g.periodic(); p >= 2 && m >= p {
		unit := g.calls[len(g.calls)-m-p : len(g.calls)-m]
		return fmt.Sprintf("\n\n[note] You are going round in circles: you have now made these %s calls in this order %s, %s, "+
			"and got the same results each time. Do not make them again: answer with what you have, or do something else.",
			numberWord(p), roundsWord((m+p)/p), unitList(unit))
	}
	if g.streak >= noNewNote {
		return fmt.Sprintf("\n\n[note] Your last %s calls each repeated a call you had made before and got the same result as then: "+
			"nothing new came of them. Do not repeat calls: answer with what you have, or do something else.", numberWord(g.streak))
	}
	return ""
}

// compacted starts the watch for cycles and calls that bring nothing new
// afresh: after a compaction the model no longer has their results.
func (g *loopGuard) compacted() {
	g.calls, g.seen, g.keys, g.streak = nil, nil, nil, 0
}

// periodic finds the shortest period p (up to maxPeriod) with which the
// last calls and their results repeat themselves at least once over: the
// calls of the last m+p repeat with period p, m >= p. It returns 0, 0
// when there is none.
func (g *loopGuard) periodic() (p, m int) {
	n := len(g.calls)
	for p = 1; p <= maxPeriod; p++ {
		m = 0
		for i := n - 1; i-p >= 0 && g.calls[i] == g.calls[i-p]; i-- {
			m++
		}
		if m >= p {
			return p, m
		}
	}
	return 0, 0
}

// stopRepeating ends a run that went round in circles, telling the user
// in plain words what was tried.
func (r *run) stopRepeating() Output {
	g := &r.loops
	var final string
	var err error
	switch g.why {
	case stopCycle:
		k := len(g.calls)
		unit := g.calls[k-g.cycle : k-g.cycle+g.period]
		final = fmt.Sprintf("I stopped here: I was going round in circles, making the same %s calls in turn (%s) three times over and getting the same results each time.",
			numberWord(g.period), unitList(unit))
		if before := g.made[:len(g.made)-1-g.cycle]; len(before) > 0 {
			final += " Before that I tried: " + triedList(before) + "."
		}
		err = fmt.Errorf("the same %d calls in turn three times over, with the same results", g.period)
	case stopNothingNew:
		final = fmt.Sprintf("I stopped here: my last %s calls brought nothing new, each one a call I had made before that got the same result again. What I tried: %s.",
			numberWord(g.streak), triedList(g.made))
		err = fmt.Errorf("%d calls in a row that brought nothing new", g.streak)
	default:
		final = fmt.Sprintf("I stopped here: I was going round in circles, making the same call (%s) four times in a row", g.describe(g.lastCall))
		if g.sameResult {
			final += " and getting the same result each time"
		}
		final += ". What I tried: " + triedList(g.made) + "."
		err = fmt.Errorf("the same %s call four times in a row", g.lastCall.Name)
	}
	if g.lastResult != "" {
		final += "\n\nThe last result was: " + clip(strings.TrimSpace(g.lastResult), 300)
	}
	r.out.Final = final
	if aerr := r.add(r.in.OnMessage, model.Message{Role: model.RoleAssistant, Content: final}); aerr != nil {
		return r.finish(StopError, aerr)
	}
	return r.finish(StopRepeating, err)
}

// notRun is the result of the calls a stop leaves unmade.
func (g *loopGuard) notRun() string {
	switch g.why {
	case stopCycle:
		return "not run: the same calls again, a fourth time round"
	case stopNothingNew:
		return "not run: it would have repeated an earlier call again"
	}
	return "not run: the same call again, a fourth time in a row"
}

// describe is a call for people: the tool and its label or arguments.
func (g *loopGuard) describe(c model.ToolCall) string {
	if l := LabelOf(c.Args); l != "" {
		return c.Name + " (" + clip(l, 60) + ")"
	}
	return c.Name + " " + clip(canonicalJSON(c.Args), 80)
}

// triedList lists calls for the final message: consecutive repeats
// folded, at most maxTried entries (the earlier ones counted).
func triedList(calls []string) string {
	type tried struct {
		what string
		n    int
	}
	var folded []tried
	for _, c := range calls {
		if k := len(folded); k > 0 && folded[k-1].what == c {
			folded[k-1].n++
		} else {
			folded = append(folded, tried{c, 1})
		}
	}
	var parts []string
	if len(folded) > maxTried {
		parts = append(parts, fmt.Sprintf("(%d earlier calls)", len(folded)-maxTried))
		folded = folded[len(folded)-maxTried:]
	}
	for _, t := range folded {
		if t.n > 1 {
			parts = append(parts, fmt.Sprintf("%s, %d times", t.what, t.n))
		} else {
			parts = append(parts, t.what)
		}
	}
	return strings.Join(parts, "; ")
}

// unitList is a cycle's calls in turn: "a, then b, then c".
func unitList(unit []guardCall) string {
	parts := make([]string, len(unit))
	for i, c := range unit {
		parts[i] = c.what
	}
	return strings.Join(parts, ", then ")
}

// numberWord spells small counts.
func numberWord(n int) string {
	if w, ok := map[int]string{2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}[n]; ok {
		return w
	}
	return fmt.Sprint(n)
}

// roundsWord is how many times a cycle's calls were made.
func roundsWord(n int) string {
	if n == 2 {
		return "twice"
	}
	return numberWord(n) + " times"
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
