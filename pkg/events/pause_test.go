package events

import (
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
)

const checkEvent = `{"type":"periodic","channelId":"slack-acme/C1","text":"Check inbox","schedule":"*/15 * * * *","timezone":"Europe/Vienna"}`

// TestPausedUntilACapResets: Mother's run result pauses a periodic event
// until a time; its occurrences before then do not run (and a restart
// keeps the pause), list_events says so, and it runs again afterwards.
func TestPausedUntilACapResets(t *testing.T) {
	t.Parallel()
	f := newFixture(t, clock.NewFake(t0))
	f.start(t)
	f.write(t, "check.json", checkEvent, time.Time{})
	if err := f.w.Reload("check.json"); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(15 * time.Minute)
	sb := f.sink.next(t)
	until := t0.Add(2 * time.Hour)
	sb.done(Result{Finished: true, Pause: &Pause{Until: until, Reason: "budget exhausted: event check.json spent $1.00"}})
	l := f.w.List("slack-acme/C1")
	if len(l) != 1 || l[0].State != "paused" || !l[0].PausedUntil.Equal(until) || !strings.Contains(l[0].Reason, "budget exhausted") {
		t.Fatalf("List = %+v", l)
	}
	f.clk.Advance(15 * time.Minute)
	f.sink.none(t)
	if !strings.Contains(f.log.String(), "periodic event is paused; this occurrence does not run") {
		t.Error("skipped occurrence not logged")
	}

	// A restart keeps the pause.
	f.w.Stop()
	f.w = f.newWatcher(t, f.clk, "slack-acme", "discord-x")
	f.start(t)
	ctx := chat.WithRunInfo(t.Context(), chat.RunInfo{Adapter: "slack-acme", ChannelID: "C1"})
	out, err := call(t, ctx, toolByName(t, f.w, "list_events"), `{}`)
	if err != nil || !strings.Contains(out, "(paused until ") || !strings.Contains(out, "budget exhausted") {
		t.Errorf("list_events = %q, %v", out, err)
	}
	f.clk.Advance(time.Hour)
	f.sink.none(t)
	// Past the pause: the next occurrence runs, and the kept state is gone.
	f.clk.Advance(time.Hour)
	sb = f.sink.next(t)
	if !sb.f.Due.After(until) && !sb.f.Due.Equal(until) {
		t.Errorf("ran at %s, before the pause ended at %s", sb.f.Due, until)
	}
	sb.done(Result{Finished: true})
	if l := f.w.List(""); l[0].State == "paused" {
		t.Errorf("still paused: %+v", l)
	}
}

// TestFailuresInARowAndResume: the watcher counts a periodic event's
// failed runs in a row (Firing.Failures, kept across a restart; a good
// run starts over); a pause without an end holds until resume_event; a
// change to the file starts afresh.
func TestFailuresInARowAndResume(t *testing.T) {
	t.Parallel()
	f := newFixture(t, clock.NewFake(t0))
	f.start(t)
	f.write(t, "check.json", checkEvent, time.Time{})
	if err := f.w.Reload("check.json"); err != nil {
		t.Fatal(err)
	}
	run := func(r Result) Firing {
		t.Helper()
		f.clk.Advance(15 * time.Minute)
		sb := f.sink.next(t)
		sb.done(r)
		return sb.f
	}
	if got := run(Result{Finished: true, Failed: true}).Failures; got != 0 {
		t.Errorf("first run: Failures %d", got)
	}
	if got := run(Result{Finished: true}).Failures; got != 1 {
		t.Errorf("second run: Failures %d", got)
	}
	if got := run(Result{Finished: true, Failed: true}).Failures; got != 0 {
		t.Errorf("a good run did not start the count over: %d", got)
	}
	if got := run(Result{Finished: true, Failed: true}).Failures; got != 1 {
		t.Errorf("Failures %d", got)
	}
	f.w.Stop()
	f.w = f.newWatcher(t, f.clk, "slack-acme", "discord-x")
	f.start(t)
	fr := run(Result{Finished: true, Failed: true, Pause: &Pause{Reason: "its last 3 runs failed"}})
	if fr.Failures != 2 {
		t.Errorf("after a restart: Failures %d, want 2", fr.Failures)
	}
	for range 8 {
		f.clk.Advance(15 * time.Minute)
	}
	f.sink.none(t)
	ctx := chat.WithRunInfo(t.Context(), chat.RunInfo{Adapter: "slack-acme", ChannelID: "C1"})
	other := chat.WithRunInfo(t.Context(), chat.RunInfo{Adapter: "slack-acme", ChannelID: "C2"})
	out, err := call(t, ctx, toolByName(t, f.w, "list_events"), `{}`)
	if err != nil || !strings.Contains(out, "(paused until resumed: its last 3 runs failed)") {
		t.Errorf("list_events = %q, %v", out, err)
	}
	resume := toolByName(t, f.w, "resume_event")
	if _, err := call(t, other, resume, `{"name":"check"}`); err == nil || !strings.Contains(err.Error(), "another channel") {
		t.Errorf("resumed from another channel: %v", err)
	}
	if out, err := call(t, ctx, resume, `{"name":"check"}`); err != nil || !strings.Contains(out, "Resumed check.json") {
		t.Fatalf("resume_event = %q, %v", out, err)
	}
	if out, _ := call(t, ctx, resume, `{"name":"check"}`); !strings.Contains(out, "was not paused") {
		t.Errorf("resume again = %q", out)
	}
	if got := run(Result{Finished: true, Failed: true}).Failures; got != 0 {
		t.Errorf("after resume: Failures %d", got)
	}
	// Changing the file starts afresh, even while paused.
	run(Result{Finished: true, Pause: &Pause{Reason: "x"}})
	f.write(t, "check.json", strings.Replace(checkEvent, "Check inbox", "Check the inbox", 1), time.Time{})
	if err := f.w.Reload("check.json"); err != nil {
		t.Fatal(err)
	}
	if got := run(Result{Finished: true}).Failures; got != 0 {
		t.Errorf("after a change: Failures %d", got)
	}
}

// TestEventsCannotScheduleEventsUnlessAnAdminSaidSo: an event's run may
// not schedule events; an admin's message may create one whose runs may
// (may_schedule), and only an admin's own message may.
func TestEventsCannotScheduleEventsUnlessAnAdminSaidSo(t *testing.T) {
	t.Parallel()
	f := newFixture(t, clock.NewFake(t0))
	f.start(t)
	sched := toolByName(t, f.w, "schedule_event")
	run := func(info chat.RunInfo) (string, error) {
		info.Adapter, info.ChannelID = "slack-acme", "C1"
		return call(t, chat.WithRunInfo(t.Context(), info), sched, `{"name":"more","type":"immediate","text":"again"}`)
	}
	if _, err := run(chat.RunInfo{Kind: "event", Event: "check.json"}); err == nil || !strings.Contains(err.Error(), "an event may not schedule events unless an admin allowed it") {
		t.Errorf("an event's run scheduled an event: %v", err)
	}
	if f.exists("more.json") {
		t.Fatal("written anyway")
	}
	withLeave := `{"name":"daily","type":"periodic","text":"Plan the day","schedule":"*/15 * * * *","timezone":"Europe/Vienna","may_schedule":true}`
	for _, info := range []chat.RunInfo{
		{Kind: "message", UserID: "U1"},
		{Kind: "chick", UserID: "U9", IsAdmin: true},
		{Kind: "event", Event: "x.json", EventMaySchedule: true},
	} {
		info.Adapter, info.ChannelID = "slack-acme", "C1"
		if _, err := call(t, chat.WithRunInfo(t.Context(), info), sched, withLeave); err == nil || !strings.Contains(err.Error(), "only an admin's own message may allow it") {
			t.Errorf("%+v gave an event leave to schedule: %v", info, err)
		}
	}
	admin := chat.WithRunInfo(t.Context(), chat.RunInfo{Adapter: "slack-acme", ChannelID: "C1", Kind: "message", UserID: "U9", IsAdmin: true})
	if _, err := call(t, admin, sched, withLeave); err != nil {
		t.Fatalf("an admin's message: %v", err)
	}
	f.clk.Advance(15 * time.Minute)
	sb := f.sink.next(t)
	if !sb.f.MaySchedule {
		t.Fatalf("the event's firing has no leave: %+v", sb.f)
	}
	// Its run may schedule events, without that leave.
	if _, err := run(chat.RunInfo{Kind: "event", Event: "daily.json", EventMaySchedule: true}); err != nil {
		t.Errorf("the allowed event's run: %v", err)
	}
	if l := f.w.List(""); len(l) != 2 {
		t.Errorf("List = %+v", l)
	}
}
