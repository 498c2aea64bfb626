package disk

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/fsync"
)

type watched struct {
	mu     sync.Mutex
	events []Event
}

func (w *watched) add(ev Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, ev)
}

// kinds waits a moment for the monitor's goroutine, then lists the kinds
// heard.
func (w *watched) kinds(t *testing.T, want int) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		w.mu.Lock()
		n := len(w.events)
		var ks []string
		for _, e := range w.events {
			ks = append(ks, string(e.Kind)+":"+string(e.Status.Condition))
		}
		w.mu.Unlock()
		if n >= want || time.Now().After(deadline) {
			time.Sleep(20 * time.Millisecond) // one more would come now
			w.mu.Lock()
			defer w.mu.Unlock()
			ks = ks[:0]
			for _, e := range w.events {
				ks = append(ks, string(e.Kind)+":"+string(e.Status.Condition))
			}
			return strings.Join(ks, " ")
		}
		time.Sleep(time.Millisecond)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newMonitor(t *testing.T) (*Monitor, *clock.Fake, *watched, *syncBuf, string) {
	t.Helper()
	dir := t.TempDir()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	logs := &syncBuf{}
	m := New(dir, Options{Clock: clk, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	t.Cleanup(m.Close)
	w := &watched{}
	m.Watch(w.add)
	return m, clk, w, logs, dir
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want Condition
	}{
		{nil, OK},
		{&os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, Full},
		{fmt.Errorf("append: %w", syscall.EDQUOT), Full},
		{&os.PathError{Op: "sync", Path: "x", Err: syscall.EIO}, Failing},
		{syscall.EROFS, Failing},
		{os.ErrNotExist, OK},
		{syscall.EACCES, OK},
		{errors.New("closed"), OK},
	} {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

// TestOneEpisodeOneStartOneEnd: many failed writes start one episode,
// told once (and logged once as "disk full: ..."); a failure elsewhere
// or not the disk's is ignored; the probe ends the condition (Ready is
// closed at once) and, once the disk has stayed fine for Settle, the end
// is told once.
func TestOneEpisodeOneStartOneEnd(t *testing.T) {
	t.Parallel()
	m, clk, w, logs, dir := newMonitor(t)
	if !isClosed(m.Ready()) || m.Err() != nil {
		t.Fatal("a new monitor is not ready")
	}
	m.Report("/elsewhere/f", syscall.ENOSPC)
	m.Report(filepath.Join(dir, "f"), os.ErrNotExist)
	if m.Err() != nil {
		t.Fatalf("an ignored failure started a condition: %v", m.Err())
	}
	log := filepath.Join(dir, "workspace", "log.jsonl")
	for range 5 {
		m.Report(log, &os.PathError{Op: "write", Path: log, Err: syscall.ENOSPC})
	}
	ready := m.Ready()
	if isClosed(ready) {
		t.Fatal("Ready is closed while the disk is full")
	}
	st := m.Status()
	if st.Condition != Full || st.Path != log || !strings.HasPrefix(m.Err().Error(), "disk full: ") {
		t.Fatalf("status %+v, err %v", st, m.Err())
	}
	if got := w.kinds(t, 1); got != "started:full" {
		t.Fatalf("watchers heard %q, want one start", got)
	}
	if n := strings.Count(logs.String(), "disk full: "); n != 1 {
		t.Errorf("the log says disk full %d times, want once:\n%s", n, logs.String())
	}
	// The probe runs while full; it succeeds (the disk has room).
	clk.Advance(ProbeEvery)
	if !isClosed(ready) || m.Err() != nil {
		t.Fatalf("the probe succeeded but the condition goes on: %+v", m.Status())
	}
	if got := w.kinds(t, 1); got != "started:full" {
		t.Fatalf("watchers heard %q before the disk settled", got)
	}
	clk.Advance(Settle)
	if got := w.kinds(t, 2); got != "started:full cleared:full" {
		t.Fatalf("watchers heard %q, want a start and an end", got)
	}
	if !strings.Contains(logs.String(), "disk ok again") {
		t.Errorf("the log does not say the disk is ok again:\n%s", logs.String())
	}
	if _, err := os.Stat(filepath.Join(dir, probeName)); !os.IsNotExist(err) {
		t.Errorf("the probe left its file: %v", err)
	}
}

// TestFailingProbeKeepsTheCondition: while the probe's fsync fails the
// condition lasts (an I/O error makes a full disk a failing one, told as
// a change); a failure soon after the probe first succeeds continues the
// episode, told neither as an end nor as a new start.
func TestFailingProbeKeepsTheCondition(t *testing.T) {
	t.Parallel()
	m, clk, w, _, dir := newMonitor(t)
	var failing atomic.Bool
	failing.Store(true)
	probe := filepath.Join(dir, probeName)
	defer fsync.InjectFault(func(p string) error {
		if p == probe && failing.Load() {
			return syscall.EIO
		}
		return nil
	})()
	// The daemon hears fsync failures through the hook.
	defer fsync.OnFailure(func(p string, err error) {
		if strings.HasPrefix(p, dir) {
			m.Report(p, err)
		}
	})()
	m.Report(filepath.Join(dir, "f"), syscall.ENOSPC)
	for range 3 {
		clk.Advance(ProbeEvery)
	}
	st := m.Status()
	if st.Condition != Failing || !strings.Contains(st.Probe, "input/output error") || isClosed(m.Ready()) {
		t.Fatalf("status %+v after failing probes", st)
	}
	if got := w.kinds(t, 2); got != "started:full changed:failing" {
		t.Fatalf("watchers heard %q", got)
	}
	failing.Store(false)
	clk.Advance(ProbeEvery)
	if m.Err() != nil {
		t.Fatalf("the probe succeeded but: %v", m.Err())
	}
	clk.Advance(Settle / 2)
	m.Report(filepath.Join(dir, "f"), syscall.EIO)
	if m.Err() == nil {
		t.Fatal("a failure after the probe did not start the condition again")
	}
	clk.Advance(Settle)
	if got := w.kinds(t, 2); got != "started:full changed:failing" {
		t.Fatalf("watchers heard %q, want the episode to go on untold", got)
	}
	clk.Advance(ProbeEvery)
	clk.Advance(Settle)
	if got := w.kinds(t, 3); got != "started:full changed:failing cleared:failing" {
		t.Fatalf("watchers heard %q, want one end", got)
	}
}

func TestMessages(t *testing.T) {
	t.Parallel()
	full := Event{Kind: Started, Status: Status{Condition: Full, Reason: "write log.jsonl: no space left on device"}}
	if got := full.Message("/data"); !strings.HasPrefix(got, "disk full: I cannot write /data (write log.jsonl: no space left on device)") {
		t.Errorf("full: %q", got)
	}
	bad := Event{Kind: Started, Status: Status{Condition: Failing, Reason: "sync: input/output error"}}
	if got := bad.Message("/data"); !strings.HasPrefix(got, "disk error: ") {
		t.Errorf("failing: %q", got)
	}
	ok := Event{Kind: Cleared, Lasted: 90 * time.Second}
	if got := ok.Message("/data"); !strings.HasPrefix(got, "disk ok again: ") || !strings.Contains(got, "1m30s") {
		t.Errorf("cleared: %q", got)
	}
}

// TestEventsWaitForTheFirstWatcher: a condition that starts before anyone
// watches (a full disk at start, before Mother is built) is told to the
// first watcher.
func TestEventsWaitForTheFirstWatcher(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := New(dir, Options{Clock: clock.NewFake(time.Unix(1_700_000_000, 0))})
	t.Cleanup(m.Close)
	m.Report(filepath.Join(dir, "REFERENCE.md"), syscall.ENOSPC)
	w := &watched{}
	m.Watch(w.add)
	if got := w.kinds(t, 1); got != "started:full" {
		t.Fatalf("the first watcher heard %q, want the start from before it watched", got)
	}
}
