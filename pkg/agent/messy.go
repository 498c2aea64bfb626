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
// second one in a row ends the run with a plain message; a model going
// round in circles gets a note, and then the run ends (loops.go).

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
