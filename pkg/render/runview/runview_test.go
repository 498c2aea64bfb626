package runview

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/render"
)

// These tests drive the view's scheduling logic with the standard library's
// virtual clock (testing/synctest): time advances only when every goroutine
// waits, so throttles are checked exactly and without sleeping. The wire
// behaviour of each platform is tested in the adapters' packages.

type call struct {
	at   time.Duration // since the test started
	op   string
	id   string
	text string
}

type recorder struct {
	mu     sync.Mutex
	start  time.Time
	calls  []call
	seq    int
	editRL []time.Duration // rate-limit answers for the next edits
}

func newRecorder() *recorder { return &recorder{start: time.Now()} }

func (r *recorder) add(op, id, text string) {
	r.calls = append(r.calls, call{at: time.Since(r.start), op: op, id: id, text: text})
}

func (r *recorder) PostMain(_ context.Context, text string, working bool) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	id := fmt.Sprintf("m%d", r.seq)
	r.add(fmt.Sprintf("post(working=%v)", working), id, text)
	return id, nil
}

func (r *recorder) EditMain(_ context.Context, id, text string, working bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.editRL) > 0 {
		d := r.editRL[0]
		r.editRL = r.editRL[1:]
		r.add("edit-429", id, text)
		return &RateLimitError{After: d, Err: errors.New("429")}
	}
	r.add(fmt.Sprintf("edit(working=%v)", working), id, text)
	return nil
}

func (r *recorder) DeleteMain(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.add("delete", id, "")
	return nil
}

func (r *recorder) PostDetail(_ context.Context, mainID, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.add("detail", mainID, text)
	return nil
}

func (r *recorder) PostMore(_ context.Context, text string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	id := fmt.Sprintf("m%d", r.seq)
	r.add("more", id, text)
	return id, nil
}

func (r *recorder) ops() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

func discordOpts() Options {
	return Options{Dialect: render.Discord, Limit: 1900, Details: true, MinEdit: time.Second, Grace: 1500 * time.Millisecond}
}

func TestQuickAnswerIsOneMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		v := New(t.Context(), rec, discordOpts())
		time.Sleep(200 * time.Millisecond)
		id, err := v.Finish(t.Context(), "**Hello** @nobody")
		if err != nil {
			t.Fatal(err)
		}
		ops := rec.ops()
		if len(ops) != 1 || ops[0].op != "post(working=false)" || ops[0].text != "**Hello** @nobody" || id != ops[0].id {
			t.Errorf("calls = %+v, id %q; want one post of the answer", ops, id)
		}
	})
}

func TestToolRunThrottledAndDetailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		v := New(t.Context(), rec, discordOpts())
		// Ten tools in quick succession, 100 ms apart.
		for i := range 10 {
			id := fmt.Sprint("c", i)
			v.Event(t.Context(), agent.Event{Type: agent.EventToolStart, ToolCallID: id, ToolName: "bash", Label: fmt.Sprint("step ", i), Args: []byte(`{"command":"ls"}`)})
			time.Sleep(50 * time.Millisecond)
			v.Event(t.Context(), agent.Event{Type: agent.EventToolEnd, ToolCallID: id, ToolName: "bash", Label: fmt.Sprint("step ", i), Result: "ok", Duration: 50 * time.Millisecond, IsError: i == 3})
			time.Sleep(50 * time.Millisecond)
		}
		v.Event(t.Context(), agent.Event{Type: agent.EventToolStart, ToolCallID: "last", ToolName: "read", Label: "reading notes"})
		time.Sleep(3 * time.Second)
		v.Event(t.Context(), agent.Event{Type: agent.EventToolEnd, ToolCallID: "last", ToolName: "read", Label: "reading notes", Result: "notes"})
		v.Event(t.Context(), agent.Event{Type: agent.EventRunEnd, StopReason: agent.StopDone, Usage: model.Usage{InputTokens: 12345, OutputTokens: 67}})
		id, err := v.Finish(t.Context(), "Done.")
		if err != nil {
			t.Fatal(err)
		}
		<-v.Done()
		ops := rec.ops()
		if ops[0].op != "post(working=true)" || ops[0].text != "→ step 0" {
			t.Fatalf("first call = %+v, want the working message showing the first tool", ops[0])
		}
		var lastEdit time.Duration = -time.Hour
		var details, edits int
		sawLast := false
		for _, c := range ops[1:] {
			switch c.op {
			case "edit(working=true)", "edit(working=false)":
				edits++
				if c.at-lastEdit < time.Second {
					t.Errorf("edit at %v only %v after the previous one (throttle is 1s)", c.at, c.at-lastEdit)
				}
				lastEdit = c.at
				if c.text == "→ reading notes" {
					sawLast = true
				}
			case "detail":
				details++
				if c.id != ops[0].id {
					t.Errorf("detail posted under %s, want %s", c.id, ops[0].id)
				}
			}
		}
		if details != 12 {
			t.Errorf("%d details, want 11 tools + usage", details)
		}
		if edits > 6 {
			t.Errorf("%d edits for 11 tools in ~4s, want them coalesced", edits)
		}
		if !sawLast {
			t.Errorf("the running tool was never shown: %+v", ops)
		}
		final := ops[len(ops)-1]
		if final.op != "edit(working=false)" || final.text != "Done." || id != ops[0].id {
			t.Errorf("last call = %+v (id %q), want the main message replaced by the answer", final, id)
		}
		var usage, errDetail bool
		for _, c := range ops {
			if c.op == "detail" && strings.Contains(c.text, "12,345 tokens in, 67 out") {
				usage = true
			}
			if c.op == "detail" && strings.Contains(c.text, "step 3") && strings.Contains(c.text, "**error**") {
				errDetail = true
			}
		}
		if !usage || !errDetail {
			t.Errorf("usage shown %v, tool error shown %v; calls %+v", usage, errDetail, ops)
		}
	})
}

func TestFinalWaitsOutRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rec.editRL = []time.Duration{2 * time.Second, 3 * time.Second}
		v := New(t.Context(), rec, discordOpts())
		v.Event(t.Context(), agent.Event{Type: agent.EventToolStart, ToolCallID: "a", ToolName: "bash", Label: "work"})
		time.Sleep(100 * time.Millisecond)
		if _, err := v.Finish(t.Context(), "The answer"); err != nil {
			t.Fatal(err)
		}
		ops := rec.ops()
		last := ops[len(ops)-1]
		if last.op != "edit(working=false)" || last.text != "The answer" {
			t.Fatalf("calls %+v: the answer was not delivered", ops)
		}
		// post at 0, first final edit at 1s (throttle) -> 429 (2s) -> 3s -> 429 (3s) -> 6s.
		if last.at < 6*time.Second {
			t.Errorf("answer delivered at %v, before the platform's retry_after allowed (6s)", last.at)
		}
	})
}

func TestSilentRemovesWorkingMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		v := New(t.Context(), rec, discordOpts())
		time.Sleep(2 * time.Second) // past the grace: the working message is up
		id, err := v.Finish(t.Context(), "")
		if err != nil || id != "" {
			t.Fatalf("Finish = %q, %v", id, err)
		}
		ops := rec.ops()
		if len(ops) != 2 || ops[0].op != "post(working=true)" || ops[1].op != "delete" || ops[1].id != ops[0].id {
			t.Errorf("calls = %+v, want post then delete", ops)
		}
	})
}

func TestLongAnswerDiscordFollowsUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		v := New(t.Context(), rec, discordOpts())
		long := strings.Repeat("A sentence that goes on. ", 300) // ~7500 runes
		if _, err := v.Finish(t.Context(), long); err != nil {
			t.Fatal(err)
		}
		ops := rec.ops()
		if len(ops) < 4 || ops[0].op != "post(working=false)" {
			t.Fatalf("calls = %+v", ops)
		}
		for _, c := range ops {
			if render.Len(c.text) > 1900 {
				t.Errorf("%s of %d runes", c.op, render.Len(c.text))
			}
			if c.op != "more" && c != ops[0] {
				t.Errorf("unexpected %s", c.op)
			}
		}
	})
}

func TestLongAnswerSlackGoesToThread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		opts := discordOpts()
		opts.Dialect, opts.Limit, opts.ThreadOverflow, opts.Details = render.Slack, 3900, true, false
		v := New(t.Context(), rec, opts)
		long := strings.Repeat("word ", 3000) // 15000 runes
		if _, err := v.Finish(t.Context(), long); err != nil {
			t.Fatal(err)
		}
		ops := rec.ops()
		if !strings.HasSuffix(ops[0].text, "_(continued in the thread)_") || render.Len(ops[0].text) > 3900 {
			t.Errorf("main message %q… does not point to the thread or is too long", ops[0].text[:40])
		}
		var thread []string
		for _, c := range ops[1:] {
			if c.op != "detail" || c.id != ops[0].id {
				t.Errorf("unexpected call %s on %s", c.op, c.id)
			}
			thread = append(thread, c.text)
		}
		if got := strings.Join(strings.Fields(strings.Join(thread, " ")), " "); got != strings.TrimSpace(long) {
			t.Errorf("thread holds %d runes, want the whole answer (%d)", len(got), len(strings.TrimSpace(long)))
		}
	})
}

func TestQuietHidesDetails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		opts := discordOpts()
		opts.Details = false
		opts.Title = "chick c-7f3a"
		v := New(t.Context(), rec, opts)
		v.Event(t.Context(), agent.Event{Type: agent.EventToolStart, ToolCallID: "a", ToolName: "bash", Label: "compiling"})
		time.Sleep(100 * time.Millisecond)
		v.Event(t.Context(), agent.Event{Type: agent.EventToolEnd, ToolCallID: "a", ToolName: "bash", Result: "secret output"})
		v.Event(t.Context(), agent.Event{Type: agent.EventRunEnd, Usage: model.Usage{InputTokens: 5}})
		time.Sleep(2 * time.Second)
		if _, err := v.Finish(t.Context(), "ok"); err != nil {
			t.Fatal(err)
		}
		ops := rec.ops()
		for _, c := range ops {
			if c.op == "detail" {
				t.Errorf("quiet view posted a detail: %q", c.text)
			}
		}
		if ops[0].text != "**chick c-7f3a**\n→ compiling" {
			t.Errorf("working message = %q, want the title and the running tool", ops[0].text)
		}
		if last := ops[len(ops)-1]; last.text != "**chick c-7f3a**\nok" {
			t.Errorf("final = %q", last.text)
		}
	})
}

// TestThinkingIsAStateOnly: a thinking model shows "Thinking…" in the
// working message, never what it thinks; a running tool's line wins, and
// the answer replaces both.
func TestThinkingIsAStateOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		v := New(t.Context(), rec, discordOpts())
		v.Event(t.Context(), agent.Event{Type: agent.EventMessageStart})
		v.Event(t.Context(), agent.Event{Type: agent.EventThinking})
		v.Event(t.Context(), agent.Event{Type: agent.EventMessageDelta, Text: "the secret plan"})
		time.Sleep(2 * time.Second) // past the grace: the working message is posted
		v.Event(t.Context(), agent.Event{Type: agent.EventToolStart, ToolCallID: "a", ToolName: "bash", Label: "listing"})
		v.Event(t.Context(), agent.Event{Type: agent.EventThinking}) // a thought while the tool runs
		time.Sleep(2 * time.Second)
		if _, err := v.Finish(t.Context(), "Done."); err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, c := range rec.ops() {
			texts = append(texts, c.text)
			if strings.Contains(c.text, "secret plan") {
				t.Errorf("a delta was shown: %+v", c)
			}
		}
		joined := strings.Join(texts, "|")
		if joined != "*Thinking…*|→ listing|Done." {
			t.Errorf("messages %q: want Thinking…, then the tool, then the answer", texts)
		}
	})
}
