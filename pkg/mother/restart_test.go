package mother

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// A crash is simulated by leaving the first Mother as it is (its run
// blocked in a tool, nothing cleaned up) and booting a new one on the
// same data directory.

// markerJobs counts the jobs in the in-flight marker at path: 0 when
// there is none, or it says the channel is idle.
func markerJobs(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	var f inflightFile
	if err == nil {
		err = json.Unmarshal(b, &f)
	}
	if err != nil {
		t.Fatalf("in-flight marker: %v", err)
	}
	n := len(f.Queued)
	if f.Running != nil {
		n++
	}
	return n
}

func TestRestartNoticeAfterCrash(t *testing.T) {
	t.Parallel()
	block := newBlockTool()
	h := newHarness(t, withTools(block))
	h.say("C1", "please block", false, mention, from("UMARIO", "mario"))
	block.waitStarted(t)
	h.say("C1", "and then this", false, mention, from("UANNA", "anna"))
	h.say("C2", "nothing pending here", false)
	if _, err := os.Stat(filepath.Join(h.data, "state/inflight/rec/C1.json")); err != nil {
		t.Fatalf("no in-flight marker while a run is in progress: %v", err)
	}

	h.boot() // the crash: a new process on the same data directory
	h.idle()
	all := h.ad.all()
	if len(all) == 0 || all[0].Kind != "post" {
		t.Fatalf("first thing rendered = %+v, want the restart notice", all)
	}
	notice := all[0].Text
	for _, want := range []string{
		"I restarted (after a crash or an upgrade)",
		`Resuming my answer to @mario ("please block"), which was cut off.`,
		`Answering @anna ("and then this"), which was waiting.`,
	} {
		if !strings.Contains(notice, want) {
			t.Errorf("restart notice lacks %q:\n%s", want, notice)
		}
	}
	if all[0].Channel != "C1" || len(h.ad.of("post")) != 1 {
		t.Errorf("notices = %+v, want exactly one, in C1", h.ad.of("post"))
	}
	replies := texts(h.ad.of("finish"))
	if len(replies) != 2 || !strings.HasPrefix(replies[0], "(Resumed after a restart.)\n\nanswer to: [restart]") ||
		replies[1] != "(Late answer: I restarted before I could answer this.)\n\nanswer to: and then this" {
		t.Fatalf("replies after restart = %q", replies)
	}
	// The resumed run saw the cut-off tool call closed with an error and
	// the note, in that order.
	var resumed ollamatest.Request
	for _, r := range h.fake.Requests() {
		if strings.HasPrefix(r.LastUser(), "[restart]") {
			resumed = r
		}
	}
	n := len(resumed.Messages)
	if n < 3 || resumed.Messages[n-2].Role != "tool" || !strings.Contains(resumed.Messages[n-2].Content, "interrupted: Mother restarted") || resumed.Messages[n-1].Content != ResumeNote {
		t.Errorf("resumed run's context ends with %+v", resumed.Messages[max(0, n-3):])
	}
	if jobs := markerJobs(t, filepath.Join(h.data, "state/inflight/rec/C1.json")); jobs != 0 {
		t.Errorf("in-flight marker holds %d jobs after the work finished", jobs)
	}

	// A clean restart with nothing in flight says nothing.
	before := len(h.ad.all())
	h.boot()
	h.idle()
	if len(h.ad.all()) != 0 || before == 0 {
		t.Errorf("restart with nothing in flight rendered %+v", h.ad.all())
	}
}

func TestRunCutOffTwiceIsReportedLost(t *testing.T) {
	t.Parallel()
	block := newBlockTool()
	// This model calls the blocking tool again when it resumes.
	h := newHarness(t, withTools(block), withScript(func(r ollamatest.Request) ollamatest.Turn {
		if last := r.Messages[len(r.Messages)-1]; last.Role == "user" && strings.HasPrefix(last.Content, "[restart]") {
			return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "block"}}}
		}
		return script(r)
	}))
	h.say("C1", "please block", false, mention)
	block.waitStarted(t)
	h.boot()
	block.waitStarted(t) // the resumed run is cut off again
	h.boot()
	h.idle()
	posts := texts(h.ad.of("post"))
	if len(posts) != 1 || !strings.Contains(posts[0], `Lost: my answer to @mario ("please block") was cut off by a restart twice`) {
		t.Fatalf("notice after the second crash = %q", posts)
	}
	if r := h.ad.of("finish"); len(r) != 0 {
		t.Errorf("a run cut off twice was retried: %q", texts(r))
	}
}

func TestShutdownInterruptsAndResumes(t *testing.T) {
	t.Parallel()
	block := newBlockTool()
	h := newHarness(t, withTools(block))
	h.say("C1", "please block", false, mention)
	block.waitStarted(t)
	h.say("C1", "queued behind", false, mention)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := h.m.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	replies := texts(h.ad.of("finish"))
	if len(replies) != 1 || !strings.Contains(replies[0], "Interrupted: I am shutting down") {
		t.Fatalf("replies at shutdown = %q, want one interruption notice (the queued message is not run)", replies)
	}
	h.boot()
	h.idle()
	posts := texts(h.ad.of("post"))
	if len(posts) != 1 || !strings.Contains(posts[0], "Resuming my answer to @mario") || !strings.Contains(posts[0], `Answering @mario ("queued behind")`) {
		t.Fatalf("notice after an upgrade = %q", posts)
	}
	if r := texts(h.ad.of("finish")); len(r) != 2 || !strings.HasSuffix(r[1], "answer to: queued behind") {
		t.Errorf("replies after restart = %q", r)
	}
}

func TestUpgradesDoNotCountAsCrashes(t *testing.T) {
	t.Parallel()
	block := newBlockTool()
	h := newHarness(t, withTools(block), withScript(func(r ollamatest.Request) ollamatest.Turn {
		if last := r.Messages[len(r.Messages)-1]; last.Role == "user" && strings.HasPrefix(last.Content, "[restart]") {
			return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "block"}}}
		}
		return script(r)
	}))
	h.say("C1", "please block", false, mention)
	for range 2 { // two upgrades in a row, each during the run
		block.waitStarted(t)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		if err := h.m.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		h.boot()
	}
	block.waitStarted(t)
	if posts := texts(h.ad.of("post")); len(posts) != 1 || !strings.Contains(posts[0], "Resuming my answer") {
		t.Errorf("notice after the second upgrade = %q, want the run resumed again", posts)
	}
	block.release <- struct{}{}
	h.idle()
}

// TestCrashWhileQueueingAMessage crashes Mother on a message's way from
// the adapter to the queue: at "reserved" its job is in the in-flight
// marker and its line not yet in log.jsonl; at "logged" the line is
// written and the job not yet queued. Either way the next Mother answers
// it, once, and the log holds it once, before the answer.
func TestCrashWhileQueueingAMessage(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"reserved", "logged"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			crashed := false
			h.m.crashHook = func(p string) bool {
				crashed = crashed || p == point
				return p == point
			}
			msg := h.say("C1", "are you there?", false, mention)
			if !crashed {
				t.Fatalf("Deliver never reached the crash point %q", point)
			}

			h.boot() // a new process on the same data directory
			h.idle()
			posts := texts(h.ad.of("post"))
			if len(posts) != 1 || !strings.Contains(posts[0], `Answering @mario ("are you there?"), which was waiting.`) {
				t.Errorf("notice after the crash = %q, want the message announced as waiting", posts)
			}
			replies := h.ad.of("finish")
			if len(replies) != 1 || replies[0].Trigger != msg.ID || !strings.HasSuffix(replies[0].Text, "answer to: are you there?") {
				t.Fatalf("replies after the crash = %+v, want one answer to %s", replies, msg.ID)
			}
			var order []string
			for _, l := range h.logged("C1") {
				switch {
				case l.ID == msg.ID:
					order = append(order, "message")
				case l.ReplyTo == msg.ID:
					order = append(order, "answer")
				}
			}
			if strings.Join(order, ",") != "message,answer" {
				t.Errorf("log.jsonl holds %v, want the message once, then the answer", order)
			}

			h.boot() // nothing is left to answer
			h.idle()
			if all := h.ad.all(); len(all) != 0 {
				t.Errorf("a restart after the answer rendered %+v", all)
			}
			if jobs := markerJobs(t, filepath.Join(h.data, "state/inflight/rec/C1.json")); jobs != 0 {
				t.Errorf("in-flight marker holds %d jobs after the work finished", jobs)
			}
		})
	}
}

// TestRedeliveredMessageIsAnsweredOnce: Mother crashed after logging a
// message, and the adapter delivers it again after the restart (as
// Telegram does with an update whose offset was not saved). The job
// recovered from the marker answers it; the second delivery does not.
func TestRedeliveredMessageIsAnsweredOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.m.crashHook = func(p string) bool { return p == "logged" }
	msg := h.say("C1", "are you there?", false, mention)

	h.boot(func(a *recAdapter) {
		a.onStart = func(in chat.Inbox) { in.Deliver(t.Context(), "rec", msg, true) }
	})
	h.idle()
	replies := h.ad.of("finish")
	if len(replies) != 1 || replies[0].Trigger != msg.ID {
		t.Fatalf("replies after the restart = %+v, want one answer to %s", replies, msg.ID)
	}
	if !strings.Contains(h.log(), "delivered twice") {
		t.Errorf("the second delivery was not recognised:\n%s", h.log())
	}
}

// TestCrashWhileStartingKeepsACutOffRun: the run cut off by a crash is
// recovered and queued again, and Mother crashes again before it runs
// (while starting). The next Mother still resumes it as cut off (it
// does not take it for answered), and that crash, which did not cut the
// run, does not count towards "cut off twice".
func TestCrashWhileStartingKeepsACutOffRun(t *testing.T) {
	t.Parallel()
	block := newBlockTool()
	h := newHarness(t, withTools(block))
	h.say("C1", "please block", false, mention)
	block.waitStarted(t)

	h.crashHook = func(p string) bool { return p == "recovered" }
	h.boot() // recovers the run, then dies before running it
	h.boot()
	h.idle()
	posts := texts(h.ad.of("post"))
	if len(posts) != 1 || !strings.Contains(posts[0], `Resuming my answer to @mario ("please block"), which was cut off.`) {
		t.Errorf("notice after the second crash = %q, want the run resumed", posts)
	}
	if r := texts(h.ad.of("finish")); len(r) != 1 || !strings.HasPrefix(r[0], "(Resumed after a restart.)\n\nanswer to: [restart]") {
		t.Errorf("replies after the second crash = %q, want the resumed run's answer", r)
	}
}

// TestCrashAroundTheAnswer crashes Mother after her answer was posted but
// before it was logged, and just after it was logged (fsynced), the
// second also with a power cut that took the context's tail (the answer
// in it; the marker still says the run is on). The next Mother posts it
// again in the first case (she cannot tell whether it reached the
// channel) and not in the others; either way the log then holds one
// answer, and the context holds it once.
func TestCrashAroundTheAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		point string
		again bool
		keep  string // of context.jsonl, as cutContext
	}{
		{"answer posted", true, "all"},
		{"answer logged", false, "all"},
		{"answer logged", false, "through the message"},
	} {
		t.Run(tc.point+", context "+tc.keep, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			hit := h.freezeAt(tc.point)
			msg := h.say("C1", "hello", false, mention)
			waitClosed(t, hit, "the run to reach the crash point "+tc.point)
			cutContext(t, filepath.Join(h.data, "workspace", "channels", "rec", "C1", "context.jsonl"), msg.ID, tc.keep)

			h.boot()
			h.idle()
			replies := texts(h.ad.of("finish"))
			switch {
			case tc.again && (len(replies) != 1 || replies[0] != "(Resumed after a restart.)\n\nanswer to: hello"):
				t.Errorf("replies after the crash = %q, want the answer posted again", replies)
			case !tc.again && len(replies) != 0:
				t.Errorf("replies after the crash = %q, want none (the answer was logged)", replies)
			}
			answers := 0
			for _, l := range h.logged("C1") {
				if l.ReplyTo == msg.ID {
					answers++
				}
			}
			if answers != 1 {
				t.Errorf("log.jsonl holds %d answers to the message, want 1", answers)
			}

			h.say("C1", "and now?", false, mention)
			h.idle()
			var last ollamatest.Request
			for _, r := range h.fake.Requests() {
				if r.LastUser() != "" && strings.Contains(r.LastUser(), "and now?") {
					last = r
				}
			}
			seen := 0
			for _, m := range last.Messages {
				if m.Role == "assistant" && strings.Contains(m.Content, "answer to: hello") {
					seen++
				}
			}
			if seen != 1 {
				t.Errorf("the next run's context holds the first answer %d times, want once: %+v", seen, last.Messages)
			}
		})
	}
}

// TestMarkersLeftEmptyOrBroken: a marker created and never written (the
// process killed between the two) is removed quietly; one that does not
// parse (a power loss mid-write) is moved aside; neither is a restart to
// tell anyone about.
func TestMarkersLeftEmptyOrBroken(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	dir := filepath.Join(h.data, "state/inflight/rec")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"C1.json": "", "C2.json": "   ", "C3.json": `{"adapter":"rec","chan`} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h.boot()
	h.idle()
	if all := h.ad.all(); len(all) != 0 {
		t.Errorf("rendered %+v, want nothing", all)
	}
	var names []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"C3.json.bad"}) {
		t.Errorf("in-flight markers after the start: %v, want only the broken one, moved aside", names)
	}
}

// TestRecoveredQueuedJobWhoseRunStartedIsResumed: a power cut leaves the
// marker as fsynced when the message was delivered (its job queued) and
// loses the rewrite that said its run had started, while the context holds
// the message the run synced. The restart resumes the run: it does not
// take the message for one an earlier run read and skip it, unanswered
// (the power-cut soak, issue 35).
func TestRecoveredQueuedJobWhoseRunStartedIsResumed(t *testing.T) {
	t.Parallel()
	block := newBlockTool()
	h := newHarness(t, withTools(block))
	h.say("C1", "please block", false, mention, from("UMARIO", "mario"))
	block.waitStarted(t)
	path := filepath.Join(h.data, "state/inflight/rec/C1.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f inflightFile
	if err := json.Unmarshal(b, &f); err != nil || f.Running == nil {
		t.Fatalf("marker %s (%v), want a running job", b, err)
	}
	f.Queued = append([]inflightJob{*f.Running}, f.Queued...)
	f.Running = nil
	b, _ = json.Marshal(f)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	h.boot() // the power cut: a new process on what survived
	h.idle()
	replies := texts(h.ad.of("finish"))
	if len(replies) != 1 || !strings.Contains(replies[0], "answer to: [restart]") {
		t.Fatalf("replies after the restart = %q, want the resumed run's answer", replies)
	}
}
