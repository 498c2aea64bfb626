package mother

import (
	"context"
	"fmt"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/store"
)

// A run's spawn_chick calls are made once across a power cut. The chick's
// record is durable (chicks.jsonl, fsynced) when spawn_chick returns; the
// context that holds the call and its result is not (context.jsonl is
// fsynced within store.FlushAfter). A cut in between leaves a chick the
// context does not know of, and the run, resumed or run again, would ask
// for it a second time. So every call carries a key the hatchery keeps
// with the chick (hatchery.SpawnRequest.Key): the run's message and the
// call's place among the run's spawn_chick calls, which the context
// gives again after the cut whether it kept the call or not. A call made
// again under a key a chick has gets that chick, not a second one; a call
// the context kept without its result gets the real one at resume.

// spawnName is the name of Mother's spawn_chick tool.
const spawnName = "spawn_chick"

// spawnKey is the key of the spawn_chick call ctx runs (agent.CallID) in
// the run ctx carries (withRunLog): "" outside a run for a message.
func spawnKey(ctx context.Context) string {
	rl, ok := ctx.Value(runLogKey{}).(runLog)
	if !ok || rl.trigger == "" || rl.sess == nil {
		return ""
	}
	return spawnKeyOf(rl.ch, rl.trigger, spawnOrdinal(rl.sess.Records(), rl.trigger, agent.CallID(ctx)))
}

func spawnKeyOf(ch *store.Channel, trigger string, n int) string {
	return fmt.Sprintf("%s/%s/spawn-%d", ch.QualifiedID(), trigger, n)
}

// spawnOrdinal is the place (1 for the first) of call callID of the last
// assistant message in recs among the spawn_chick calls made since the
// context's record of message trigger (all of recs when a compaction
// took that record away). Ids repeat across turns, so only the last
// assistant message is searched for it: the step being run, or the one
// a restart cut off.
func spawnOrdinal(recs []store.ContextRecord, trigger, callID string) int {
	start := triggerRecord(recs, trigger) + 1
	last := -1
	for i := len(recs) - 1; i >= start; i-- {
		if m := recs[i].Message; m != nil && m.Role == model.RoleAssistant {
			last = i
			break
		}
	}
	n := 0
	for i := start; i < last; i++ {
		if m := recs[i].Message; m != nil && m.Role == model.RoleAssistant {
			for _, c := range m.ToolCalls {
				if c.Name == spawnName {
					n++
				}
			}
		}
	}
	if last < 0 {
		return n + 1
	}
	for _, c := range recs[last].Message.ToolCalls {
		if c.Name == spawnName {
			n++
			if c.ID == callID {
				return n
			}
		}
	}
	return n + 1
}

// spawnedBefore is spawn_chick's result for a call whose key a chick
// already has: the call was made before a restart, and took effect.
func (m *Mother) spawnedBefore(in hatchery.Info) string {
	if in.State.Final() {
		return fmt.Sprintf("Chick %s was already hatched for this request before I restarted (goal: %s), and it has ended (%s); how it ended is told in this channel. Do not spawn it again.",
			in.ID, oneLine(in.Goal, 200), chickOutcome(in))
	}
	return fmt.Sprintf("Chick %s was already hatched for this request before I restarted (tier %s, goal: %s); it is %s. Do not spawn it again and do not wait for it: tell the user briefly that it is on its way; %s.",
		in.ID, in.Tier, oneLine(in.Goal, 200), in.State, m.chickEndsWith())
}

// interruptedResult is the result a tool call a restart cut off gets
// (resumeContext): for spawn_chick, what became of it, from the hatchery;
// for any other tool, that it may or may not have taken effect.
func (m *Mother) interruptedResult(recs []store.ContextRecord, ch *store.Channel, trigger string, c model.ToolCall) model.Message {
	res := model.Message{Role: model.RoleTool, ToolCallID: c.ID, ToolName: c.Name, IsError: true,
		Content: "interrupted: Mother restarted before this tool call finished; it may or may not have taken effect"}
	if c.Name != spawnName || m.chicks == nil || trigger == "" {
		return res
	}
	if in, ok := m.chicks.Spawned(spawnKeyOf(ch, trigger, spawnOrdinal(recs, trigger, c.ID))); ok {
		res.IsError, res.Content = false, m.spawnedBefore(in)
		return res
	}
	// The chick's record is durable before spawn_chick returns: none
	// under the key, no chick.
	res.Content = "interrupted: Mother restarted before this call hatched a chick; it did not take effect (no chick was hatched for it). Call spawn_chick again if the goal still needs one."
	return res
}
