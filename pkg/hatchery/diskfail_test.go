package hatchery_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/docker"
	"github.com/mother-chat/mother/pkg/hatchery/docker/enginetest"
)

// failEventSyncs fails every fsync of chick id's events file while on is
// set.
func failEventSyncs(t *testing.T, id string) *atomic.Bool {
	t.Helper()
	on := new(atomic.Bool)
	suffix := string(filepath.Separator) + filepath.Join(id, "events.jsonl")
	t.Cleanup(fsync.InjectFault(func(p string) error {
		if on.Load() && strings.HasSuffix(p, suffix) {
			return syscall.EIO
		}
		return nil
	}))
	return on
}

// TestEventsNotStoredAreNotAcked: a batch whose fsync fails is not
// acknowledged (the ack stays at what was durable), and neither is a batch
// written before the failure whose commit comes after it; once the disk
// works the chick's resend from its ack is stored, each event once, with
// no gap.
func TestEventsNotStoredAreNotAcked(t *testing.T) {
	t.Parallel()
	h, id := runningFakeChick(t)
	failing := failEventSyncs(t, id)
	ev := func(seq uint64) hatchery.SeqEvent {
		return hatchery.SeqEvent{Seq: seq, Event: agent.Event{Type: agent.EventToolStart, ToolName: "bash", Label: fmt.Sprint("step ", seq)}}
	}
	evs := func(from, to uint64) []hatchery.SeqEvent {
		var out []hatchery.SeqEvent
		for s := from; s <= to; s++ {
			out = append(out, ev(s))
		}
		return out
	}
	if ack, err := h.RecordEvents(id, evs(1, 3)); err != nil || ack != 3 {
		t.Fatalf("RecordEvents 1-3 = %d, %v", ack, err)
	}
	// 4-5 written, their commit still to come; then 6-7, whose fsync fails.
	w1, _, err := h.WriteEvents(id, evs(4, 5))
	must(t, err)
	failing.Store(true)
	w2, _, err := h.WriteEvents(id, evs(6, 7))
	must(t, err)
	if ack, err := h.CommitEvents(id, w2); err == nil || ack != 3 {
		t.Fatalf("commit with a failing fsync = %d, %v; want ack 3 and an error", ack, err)
	}
	failing.Store(false)
	if ack, err := h.CommitEvents(id, w1); err == nil || ack != 3 {
		t.Fatalf("commit of a write the failure cut away = %d, %v; want ack 3 and an error", ack, err)
	}
	if last, _ := h.LastSeq(id); last != 3 {
		t.Fatalf("LastSeq = %d after the failure, want 3", last)
	}
	// While the disk fails every resend fails, unacknowledged.
	failing.Store(true)
	if ack, err := h.RecordEvents(id, evs(4, 7)); err == nil || ack != 3 {
		t.Fatalf("resend on a failing disk = %d, %v; want ack 3 and an error", ack, err)
	}
	failing.Store(false)
	if ack, err := h.RecordEvents(id, evs(4, 8)); err != nil || ack != 8 {
		t.Fatalf("resend once the disk works = %d, %v; want 8", ack, err)
	}
	var got []uint64
	must(t, h.FollowEvents(t.Context(), id, false, func(se hatchery.StoredEvent) error {
		got = append(got, se.Seq)
		return nil
	}))
	if fmt.Sprint(got) != "[1 2 3 4 5 6 7 8]" {
		t.Fatalf("stored %v, want 1..8 once each", got)
	}
}

// TestEventsDurableBeforeAFailureStayAcked: a batch made durable by an
// fsync that succeeded is acknowledged even when a later batch's fsync
// fails before its commit is told; the resend after it is not stored
// twice.
func TestEventsDurableBeforeAFailureStayAcked(t *testing.T) {
	t.Parallel()
	h, id := runningFakeChick(t)
	failing := failEventSyncs(t, id)
	ev := func(seq uint64) hatchery.SeqEvent {
		return hatchery.SeqEvent{Seq: seq, Event: agent.Event{Type: agent.EventToolStart, ToolName: "bash", Label: fmt.Sprint("step ", seq)}}
	}
	w1, _, err := h.WriteEvents(id, []hatchery.SeqEvent{ev(1), ev(2)})
	must(t, err)
	w2, _, err := h.WriteEvents(id, []hatchery.SeqEvent{ev(3)})
	must(t, err)
	// One fsync covers both; then 4's fails.
	if ack, err := h.CommitEvents(id, w2); err != nil || ack != 3 {
		t.Fatalf("commit = %d, %v; want 3", ack, err)
	}
	w3, _, err := h.WriteEvents(id, []hatchery.SeqEvent{ev(4)})
	must(t, err)
	failing.Store(true)
	if _, err := h.CommitEvents(id, w3); err == nil {
		t.Fatal("commit with a failing fsync succeeded")
	}
	failing.Store(false)
	if ack, err := h.CommitEvents(id, w1); err != nil || ack != 3 {
		t.Fatalf("late commit of a durable write = %d, %v; want 3", ack, err)
	}
	if ack, err := h.RecordEvents(id, []hatchery.SeqEvent{ev(3), ev(4), ev(5)}); err != nil || ack != 5 {
		t.Fatalf("resend = %d, %v; want 5", ack, err)
	}
	var got []uint64
	must(t, h.FollowEvents(t.Context(), id, false, func(se hatchery.StoredEvent) error {
		got = append(got, se.Seq)
		return nil
	}))
	if fmt.Sprint(got) != "[1 2 3 4 5]" {
		t.Fatalf("stored %v, want 1..5 once each", got)
	}
}

// TestSpawnRefusedWhileTheDiskFails: while the data directory cannot be
// written, a spawn is refused with the reason (ErrDisk, and what the disk
// monitor says) and nothing is created; once it can, the spawn goes ahead.
func TestSpawnRefusedWhileTheDiskFails(t *testing.T) {
	t.Parallel()
	e := enginetest.New(t)
	e.On(http.MethodPost, "/containers/create", enginetest.JSON(201, map[string]any{"Id": "k1"}))
	e.On(http.MethodPost, "/containers/{}/wait", enginetest.Pending())
	e.On(http.MethodPost, "/containers/{}/start", enginetest.Answer{Status: 204})
	c, err := client.NewClientWithOpts(client.WithHost(e.Host), client.WithAPIVersionNegotiation())
	must(t, err)
	var diskErr atomic.Pointer[error]
	full := errors.New("disk full: write log.jsonl: no space left on device")
	diskErr.Store(&full)
	h, err := hatchery.New(hatchery.Options{
		Config: testConfig("mother-chick:fake"), Dir: t.TempDir(), Logger: testLogger(t), ProbeInterval: time.Hour,
		Hosts: []hatchery.Host{{Name: "fake", Runtime: docker.New(c), Capacity: 2, MotherAddress: "127.0.0.1:1"}},
		Disk:  func() error { return *diskErr.Load() },
	})
	must(t, err)
	t.Cleanup(func() { h.Close() })
	_, err = h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "x"})
	if !errors.Is(err, hatchery.ErrDisk) || !strings.Contains(err.Error(), "disk full: write log.jsonl") {
		t.Fatalf("spawn on a full disk: %v; want ErrDisk with the reason", err)
	}
	if n := len(h.List(true)); n != 0 {
		t.Fatalf("a refused spawn left %d chicks", n)
	}
	var ok error
	diskErr.Store(&ok)
	in, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "x"})
	must(t, err)
	waitState(t, h, in.ID, hatchery.StateRunning, time.Minute)
}

// TestRecordNotStoredIsWrittenAgain: a chick record whose append failed
// (its fsync: the records file is cut back) is appended again, as the
// chick is then, with the next record that can be stored.
func TestRecordNotStoredIsWrittenAgain(t *testing.T) {
	t.Parallel()
	h, id := runningFakeChick(t)
	var failing atomic.Bool
	var mu sync.Mutex
	path := ""
	t.Cleanup(fsync.InjectFault(func(p string) error {
		if filepath.Base(p) != "chicks.jsonl" {
			return nil
		}
		mu.Lock()
		path = p
		mu.Unlock()
		if failing.Load() {
			return syscall.EIO
		}
		return nil
	}))
	failing.Store(true)
	must(t, h.Finish(id, hatchery.Result{Text: "the answer"}))
	failing.Store(false)
	other, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "y"})
	must(t, err)
	mu.Lock()
	p := path
	mu.Unlock()
	b, err := os.ReadFile(p)
	must(t, err)
	var last hatchery.Record
	seenOther := false
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r hatchery.Record
		must(t, json.Unmarshal([]byte(line), &r))
		if r.ID == id {
			last = r
		}
		if r.ID == other.ID {
			seenOther = true
		}
	}
	if !seenOther || last.Result == nil || last.Result.Text != "the answer" {
		t.Fatalf("chicks.jsonl's last record of the chick: %+v (the other stored: %v); want its result", last, seenOther)
	}
}
