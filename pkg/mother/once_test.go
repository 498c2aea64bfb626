package mother

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/store"
)

// keyHatchery keeps the hatchery's contract for request keys
// (hatchery.SpawnRequest.Key, tested in pkg/hatchery TestSpawnKeyHatchesOnce):
// one chick per key, a request made again gets it with ErrSpawnedBefore.
type keyHatchery struct {
	*fakeHatchery
	mu    sync.Mutex
	reqs  []hatchery.SpawnRequest
	byKey map[string]hatchery.Info
	n     int
}

func newKeyHatchery() *keyHatchery {
	return &keyHatchery{fakeHatchery: newFakeHatchery(), byKey: map[string]hatchery.Info{}}
}

func (k *keyHatchery) Spawn(_ context.Context, req hatchery.SpawnRequest) (hatchery.Info, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reqs = append(k.reqs, req)
	if in, ok := k.byKey[req.Key]; ok && req.Key != "" {
		return in, fmt.Errorf("spawn chick: %w (%s)", hatchery.ErrSpawnedBefore, in.ID)
	}
	k.n++
	in := hatchery.Info{Record: hatchery.Record{ID: fmt.Sprintf("c-%d", k.n), Adapter: req.Adapter, ChannelID: req.ChannelID, Goal: req.Goal,
		Tier: "local", State: hatchery.StateRunning, Key: req.Key}, Channel: req.Adapter + "/" + req.ChannelID}
	if req.Key != "" {
		k.byKey[req.Key] = in
	}
	return in, nil
}

func (k *keyHatchery) Spawned(key string) (hatchery.Info, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	in, ok := k.byKey[key]
	return in, ok && key != ""
}

func (k *keyHatchery) requests() []hatchery.SpawnRequest {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]hatchery.SpawnRequest(nil), k.reqs...)
}

// hatchScript asks for a chick for "please hatch" and says what the tool
// said once a result follows the message.
func hatchScript(r ollamatest.Request) ollamatest.Turn {
	at := -1
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "user" && strings.Contains(m.Content, "please hatch") {
			at = i
			break
		}
	}
	if at < 0 {
		return script(r)
	}
	for i := len(r.Messages) - 1; i > at; i-- {
		if m := r.Messages[i]; m.Role == "tool" {
			return ollamatest.Turn{Text: "tool said: " + m.Content}
		}
	}
	return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "spawn_chick", Args: map[string]any{"goal": "count the files"}}}}
}

// TestSpawnOnceAcrossAPowerCut: Mother dies right after spawn_chick
// hatched a chick (its record is durable then), and the power cut takes
// with it what context.jsonl had not fsynced: nothing, the tool call,
// or the message's record too. The next Mother resumes the run or runs
// it again, the model asks for the chick again or not, and in every case
// the channel's one request has one chick: the same key, the first chick
// in the answer, none hatched after it.
func TestSpawnOnceAcrossAPowerCut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// keep says how much of context.jsonl survives: every line, or
		// the lines up to the message's record (with it or without).
		keep string
	}{
		{"context kept the call", "all"},
		{"context lost the call", "through the message"},
		{"context lost the message too", "before the message"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hatch := newKeyHatchery()
			h := newHarness(t, withHatchery(hatch), withScript(hatchScript), withChickResults(config.ResultsRelay))
			hit := h.freezeAt("chick spawned")
			msg := h.say("C1", "please hatch", false, mention)
			waitClosed(t, hit, "the run to spawn its chick")
			cutContext(t, filepath.Join(h.data, "workspace", "channels", "rec", "C1", "context.jsonl"), msg.ID, tc.keep)

			h.boot()
			waitFor(t, "the answer", func() bool { return len(h.ad.of("finish")) > 0 })
			fins := texts(h.ad.of("finish"))
			if len(fins) != 1 || !strings.Contains(fins[0], "Chick c-1 was already hatched for this request") {
				t.Errorf("answers after the restart = %q, want one naming chick c-1 as hatched before", fins)
			}
			reqs := hatch.requests()
			for _, r := range reqs {
				if r.Key != reqs[0].Key || !strings.HasSuffix(r.Key, "/"+msg.ID+"/spawn-1") {
					t.Errorf("spawn keys %q, want one key, the message's first spawn", r.Key)
				}
			}
			if hatch.n != 1 {
				t.Errorf("%d chicks hatched for one request, want 1", hatch.n)
			}
			// The chick ends; its view settles.
			in, _ := hatch.Spawned(reqs[0].Key)
			in.State, in.Reason, in.Result = hatchery.StateDone, hatchery.ReasonDone, &hatchery.Result{Text: "12 files"}
			h.m.ChickObserver().ChickEnded(in)
			h.idle()
		})
	}
}

// cutContext leaves the lines of a context.jsonl a power cut would:
// "all", or those up to the record of message id ("through the
// message") or before it ("before the message").
func cutContext(t *testing.T, path, id, keep string) {
	t.Helper()
	if keep == "all" {
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	for i, l := range lines {
		if strings.Contains(l, `"msgId":"`+id+`"`) {
			if keep == "through the message" {
				i++
			}
			if err := os.WriteFile(path, []byte(strings.Join(lines[:i], "")), 0o600); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("context.jsonl holds no record of message %s", id)
}

// TestInterruptedSpawnSaysWhatBecameOfIt: a spawn_chick call a restart
// cut off, without its result in the context, gets what became of it:
// the chick, if its key has one; else that it did not take effect. Any
// other tool's call may or may not have taken effect.
func TestInterruptedSpawnSaysWhatBecameOfIt(t *testing.T) {
	t.Parallel()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ch, err := st.Channel("rec", "C1")
	if err != nil {
		t.Fatal(err)
	}
	hatch := newKeyHatchery()
	m := &Mother{chicks: hatch, cfg: &config.Config{}}
	recs := []store.ContextRecord{
		{Type: store.RecordMessage, MsgID: "M1", Message: &model.Message{Role: model.RoleUser, Content: "two chicks please"}},
		{Type: store.RecordMessage, Message: &model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{
			{ID: "call_1", Name: spawnName}, {ID: "call_2", Name: spawnName}, {ID: "call_3", Name: "update_memory"}}}},
	}
	if _, err := hatch.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "rec", ChannelID: "C1", Goal: "the first", Key: spawnKeyOf(ch, "M1", 1)}); err != nil {
		t.Fatal(err)
	}
	calls := recs[1].Message.ToolCalls
	if r := m.interruptedResult(recs, ch, "M1", calls[0]); r.IsError || !strings.Contains(r.Content, "Chick c-1 was already hatched for this request") || r.ToolCallID != "call_1" {
		t.Errorf("the first call's result = %+v, want chick c-1", r)
	}
	if r := m.interruptedResult(recs, ch, "M1", calls[1]); !r.IsError || !strings.Contains(r.Content, "did not take effect (no chick was hatched for it)") {
		t.Errorf("the second call's result = %+v, want that it did not take effect", r)
	}
	if r := m.interruptedResult(recs, ch, "M1", calls[2]); !r.IsError || !strings.Contains(r.Content, "may or may not have taken effect") {
		t.Errorf("the memory call's result = %+v, want may or may not", r)
	}
}

func TestSpawnOrdinal(t *testing.T) {
	t.Parallel()
	msg := func(id, text string) store.ContextRecord {
		return store.ContextRecord{Type: store.RecordMessage, MsgID: id, Message: &model.Message{Role: model.RoleUser, Content: text}}
	}
	calls := func(names ...string) store.ContextRecord {
		m := &model.Message{Role: model.RoleAssistant}
		for i, n := range names {
			m.ToolCalls = append(m.ToolCalls, model.ToolCall{ID: fmt.Sprintf("call_%d", i+1), Name: n})
		}
		return store.ContextRecord{Type: store.RecordMessage, Message: m}
	}
	result := func(id string) store.ContextRecord {
		return store.ContextRecord{Type: store.RecordMessage, Message: &model.Message{Role: model.RoleTool, ToolCallID: id, Content: "ok"}}
	}
	for _, tc := range []struct {
		name   string
		recs   []store.ContextRecord
		callID string
		want   int
	}{
		{"the run's first", []store.ContextRecord{msg("M1", "a"), calls(spawnName)}, "call_1", 1},
		{"the second call of a step", []store.ContextRecord{msg("M1", "a"), calls(spawnName, "read", spawnName)}, "call_3", 2},
		{"a step after one with a spawn, the same id", []store.ContextRecord{msg("M1", "a"), calls(spawnName), result("call_1"), calls(spawnName)}, "call_1", 2},
		{"a result of this step already in", []store.ContextRecord{msg("M1", "a"), calls(spawnName, spawnName), result("call_1")}, "call_2", 2},
		{"an earlier message's spawns do not count", []store.ContextRecord{msg("M0", "b"), calls(spawnName), result("call_1"), msg("M1", "a"), calls(spawnName)}, "call_1", 1},
		{"the message asked again further on", []store.ContextRecord{msg("M1", "a"), calls(spawnName), result("call_1"), msg("M1", "a"), calls(spawnName)}, "call_1", 1},
		{"the message's record compacted away", []store.ContextRecord{calls(spawnName), result("call_1"), calls(spawnName)}, "call_1", 2},
		{"no step in the context yet", []store.ContextRecord{msg("M1", "a")}, "call_1", 1},
	} {
		if got := spawnOrdinal(tc.recs, "M1", tc.callID); got != tc.want {
			t.Errorf("%s: spawnOrdinal = %d, want %d", tc.name, got, tc.want)
		}
	}
}
