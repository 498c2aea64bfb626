package mother

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/events"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

var evT0 = time.Date(2025, 6, 16, 8, 0, 0, 0, time.UTC)

// startEvents starts a real events watcher (on a fake clock) feeding the
// harness's current Mother, as cmd/mother does.
func (h *harness) startEvents(clk clock.Clock) *events.Watcher {
	h.t.Helper()
	w, err := events.New(events.Options{
		Dir: h.st.EventsDir(), StateDir: filepath.Join(h.data, "state", "events"),
		Resolve: events.AdapterResolver([]string{"rec"}), Clock: clk, Logger: h.m.logger,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := w.Start(h.t.Context(), h.m); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(w.Stop)
	return w
}

func (h *harness) writeEvent(w *events.Watcher, name, content string) {
	h.t.Helper()
	if err := atomicfile.WriteFile(filepath.Join(h.st.EventsDir(), name), []byte(content), 0o600); err != nil {
		h.t.Fatal(err)
	}
	if err := w.Reload(name); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) eventExists(name string) bool {
	_, err := os.Stat(filepath.Join(h.st.EventsDir(), name))
	return err == nil
}

func TestEventRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := h.startEvents(clock.NewFake(evT0))
	h.writeEvent(w, "hook.json", `{"type":"immediate","channelId":"rec/C1","text":"deploy finished"}`)
	waitFor(t, "hook.json deleted after its run", func() bool { return !h.eventExists("hook.json") })
	h.idle()
	fin := h.ad.of("finish")
	if len(fin) != 1 || fin[0].Title != "event hook.json" || fin[0].Trigger != "" || fin[0].Text != "answer to: [EVENT:hook.json:immediate] deploy finished" {
		t.Fatalf("rendered %+v", fin)
	}
	logged := h.logged("C1")
	if len(logged) != 2 || logged[0].Sender.ID != EventSenderID || logged[0].Sender.Username != "event" || logged[0].Text != "[EVENT:hook.json:immediate] deploy finished" {
		t.Fatalf("log.jsonl = %+v, want the event as a message from the event sender, then the reply", logged)
	}
	if lu := h.fake.Requests()[0].LastUser(); !strings.HasSuffix(lu, "[event]: [EVENT:hook.json:immediate] deploy finished") {
		t.Errorf("model saw %q", lu)
	}

	// [SILENT]: nothing posted, nothing logged as a reply, file removed.
	h.writeEvent(w, "quiet.json", `{"type":"immediate","channelId":"rec/C1","text":"be silent"}`)
	waitFor(t, "quiet.json deleted", func() bool { return !h.eventExists("quiet.json") })
	h.idle()
	if fin := h.ad.of("finish"); len(fin) != 2 || fin[1].Text != "" {
		t.Errorf("silent event rendered %+v, want an empty finish", fin)
	}
	if logged := h.logged("C1"); len(logged) != 3 {
		t.Errorf("log.jsonl has %d lines, want 3 (no reply logged for [SILENT])", len(logged))
	}
}

func TestEventQueueOverflowKeepsEvents(t *testing.T) {
	t.Parallel()
	block := newBlockTool()
	h := newHarness(t, withTools(block))
	w := h.startEvents(clock.NewFake(evT0))
	h.say("C1", "please block", false, mention)
	block.waitStarted(t)
	for i := 1; i <= 7; i++ {
		h.writeEvent(w, fmt.Sprintf("e%d.json", i), fmt.Sprintf(`{"type":"immediate","channelId":"rec/C1","text":"event %d"}`, i))
	}
	waiting := 0
	for _, in := range w.List("rec/C1") {
		if in.State == "waiting" {
			waiting++
		}
	}
	if waiting != 2 {
		t.Fatalf("%d events waiting outside Mother's queue, want 2 (5 queued): %+v", waiting, w.List(""))
	}
	// A user message still fits: events have their own limit.
	h.say("C1", "still room for me", false, mention)
	if p := h.ad.of("post"); len(p) != 0 {
		t.Fatalf("notices: %q", texts(p))
	}
	block.release <- struct{}{}
	waitFor(t, "all seven events run", func() bool { return len(w.List("")) == 0 })
	h.idle()
	var titles []string
	for _, f := range h.ad.of("finish") {
		titles = append(titles, f.Title)
	}
	want := "|event e1.json|event e2.json|event e3.json|event e4.json|event e5.json||event e6.json|event e7.json"
	if got := strings.Join(titles, "|"); got != want {
		// The user's message runs after the five queued events, before
		// the two that waited in the watcher.
		t.Errorf("run order %q\nwant %q", got, want)
	}
	if !strings.Contains(h.log(), "event kept until a slot frees") {
		t.Error("full event queue not logged")
	}
}

// TestEventRunsAgainAfterCrash: an event whose run a crash cut off runs
// again at the next start: its run is resumed from the line it logged
// (the line is not logged a second time), with the late note.
func TestEventRunsAgainAfterCrash(t *testing.T) {
	t.Parallel()
	block := newBlockTool()
	clk := clock.NewFake(evT0)
	// This model calls the blocking tool again when it resumes.
	h := newHarness(t, withTools(block), withScript(func(r ollamatest.Request) ollamatest.Turn {
		if last := r.Messages[len(r.Messages)-1]; last.Role == "user" && strings.HasPrefix(last.Content, "[restart]") {
			return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "block"}}}
		}
		return script(r)
	}))
	w := h.startEvents(clk)
	h.writeEvent(w, "hook.json", `{"type":"immediate","channelId":"rec/C1","text":"please block"}`)
	block.waitStarted(t)
	w.Stop() // the process dies mid-run: nothing else is cleaned up

	clk.Advance(time.Hour) // hook.json is now older than the new start
	// The dead process's run stays blocked in its own tool; the new one
	// gets a fresh tool.
	block = newBlockTool()
	h.tools = []agent.Tool{block}
	h.boot()
	h.startEvents(clk)
	block.waitStarted(t) // it runs again
	posts := texts(h.ad.of("post"))
	if len(posts) != 1 || !strings.Contains(posts[0], "The event hook.json was cut off; it runs again.") {
		t.Errorf("restart notice = %q", posts)
	}
	if !h.eventExists("hook.json") {
		t.Fatal("event file deleted before its run finished")
	}
	block.release <- struct{}{}
	waitFor(t, "hook.json deleted", func() bool { return !h.eventExists("hook.json") })
	h.idle()
	fin := h.ad.of("finish")
	if len(fin) != 1 || !strings.HasPrefix(fin[0].Text, "(Late: Mother restarted before this event's run finished") {
		t.Errorf("re-run rendered %q", texts(fin))
	}
	var lines []string
	for _, m := range h.logged("C1") {
		if m.Sender.ID == EventSenderID {
			lines = append(lines, m.Text)
		}
	}
	if len(lines) != 1 || lines[0] != "[EVENT:hook.json:immediate] please block" {
		t.Errorf("event lines in log.jsonl = %q, want the first run's, once", lines)
	}
}

func TestStopEndsEventForGood(t *testing.T) {
	t.Parallel()
	block := newBlockTool()
	h := newHarness(t, withTools(block))
	w := h.startEvents(clock.NewFake(evT0))
	h.writeEvent(w, "long.json", `{"type":"immediate","channelId":"rec/C1","text":"please block"}`)
	block.waitStarted(t)
	h.say("C1", "stop", false, mention)
	waitFor(t, "long.json deleted", func() bool { return !h.eventExists("long.json") })
	h.idle()
	if fin := texts(h.ad.of("finish")); len(fin) != 1 || fin[0] != NoticeStopped {
		t.Errorf("stopped event rendered %q", fin)
	}
}

// TestEventAnsweredOnceAcrossAPowerCut: an event's run answers, and the
// power cut brings back what the run's end had removed or changed without
// an fsync (its file, its accepted marker, the channel's in-flight
// marker); the log.jsonl lines, fsynced, hold the occurrence and the
// answer. The next start finds the occurrence again (Firing.Resumed, the
// same Key) and Mother finds its answer: not run again, the event line
// not logged again, no restart notice, the event done with.
func TestEventAnsweredOnceAcrossAPowerCut(t *testing.T) {
	t.Parallel()
	block := newBlockTool()
	clk := clock.NewFake(evT0)
	h := newHarness(t, withTools(block))
	w := h.startEvents(clk)
	h.writeEvent(w, "hook.json", `{"type":"immediate","channelId":"rec/C1","text":"please block"}`)
	block.waitStarted(t)
	// What the cut brings back: the event file, its accepted marker and
	// the channel's in-flight marker, as they were while the run went on.
	file := filepath.Join(h.st.EventsDir(), "hook.json")
	marker := filepath.Join(h.data, "state", "events", "accepted", "hook.json")
	inflight := filepath.Join(h.data, "state", "inflight", "rec", "C1.json")
	saved := map[string][]byte{}
	for _, p := range []string{file, marker, inflight} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		saved[p] = b
	}
	block.release <- struct{}{}
	waitFor(t, "hook.json deleted after its run", func() bool { return !h.eventExists("hook.json") })
	h.idle()
	if fin := texts(h.ad.of("finish")); len(fin) != 1 || fin[0] != "tool said: released" {
		t.Fatalf("answers = %q, want the run's one", fin)
	}
	w.Stop()
	for p, b := range saved {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	h.boot()
	h.startEvents(clk)
	waitFor(t, "hook.json done with again", func() bool { return !h.eventExists("hook.json") })
	h.idle()
	if fin := texts(h.ad.of("finish")); len(fin) != 0 {
		t.Errorf("answers after the restart = %q, want none (it was answered)", fin)
	}
	if posts := texts(h.ad.of("post")); len(posts) != 0 {
		t.Errorf("notices after the restart = %q, want none (nothing was cut off)", posts)
	}
	var lines, answers int
	for _, m := range h.logged("C1") {
		switch {
		case m.Sender.ID == EventSenderID:
			lines++
		case m.Sender.ID == "UMOTHER":
			answers++
		}
	}
	if lines != 1 || answers != 1 {
		t.Errorf("log.jsonl holds %d event lines and %d answers, want 1 and 1", lines, answers)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("the accepted marker is still there (%v)", err)
	}
}
