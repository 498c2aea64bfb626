package agent

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mother-chat/mother/pkg/model"
)

// What the loop does with a small model's messy replies (docs/agent.md,
// "What Mother does with a messy model"): thinking is cut out of every
// answer; a tool call written as text is made after all; a reply that
// cannot be used (empty, or a call written as text that cannot be read)
// is asked for again once, with a note the context does not keep, and a
// second one in a row ends the run with a plain message; the same call
// made again and again gets a note, and the fourth time ends the run.

// Kinds of unusable reply.
const (
	unusableEmpty  = "empty"
	unusableMarkup = "markup"
)

// unusableText is what a retry event says for each kind.
var unusableText = map[string]string{
	unusableEmpty:  "the model's answer was empty; asking it again",
	unusableMarkup: "the model wrote a tool call as text that could not be used; asking it again",
}

// readReply turns a model's reply into the message the context keeps:
// without its thinking, with calls written as text made into calls, and
// arguments sent as a string holding an object made into that object. A
// reply that cannot be used is returned with its kind, and r.problem and
// r.raw say what it held.
func (r *run) readReply(resp model.Response) (model.Message, string) {
	msg := resp.Message
	msg.Role = model.RoleAssistant
	msg.Content = StripThinking(msg.Content)
	r.raw, r.problem, r.cutShort = msg.Content, "", resp.StopReason == "length"
	if len(msg.ToolCalls) == 0 {
		tc := findTextCalls(msg.Content, r.a.byName)
		switch {
		case len(tc.calls) > 0:
			msg.ToolCalls, msg.Content = tc.calls, tc.rest
		case tc.problem != "":
			r.problem = tc.problem
			msg.Content = tc.rest
			return msg, unusableMarkup
		}
	}
	if len(msg.ToolCalls) > 0 {
		calls := make([]model.ToolCall, len(msg.ToolCalls))
		for i, c := range msg.ToolCalls {
			c.Args = repairArgs(c.Args)
			calls[i] = c
		}
		msg.ToolCalls = calls
		return msg, ""
	}
	if strings.TrimSpace(msg.Content) == "" {
		return msg, unusableEmpty
	}
	return msg, ""
}

// nudgeMessages are added to the next request only (never stored): what
// was wrong with the reply and what to do instead.
func (r *run) nudgeMessages(kind string) []model.Message {
	switch kind {
	case unusableMarkup:
		return []model.Message{
			{Role: model.RoleAssistant, Content: r.raw},
			{Role: model.RoleUser, Content: "[note] Your last reply wrote a tool call as text instead of making it, and it cannot be used: " +
				r.problem + ". Make the call through the tool-calling interface, not as text in your answer (your tools: " +
				strings.Join(r.a.toolNames(), ", ") + "), or, if no tool is needed, answer in plain words without any markup."},
		}
	default:
		note := "[note] Your last reply was empty."
		if r.cutShort {
			note = "[note] Your last reply ran out of room before it said anything (the thinking used it all up)."
		}
		return []model.Message{{Role: model.RoleUser, Content: note + " Answer the last message in plain words now, briefly, or call one of your tools."}}
	}
}

// giveUp ends a run whose model gave a second unusable reply in a row,
// with a plain message for the user; the context keeps that message, as
// the channel sees it.
func (r *run) giveUp(kind string) Output {
	var final string
	var err error
	switch kind {
	case unusableMarkup:
		final = "Sorry, I could not do that: my model twice wrote a tool call as text instead of making it (" + r.problem + "). Please try again, or put it another way."
		err = fmt.Errorf("the model wrote an unusable tool call as text twice: %s", r.problem)
	default:
		final = "Sorry, my model gave me an empty answer twice, so I have no answer to that. Please try again, or put it another way."
		err = fmt.Errorf("the model's answer was empty twice")
	}
	r.nudge = nil
	r.out.Final = final
	if aerr := r.add(r.in.OnMessage, model.Message{Role: model.RoleAssistant, Content: final}); aerr != nil {
		return r.finish(StopError, aerr)
	}
	return r.finish(StopUnusable, err)
}

// skipCalls records calls that were not run, with why, so every call in
// the context has its result.
func (r *run) skipCalls(calls []model.ToolCall, why string) error {
	for _, c := range calls {
		if err := r.add(r.in.OnMessage, model.Message{Role: model.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: why, IsError: true}); err != nil {
			return err
		}
	}
	return nil
}

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

// labelOptional is a tool's schema with "label" taken out of its required
// fields: the label is what people see while the tool runs, and the loop
// shows the tool's name without one, so a call is not refused for it.
func labelOptional(schema json.RawMessage) json.RawMessage {
	var top map[string]json.RawMessage
	if json.Unmarshal(schema, &top) != nil {
		return schema
	}
	var req []string
	if json.Unmarshal(top["required"], &req) != nil || !slices.Contains(req, "label") {
		return schema
	}
	req = slices.DeleteFunc(req, func(s string) bool { return s == "label" })
	top["required"], _ = json.Marshal(req)
	out, err := json.Marshal(top)
	if err != nil {
		return schema
	}
	return out
}
