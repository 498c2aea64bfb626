package events

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/clock"
)

// recSink is a Sink with a capacity per channel whose runs the test ends
// by hand (Mother's own dispatch is tested in pkg/mother).
type recSink struct {
	mu     sync.Mutex
	cap    int
	active map[string]int
	subs   []*sub
	ch     chan *sub
	err    error
}

type sub struct {
	f    Firing
	done func(Result)
}

func newSink(capacity int) *recSink {
	return &recSink{cap: capacity, active: map[string]int{}, ch: make(chan *sub, 100)}
}

func (s *recSink) Submit(_ context.Context, f Firing, done func(Result)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	q := f.Adapter + "/" + f.ChannelID
	if s.active[q] >= s.cap {
		return fmt.Errorf("channel %s: %w", q, ErrChannelFull)
	}
	s.active[q]++
	sb := &sub{f: f}
	sb.done = func(r Result) {
		s.mu.Lock()
		s.active[q]--
		s.mu.Unlock()
		done(r)
	}
	s.subs = append(s.subs, sb)
	s.ch <- sb
	return nil
}

func (s *recSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}

// next waits for the next submission (real-time bound: fsnotify tests).
func (s *recSink) next(t *testing.T) *sub {
	t.Helper()
	select {
	case sb := <-s.ch:
		return sb
	case <-time.After(5 * time.Second):
		t.Fatal("no event was submitted")
		return nil
	}
}

// none checks that nothing was submitted (for fake-clock tests, where
// everything happens synchronously).
func (s *recSink) none(t *testing.T) {
	t.Helper()
	select {
	case sb := <-s.ch:
		t.Fatalf("unexpected submission %q", sb.f.Line())
	default:
	}
}

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type fixture struct {
	dir, state string
	clk        *clock.Fake
	w          *Watcher
	sink       *recSink
	log        *logBuf
}

var t0 = time.Date(2025, 6, 16, 8, 0, 0, 0, time.UTC) // a Monday

func newFixture(t *testing.T, clk clock.Clock, adapters ...string) *fixture {
	t.Helper()
	if len(adapters) == 0 {
		adapters = []string{"slack-acme", "discord-x"}
	}
	root := t.TempDir()
	f := &fixture{dir: filepath.Join(root, "events"), state: filepath.Join(root, "state"), sink: newSink(5), log: &logBuf{}}
	if fc, ok := clk.(*clock.Fake); ok {
		f.clk = fc
	}
	f.w = f.newWatcher(t, clk, adapters...)
	return f
}

func (f *fixture) newWatcher(t *testing.T, clk clock.Clock, adapters ...string) *Watcher {
	t.Helper()
	w, err := New(Options{
		Dir: f.dir, StateDir: f.state, Resolve: AdapterResolver(adapters), Clock: clk,
		Logger:   slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Debounce: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

func (f *fixture) start(t *testing.T) {
	t.Helper()
	if err := f.w.Start(t.Context(), f.sink); err != nil {
		t.Fatal(err)
	}
}

// write puts an event file in place the way Mother's tools do (temp file
// and rename) and sets its mtime.
func (f *fixture) write(t *testing.T, name, content string, mtime time.Time) {
	t.Helper()
	p := filepath.Join(f.dir, name)
	if err := atomicfile.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if !mtime.IsZero() {
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *fixture) exists(name string) bool {
	_, err := os.Stat(filepath.Join(f.dir, name))
	return err == nil
}

func (f *fixture) marked(name string) bool {
	_, err := os.Stat(filepath.Join(f.state, acceptedDir, name))
	return err == nil
}

func (f *fixture) movedTo(t *testing.T, sub, name string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(f.state, sub, "*-"+name))
	if len(m) != 1 {
		return ""
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestImmediateRunsAndIsDeletedWhenFinished(t *testing.T) {
	t.Parallel()
	f := newFixture(t, clock.NewFake(t0))
	f.start(t)
	f.write(t, "webhook-1.json", `{"type":"immediate","channelId":"slack-acme/C123","text":"New support ticket #12345"}`, t0.Add(time.Second))
	if err := f.w.Reload("webhook-1.json"); err != nil {
		t.Fatal(err)
	}
	sb := f.sink.next(t)
	if got, want := sb.f.Line(), "[EVENT:webhook-1.json:immediate] New support ticket #12345"; got != want {
		t.Errorf("Line() = %q, want %q", got, want)
	}
	if sb.f.Adapter != "slack-acme" || sb.f.ChannelID != "C123" || sb.f.Late {
		t.Errorf("firing = %+v", sb.f)
	}
	// Queued, not finished: the file and the accepted marker stay.
	if !f.exists("webhook-1.json") || !f.marked("webhook-1.json") {
		t.Fatalf("after queueing: file exists %v, marker %v; want both", f.exists("webhook-1.json"), f.marked("webhook-1.json"))
	}
	if l := f.w.List(""); len(l) != 1 || l[0].State != "queued" {
		t.Errorf("List = %+v, want one queued event", l)
	}
	sb.done(Result{Finished: true})
	if f.exists("webhook-1.json") || f.marked("webhook-1.json") {
		t.Errorf("after the run: file exists %v, marker %v; want neither", f.exists("webhook-1.json"), f.marked("webhook-1.json"))
	}
	if l := f.w.List(""); len(l) != 0 {
		t.Errorf("List after run = %+v, want empty", l)
	}
}

func TestOneShotFiresAtItsTime(t *testing.T) {
	t.Parallel()
	f := newFixture(t, clock.NewFake(t0))
	f.start(t)
	at := "2025-06-16T11:00:00+02:00" // t0 + 1h
	f.write(t, "dentist.json", `{"type":"one-shot","channelId":"discord-x/42","text":"Remind Mario about the dentist","at":"`+at+`"}`, time.Time{})
	if err := f.w.Reload("dentist.json"); err != nil {
		t.Fatal(err)
	}
	l := f.w.List("discord-x/42")
	if len(l) != 1 || !l[0].Next.Equal(t0.Add(time.Hour)) || l[0].State != "scheduled" {
		t.Fatalf("List = %+v, want dentist.json scheduled at %s", l, t0.Add(time.Hour))
	}
	if other := f.w.List("slack-acme/C1"); len(other) != 0 {
		t.Errorf("List for another channel = %+v, want empty", other)
	}
	f.clk.Advance(time.Hour - time.Second)
	f.sink.none(t)
	f.clk.Advance(time.Second)
	sb := f.sink.next(t)
	if got, want := sb.f.Line(), "[EVENT:dentist.json:one-shot:"+at+"] Remind Mario about the dentist"; got != want {
		t.Errorf("Line() = %q, want %q", got, want)
	}
	if sb.f.Late {
		t.Errorf("on-time one-shot marked late: %+v", sb.f)
	}
	sb.done(Result{Finished: true})
	if f.exists("dentist.json") {
		t.Error("one-shot file still there after its run")
	}
}

func TestPeriodicKeepsFileAndSkipsWhileBusy(t *testing.T) {
	t.Parallel()
	f := newFixture(t, clock.NewFake(t0))
	f.start(t)
	f.write(t, "inbox.json", `{"type":"periodic","channelId":"slack-acme/C1","text":"Check inbox","schedule":"*/15 * * * *","timezone":"Europe/Vienna"}`, time.Time{})
	if err := f.w.Reload("inbox.json"); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(15 * time.Minute)
	sb := f.sink.next(t)
	if got, want := sb.f.Line(), "[EVENT:inbox.json:periodic:*/15 * * * *] Check inbox"; got != want {
		t.Errorf("Line() = %q, want %q", got, want)
	}
	if !sb.f.Due.Equal(t0.Add(15 * time.Minute)) {
		t.Errorf("Due = %s, want %s", sb.f.Due, t0.Add(15*time.Minute))
	}
	// The next occurrence falls while the first still runs: skipped.
	f.clk.Advance(15 * time.Minute)
	f.sink.none(t)
	if !strings.Contains(f.log.String(), "previous occurrence of this event has not finished") {
		t.Error("skipped occurrence not logged")
	}
	sb.done(Result{Finished: true})
	if !f.exists("inbox.json") {
		t.Fatal("periodic file deleted after a run")
	}
	f.clk.Advance(15 * time.Minute)
	sb = f.sink.next(t)
	if !sb.f.Due.Equal(t0.Add(45 * time.Minute)) {
		t.Errorf("third occurrence Due = %s, want %s", sb.f.Due, t0.Add(45*time.Minute))
	}
	if l := f.w.List(""); len(l) != 1 || !l[0].Next.Equal(t0.Add(time.Hour)) {
		t.Errorf("List = %+v, want next run at %s", l, t0.Add(time.Hour))
	}
}

func TestPeriodicAcrossDST(t *testing.T) {
	t.Parallel()
	start := time.Date(2025, 3, 29, 12, 0, 0, 0, time.UTC)
	f := newFixture(t, clock.NewFake(start))
	f.start(t)
	f.write(t, "night.json", `{"type":"periodic","channelId":"slack-acme/C1","text":"Nightly","schedule":"30 2 * * *","timezone":"Europe/Vienna"}`, time.Time{})
	if err := f.w.Reload("night.json"); err != nil {
		t.Fatal(err)
	}
	// 02:30 does not exist on 2025-03-30 in Vienna: it runs at 03:00 CEST.
	f.clk.AdvanceTo(time.Date(2025, 3, 30, 0, 59, 0, 0, time.UTC))
	f.sink.none(t)
	f.clk.AdvanceTo(time.Date(2025, 3, 30, 12, 0, 0, 0, time.UTC))
	sb := f.sink.next(t)
	if want := time.Date(2025, 3, 30, 1, 0, 0, 0, time.UTC); !sb.f.Due.Equal(want) {
		t.Errorf("spring-forward run due %s, want %s (03:00 CEST)", sb.f.Due, want)
	}
	f.sink.none(t)
	sb.done(Result{Finished: true})
}

func TestStartupRules(t *testing.T) {
	t.Parallel()
	f := newFixture(t, clock.NewFake(t0))
	before, after := t0.Add(-time.Hour), t0.Add(time.Second)
	f.write(t, "stale.json", `{"type":"immediate","channelId":"slack-acme/C1","text":"old webhook"}`, before)
	f.write(t, "fresh.json", `{"type":"immediate","channelId":"slack-acme/C2","text":"new webhook"}`, after)
	f.write(t, "recent.json", `{"type":"one-shot","channelId":"slack-acme/C3","text":"standup","at":"`+t0.Add(-4*time.Minute).Format(time.RFC3339)+`"}`, before)
	f.write(t, "old.json", `{"type":"one-shot","channelId":"slack-acme/C4","text":"yesterday","at":"`+t0.Add(-11*time.Minute).Format(time.RFC3339)+`"}`, before)
	f.write(t, "daily.json", `{"type":"periodic","channelId":"slack-acme/C5","text":"summary","schedule":"0 9 * * *","timezone":"UTC"}`, before)
	f.start(t)

	got := map[string]Firing{}
	for range 2 {
		sb := f.sink.next(t)
		got[sb.f.File] = sb.f
	}
	f.sink.none(t)
	if _, ok := got["fresh.json"]; !ok {
		t.Error("immediate event written after start did not run")
	}
	r, ok := got["recent.json"]
	if !ok || !r.Late || !strings.Contains(r.Note, "while Mother was not running") || !strings.Contains(r.Line(), "4m0s late") {
		t.Errorf("one-shot missed by 4m: %+v (line %q), want it run late and saying so", r, r.Line())
	}
	if c := f.movedTo(t, expiredDir, "stale.json"); !strings.Contains(c, "old webhook") || f.exists("stale.json") {
		t.Errorf("stale immediate: expired copy %q, still in events: %v", c, f.exists("stale.json"))
	}
	if c := f.movedTo(t, expiredDir, "old.json"); !strings.Contains(c, "yesterday") || f.exists("old.json") {
		t.Errorf("one-shot missed by 11m: expired copy %q, still in events: %v", c, f.exists("old.json"))
	}
	for _, want := range []string{"stale immediate event", "one-shot event missed"} {
		if !strings.Contains(f.log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, f.log.String())
		}
	}
	// Periodic: 09:00 UTC of the day before start was missed; no catch-up.
	l := f.w.List("slack-acme/C5")
	if len(l) != 1 || !l[0].Next.Equal(time.Date(2025, 6, 16, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("periodic after start: %+v, want next run today 09:00 UTC and no catch-up", l)
	}
}

func TestAcceptedEventRunsAgainAfterCrash(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	f := newFixture(t, clk)
	f.start(t)
	f.write(t, "hook.json", `{"type":"immediate","channelId":"slack-acme/C1","text":"deploy finished"}`, t0)
	f.write(t, "remind.json", `{"type":"one-shot","channelId":"slack-acme/C2","text":"call back","at":"`+t0.Add(time.Minute).Format(time.RFC3339)+`"}`, t0)
	f.write(t, "tick.json", `{"type":"periodic","channelId":"slack-acme/C3","text":"tick","schedule":"*/5 * * * *","timezone":"UTC"}`, t0)
	for _, n := range []string{"hook.json", "remind.json", "tick.json"} {
		if err := f.w.Reload(n); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(5 * time.Minute)
	keys := map[string]string{}
	for range 3 {
		sb := f.sink.next(t) // queued, never finished: the process "dies" here
		keys[sb.f.File] = sb.f.Key()
		if sb.f.Resumed {
			t.Errorf("%s: a first run is Resumed", sb.f.File)
		}
	}
	f.w.Stop()

	// A new Mother on the same data directory, an hour later. hook.json's
	// mtime is before this start (it would be stale), remind.json's time
	// is beyond the grace: both run anyway, because they were accepted.
	clk.Advance(time.Hour)
	f.sink = newSink(5)
	f.w = f.newWatcher(t, clk, "slack-acme", "discord-x")
	f.start(t)
	got := map[string]Firing{}
	for range 3 {
		sb := f.sink.next(t)
		got[sb.f.File] = sb.f
		if !sb.f.Late || !strings.Contains(sb.f.Note, "restarted before this event's run finished") {
			t.Errorf("%s re-run: late %v, note %q; want a late run that says why", sb.f.File, sb.f.Late, sb.f.Note)
		}
		// The same occurrence: the Sink can find what it stored of it.
		if !sb.f.Resumed || sb.f.Key() != keys[sb.f.File] {
			t.Errorf("%s re-run: resumed %v, key %q; want resumed, key %q as before the restart", sb.f.File, sb.f.Resumed, sb.f.Key(), keys[sb.f.File])
		}
		sb.done(Result{Finished: true})
	}
	f.sink.none(t)
	if len(got) != 3 {
		t.Fatalf("re-ran %v, want hook.json, remind.json and tick.json", got)
	}
	if f.exists("hook.json") || f.exists("remind.json") || !f.exists("tick.json") {
		t.Errorf("after re-runs: hook %v remind %v tick %v; want only tick.json left", f.exists("hook.json"), f.exists("remind.json"), f.exists("tick.json"))
	}
	for _, n := range []string{"hook.json", "remind.json", "tick.json"} {
		if f.marked(n) {
			t.Errorf("marker of %s left after its run finished", n)
		}
	}
}

func TestShutdownKeepsEventForNextStart(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	f := newFixture(t, clk)
	f.start(t)
	f.write(t, "hook.json", `{"type":"immediate","channelId":"slack-acme/C1","text":"x"}`, t0)
	if err := f.w.Reload("hook.json"); err != nil {
		t.Fatal(err)
	}
	sb := f.sink.next(t)
	f.w.Stop()
	sb.done(Result{Finished: false}) // the run was cut short by a shutdown
	if !f.exists("hook.json") || !f.marked("hook.json") {
		t.Fatalf("after an interrupted run: file %v marker %v, want both kept", f.exists("hook.json"), f.marked("hook.json"))
	}
	f.sink = newSink(5)
	f.w = f.newWatcher(t, clk, "slack-acme")
	f.start(t)
	if sb := f.sink.next(t); sb.f.File != "hook.json" || !sb.f.Late {
		t.Errorf("after restart got %+v, want hook.json run again, late", sb.f)
	}
}

func TestFullQueueKeepsEvent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, clock.NewFake(t0))
	f.sink.cap = 1
	f.start(t)
	for i := 1; i <= 3; i++ {
		n := fmt.Sprintf("e%d.json", i)
		f.write(t, n, fmt.Sprintf(`{"type":"immediate","channelId":"slack-acme/C1","text":"event %d"}`, i), t0)
		if err := f.w.Reload(n); err != nil {
			t.Fatal(err)
		}
	}
	first := f.sink.next(t)
	f.sink.none(t)
	states := map[string]string{}
	for _, in := range f.w.List("") {
		states[in.File] = in.State
	}
	if states["e1.json"] != "queued" || states["e2.json"] != "waiting" || states["e3.json"] != "waiting" {
		t.Errorf("states = %v, want e1 queued and e2, e3 waiting", states)
	}
	if !f.marked("e2.json") || !f.exists("e3.json") {
		t.Error("waiting events lost their marker or file")
	}
	if !strings.Contains(f.log.String(), "event kept until a slot frees") {
		t.Error("full queue not logged")
	}
	first.done(Result{Finished: true})
	second := f.sink.next(t)
	if second.f.File != "e2.json" {
		t.Fatalf("after a slot freed, submitted %s, want e2.json (in order)", second.f.File)
	}
	second.done(Result{Finished: true})
	if third := f.sink.next(t); third.f.File != "e3.json" {
		t.Fatalf("then %s, want e3.json", third.f.File)
	}
}

func TestParseRetriesThenMovesAside(t *testing.T) {
	t.Parallel()
	f := newFixture(t, clock.NewFake(t0))
	// Written before the watcher starts: a write after it would also reach
	// the watcher through fsnotify at a moment the test does not control
	// (late on a loaded machine), and its debounce would restart the retry
	// count in the middle of the fake-clock sequence below.
	f.write(t, "broken.json", `{"type":"immediate","channelId":"slack-acme/C1","text":`, t0)
	f.start(t)
	if err := f.w.Reload("broken.json"); err == nil {
		t.Fatal("Reload of a truncated file: no error")
	}
	for _, d := range []time.Duration{100, 200} {
		f.clk.Advance(d * time.Millisecond)
		if !f.exists("broken.json") {
			t.Fatalf("file removed after the %dms retry; want 3 retries", d)
		}
	}
	if l := f.w.List(""); len(l) != 1 || l[0].State != "invalid" || !strings.Contains(l[0].Error, "invalid JSON") {
		t.Errorf("List while retrying = %+v", l)
	}
	f.clk.Advance(399 * time.Millisecond)
	if !f.exists("broken.json") {
		t.Fatal("removed before the 400ms retry")
	}
	f.clk.Advance(time.Millisecond)
	if f.exists("broken.json") {
		t.Fatal("still there after 100+200+400ms of retries")
	}
	if c := f.movedTo(t, rejectedDir, "broken.json"); !strings.HasPrefix(c, `{"type":"immediate"`) {
		t.Errorf("rejected copy = %q, want the original content", c)
	}
	if !strings.Contains(f.log.String(), "does not parse after retries") {
		t.Errorf("no log line for the removed file:\n%s", f.log.String())
	}
	f.sink.none(t)
}

func TestParseRetrySucceedsWhenWriteCompletes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, clock.NewFake(t0))
	p := filepath.Join(f.dir, "slow.json")
	full := `{"type":"immediate","channelId":"slack-acme/C1","text":"slow writer"}`
	if err := os.WriteFile(p, []byte(full[:20]), 0o600); err != nil {
		t.Fatal(err)
	}
	f.start(t) // after the first write, for the reason given above
	if err := f.w.Reload("slow.json"); err == nil {
		t.Fatal("partial file parsed")
	}
	f.clk.Advance(100 * time.Millisecond)
	// The writer finishes; whether the retry or fsnotify's debounce reads
	// it first, the event is submitted once.
	if err := os.WriteFile(p, []byte(full), 0o600); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(200 * time.Millisecond)
	if sb := f.sink.next(t); sb.f.Text != "slow writer" {
		t.Errorf("submitted %q", sb.f.Text)
	}
}

func TestUnqualifiedChannel(t *testing.T) {
	t.Parallel()
	one := newFixture(t, clock.NewFake(t0), "cli")
	one.start(t)
	one.write(t, "a.json", `{"type":"immediate","channelId":"local","text":"hi"}`, t0)
	if err := one.w.Reload("a.json"); err != nil {
		t.Fatalf("unqualified id with one adapter: %v", err)
	}
	if sb := one.sink.next(t); sb.f.Adapter != "cli" || sb.f.ChannelID != "local" {
		t.Errorf("resolved to %s/%s, want cli/local", sb.f.Adapter, sb.f.ChannelID)
	}

	two := newFixture(t, clock.NewFake(t0))
	two.start(t)
	two.write(t, "b.json", `{"type":"immediate","channelId":"C123","text":"hi"}`, t0)
	err := two.w.Reload("b.json")
	if err == nil || !strings.Contains(err.Error(), `not qualified: write "<adapter>/C123"`) {
		t.Fatalf("unqualified id with two adapters: err = %v", err)
	}
	two.clk.Advance(time.Second)
	if !strings.Contains(two.log.String(), "not qualified") || two.movedTo(t, rejectedDir, "b.json") == "" {
		t.Errorf("unqualified id not explained in the log or not moved aside:\n%s", two.log.String())
	}
}

func TestModifyReschedulesAndDeleteCancels(t *testing.T) {
	t.Parallel()
	f := newFixture(t, clock.NewFake(t0))
	f.start(t)
	ev := func(at time.Time) string {
		return `{"type":"one-shot","channelId":"slack-acme/C1","text":"meeting","at":"` + at.Format(time.RFC3339) + `"}`
	}
	f.write(t, "m.json", ev(t0.Add(time.Hour)), time.Time{})
	if err := f.w.Reload("m.json"); err != nil {
		t.Fatal(err)
	}
	f.write(t, "m.json", ev(t0.Add(2*time.Hour)), time.Time{})
	if err := f.w.Reload("m.json"); err != nil {
		t.Fatal(err)
	}
	if l := f.w.List(""); len(l) != 1 || !l[0].Next.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("after rescheduling: %+v", l)
	}
	f.clk.Advance(90 * time.Minute)
	f.sink.none(t)
	f.clk.Advance(30 * time.Minute)
	sb := f.sink.next(t)

	// Changed while queued: the queued run is skipped and the new version
	// is scheduled.
	f.write(t, "m.json", ev(t0.Add(3*time.Hour)), time.Time{})
	if err := f.w.Reload("m.json"); err != nil {
		t.Fatal(err)
	}
	if !sb.f.Cancelled() {
		t.Error("queued run of a changed event not cancelled")
	}
	sb.done(Result{Finished: true})
	if !f.exists("m.json") {
		t.Fatal("finishing the cancelled run deleted the rescheduled file")
	}

	// Deleted: the timer is cancelled.
	if err := os.Remove(filepath.Join(f.dir, "m.json")); err != nil {
		t.Fatal(err)
	}
	if err := f.w.Reload("m.json"); err != nil {
		t.Fatal(err)
	}
	if l := f.w.List(""); len(l) != 0 {
		t.Errorf("List after delete = %+v", l)
	}
	f.clk.Advance(5 * time.Hour)
	f.sink.none(t)
}

func TestSinkErrorKeepsMarker(t *testing.T) {
	t.Parallel()
	f := newFixture(t, clock.NewFake(t0))
	f.sink.err = errors.New("mother is shutting down")
	f.start(t)
	f.write(t, "x.json", `{"type":"immediate","channelId":"slack-acme/C1","text":"x"}`, t0)
	if err := f.w.Reload("x.json"); err != nil {
		t.Fatal(err)
	}
	if !f.exists("x.json") || !f.marked("x.json") {
		t.Error("an event Mother could not take lost its file or marker")
	}
}

// The fsnotify tests use the real clock and real file operations.

func TestWatchEditorSaveAndDelete(t *testing.T) {
	t.Parallel()
	f := newFixture(t, clock.Real{})
	f.start(t)
	// Editor-style save: write a temp file, rename it over the target.
	f.write(t, "hook.json", `{"type":"immediate","channelId":"slack-acme/C1","text":"via rename"}`, time.Time{})
	sb := f.sink.next(t)
	if sb.f.Text != "via rename" {
		t.Fatalf("submitted %+v", sb.f)
	}
	sb.done(Result{Finished: true})

	far := time.Now().Add(24 * time.Hour).Truncate(time.Second)
	f.write(t, "later.json", `{"type":"one-shot","channelId":"slack-acme/C1","text":"later","at":"`+far.Format(time.RFC3339)+`"}`, time.Time{})
	waitFor(t, "later.json scheduled", func() bool { l := f.w.List(""); return len(l) == 1 && l[0].Next.Equal(far) })
	f.write(t, "later.json", `{"type":"one-shot","channelId":"slack-acme/C1","text":"later","at":"`+far.Add(time.Hour).Format(time.RFC3339)+`"}`, time.Time{})
	waitFor(t, "later.json rescheduled", func() bool { l := f.w.List(""); return len(l) == 1 && l[0].Next.Equal(far.Add(time.Hour)) })
	if err := os.Remove(filepath.Join(f.dir, "later.json")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "later.json cancelled", func() bool { return len(f.w.List("")) == 0 })
	if f.sink.count() != 1 {
		t.Errorf("%d submissions, want 1", f.sink.count())
	}
}

// TestWatchSlowPartialWrite: a file written in pieces is read while it is
// still incomplete (the log shows the parse retry), then fires once, whole.
// Each piece waits for the watcher to have read the file so far, so the
// partial read is seen, not hoped for.
func TestWatchSlowPartialWrite(t *testing.T) {
	t.Parallel()
	f := newFixture(t, clock.Real{})
	f.start(t)
	p := filepath.Join(f.dir, "slow.json")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	const retrying = "event file does not parse yet; retrying"
	full := `{"type":"immediate","channelId":"slack-acme/C1","text":"written in pieces"}`
	for i := 0; i < len(full); i += 25 {
		if i > 0 {
			// The file holds full[:i], which does not parse: wait for the
			// watcher to have read it and to retry.
			seen := strings.Count(f.log.String(), retrying)
			waitFor(t, fmt.Sprintf("a read of the first %d bytes", i), func() bool { return strings.Count(f.log.String(), retrying) > seen })
		}
		if _, err := fh.WriteString(full[i:min(i+25, len(full))]); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			waitFor(t, "a read of the first piece", func() bool { return strings.Contains(f.log.String(), retrying) })
		}
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	sb := f.sink.next(t)
	if sb.f.Text != "written in pieces" {
		t.Errorf("submitted %q", sb.f.Text)
	}
	log := f.log.String()
	if r, l := strings.Index(log, retrying), strings.Index(log, "event loaded"); r < 0 || l < r {
		t.Errorf("no partial read logged before the event loaded:\n%s", log)
	}
	// Nothing more may come of slow.json: a marker file written after it
	// is seen after all of slow.json's changes (fsnotify keeps their
	// order); once it has fired and slow.json has no debounce or retry
	// timer left, nothing can read slow.json again.
	f.write(t, "marker.json", `{"type":"immediate","channelId":"slack-acme/C2","text":"marker"}`, time.Time{})
	if m := f.sink.next(t); m.f.File != "marker.json" {
		t.Fatalf("after slow.json, submitted %+v, want marker.json", m.f)
	}
	waitFor(t, "slow.json's timers to end", func() bool {
		f.w.mu.Lock()
		defer f.w.mu.Unlock()
		e := f.w.entries["slow.json"]
		return f.w.debounce["slow.json"] == nil && e != nil && e.retry == nil
	})
	if f.sink.count() != 2 || f.movedTo(t, rejectedDir, "slow.json") != "" {
		t.Errorf("%d submissions (want slow.json and the marker), rejected copy %q", f.sink.count(), f.movedTo(t, rejectedDir, "slow.json"))
	}
}

// blindWatch replaces the fixture's directory watch with channels the
// test feeds: the watcher hears of no change on disk unless told.
func (f *fixture) blindWatch() (chan<- fsnotify.Event, chan<- error) {
	evs, errs := make(chan fsnotify.Event), make(chan error)
	var once sync.Once
	f.w.openWatch = func(string) (fileWatch, error) {
		return fileWatch{events: evs, errors: errs, close: func() error { once.Do(func() { close(evs) }); return nil }}, nil
	}
	return evs, errs
}

// TestWatchErrorRescans: when the watch reports an error (fsnotify's queue
// overflowed, so changes were lost), every file is looked at again: one
// written, one changed and one deleted while the watcher heard nothing are
// all noticed.
func TestWatchErrorRescans(t *testing.T) {
	t.Parallel()
	f := newFixture(t, clock.NewFake(t0))
	evs, errs := f.blindWatch()
	oneShot := func(at time.Time) string {
		return `{"type":"one-shot","channelId":"slack-acme/C1","text":"meeting","at":"` + at.Format(time.RFC3339) + `"}`
	}
	f.write(t, "changed.json", oneShot(t0.Add(time.Hour)), t0)
	f.write(t, "gone.json", oneShot(t0.Add(time.Hour)), t0)
	f.start(t)
	if l := f.w.List(""); len(l) != 2 {
		t.Fatalf("List after start = %+v, want changed.json and gone.json", l)
	}

	// Changes the watch does not report.
	f.write(t, "new.json", `{"type":"immediate","channelId":"slack-acme/C2","text":"written unseen"}`, time.Time{})
	f.write(t, "changed.json", oneShot(t0.Add(2*time.Hour)), time.Time{})
	if err := os.Remove(filepath.Join(f.dir, "gone.json")); err != nil {
		t.Fatal(err)
	}

	errs <- fsnotify.ErrEventOverflow
	// The loop handles one thing at a time: once it takes this event (a
	// name it ignores), it has finished the rescan.
	evs <- fsnotify.Event{Name: filepath.Join(f.dir, ".ignored.tmp"), Op: fsnotify.Create}
	f.clk.Advance(10 * time.Millisecond) // the debounce

	select {
	case sb := <-f.sink.ch:
		if sb.f.File != "new.json" || sb.f.Text != "written unseen" {
			t.Errorf("submitted %+v, want new.json", sb.f)
		}
		sb.done(Result{Finished: true})
	default:
		t.Fatal("new.json, written while the watch was blind, was not run after the watch error")
	}
	l := f.w.List("")
	if len(l) != 1 || l[0].File != "changed.json" || !l[0].Next.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("List after the rescan = %+v, want only changed.json, moved to %s (gone.json deleted)", l, t0.Add(2*time.Hour))
	}
	if !strings.Contains(f.log.String(), "file watch error; rescanning the events directory") {
		t.Errorf("the watch error is not logged:\n%s", f.log.String())
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	res := AdapterResolver([]string{"slack-acme"})
	bad := []struct{ json, want string }{
		{`{"type":"one-shot","channelId":"slack-acme/C1","text":"x","at":"2025-12-15T09:00:00"}`, "timezone offset"},
		{`{"type":"periodic","channelId":"slack-acme/C1","text":"x","schedule":"0 9 * * *"}`, "timezone: missing"},
		{`{"type":"periodic","channelId":"slack-acme/C1","text":"x","schedule":"0 9 * * *","timezone":"Mars/Base"}`, "not an IANA"},
		{`{"type":"periodic","channelId":"slack-acme/C1","text":"x","schedule":"61 9 * * *","timezone":"UTC"}`, "schedule"},
		{`{"type":"periodic","channelId":"slack-acme/C1","text":"x","schedule":"@every 1h","timezone":"UTC"}`, "@every"},
		{`{"type":"periodic","channelId":"slack-acme/C1","text":"x","schedule":"0 0 30 2 *","timezone":"UTC"}`, "never fires"},
		{`{"type":"immediate","channelId":"slack-acme/C1","text":"x","at":"2025-12-15T09:00:00Z"}`, "only one-shot"},
		{`{"type":"sometimes","channelId":"slack-acme/C1","text":"x"}`, "not \"immediate\""},
		{`{"type":"immediate","channelId":"slack-acme/C1","text":" "}`, "text: missing"},
		{`{"type":"immediate","channelId":"nope/C1","text":"x"}`, "unknown adapter"},
		{`{"type":"immediate","channelId":"slack-acme/../x","text":"x"}`, "channel"},
		{`{"type":"immediate","channelId":"slack-acme/C1","text":"x","extra":1}`, "unknown field"},
	}
	for _, b := range bad {
		_, err := Parse([]byte(b.json), res)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("Parse(%s) = %v, want an error containing %q", b.json, err, b.want)
		}
	}
	s, err := Parse([]byte(`{"type":"periodic","channelId":"slack-acme/C1","text":"x","schedule":"0 9 * * 1-5","timezone":"Europe/Vienna"}`), res)
	if err != nil || s.ScheduleLabel() != "0 9 * * 1-5" || s.Qualified() != "slack-acme/C1" {
		t.Errorf("Parse(periodic) = %+v, %v", s, err)
	}
}
