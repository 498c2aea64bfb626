package mother

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/disk"
	"github.com/mother-chat/mother/pkg/fsync"
)

// dmAdapter is a recAdapter with direct messages: it records "dm", the
// user in Channel.
type dmAdapter struct{ *recAdapter }

var _ chat.DirectMessenger = dmAdapter{}

func (a dmAdapter) DirectMessage(_ context.Context, userID, markdown string) error {
	a.add(rec{Kind: "dm", Channel: userID, Text: markdown})
	return nil
}

// withDisk gives the harness's Mothers a disk monitor of the data
// directory, on clk, and an adapter with direct messages.
func withDisk(clk clock.Clock) harnessOpt {
	return func(h *harness) {
		h.dms = true
		h.disk = disk.New(h.data, disk.Options{Clock: clk})
		h.t.Cleanup(h.disk.Close)
		h.t.Cleanup(fsync.OnFailure(h.disk.Report))
	}
}

// answers are the finished replies with text (an abandoned run finishes
// its reply with none: nothing shown).
func (h *harness) answers() []rec {
	var out []rec
	for _, r := range h.ad.of("finish") {
		if r.Text != "" {
			out = append(out, r)
		}
	}
	return out
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestMessageNotStoredComesBackAndIsAnsweredOnce: while log.jsonl's fsync
// fails, a message is refused (a chat.NotStoredError, its Ready open), not
// answered, its channel told once and the admins once; its run, begun
// while the line went to disk, had synced it into the context, and the
// line was then cut away. Once the disk works (the monitor's probe), the
// adapter's delivery of the same message is taken and answered once, and
// the admins are told it is over.
func TestMessageNotStoredComesBackAndIsAnsweredOnce(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	h := newHarness(t, withDisk(clk))
	dir := filepath.Join(h.data, "workspace", "channels", "rec", "C1")
	logPath := filepath.Join(dir, "log.jsonl")
	msg := chat.ChannelMessage{ID: "M-disk-1", ChannelID: "C1", Timestamp: time.Now(), IsMention: true,
		Sender: chat.Sender{ID: "UMARIO", Username: "mario"}, Text: "hello through a failing disk", Attachments: []chat.ChannelAttachment{}}
	var failing, first atomic.Bool
	failing.Store(true)
	first.Store(true)
	remove := fsync.InjectFault(func(p string) error {
		if p != logPath || !failing.Load() {
			return nil
		}
		if first.CompareAndSwap(true, false) {
			// The run syncs the message into the context while its line
			// goes to disk: let it, then fail the line's fsync.
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
				if b, _ := os.ReadFile(filepath.Join(dir, "context.jsonl")); bytes.Contains(b, []byte(msg.ID)) {
					break
				}
			}
		}
		return syscall.EIO
	})
	defer remove()

	for i := range 2 {
		err := h.m.Deliver(t.Context(), "rec", msg, false)
		if !errors.Is(err, chat.ErrNotStored) {
			t.Fatalf("delivery %d on a failing disk: err = %v, want ErrNotStored", i+1, err)
		}
		ready := chat.RetryReady(err)
		if ready == nil || isClosed(ready) {
			t.Fatalf("delivery %d: the error's Ready is %v, want open until the disk works", i+1, ready)
		}
	}
	if st := h.disk.Status(); st.Condition != disk.Failing {
		t.Fatalf("disk status %+v, want failing", st)
	}
	h.idle()
	if n := len(h.answers()); n != 0 {
		t.Fatalf("answered %d times on a failing disk: %q", n, texts(h.answers()))
	}
	if posts := texts(h.ad.of("post")); len(posts) != 1 || !strings.Contains(posts[0], "I cannot store messages right now (my disk fails)") {
		t.Fatalf("the channel was told %q, want one notice", posts)
	}
	waitFor(t, "the admin told", func() bool { return len(h.ad.of("dm")) == 1 })
	dm := h.ad.of("dm")[0]
	if dm.Channel != "UADMIN" || !strings.HasPrefix(dm.Text, "disk error: ") {
		t.Fatalf("admin told %+v, want UADMIN told \"disk error: ...\"", dm)
	}

	failing.Store(false)
	clk.Advance(disk.ProbeEvery)
	if err := h.disk.Err(); err != nil {
		t.Fatalf("the probe did not end the condition: %v", err)
	}
	if err := h.m.Deliver(t.Context(), "rec", msg, false); err != nil {
		t.Fatalf("delivery once the disk works: %v", err)
	}
	waitFor(t, "the answer", func() bool { return len(h.answers()) == 1 })
	h.idle()
	if got := texts(h.answers()); len(got) != 1 || got[0] != "answer to: hello through a failing disk" {
		t.Fatalf("answers %q, want one", got)
	}
	n := 0
	for _, m := range h.logged("C1") {
		if m.ID == msg.ID {
			n++
		}
	}
	if n != 1 {
		t.Errorf("log.jsonl holds the message %d times, want once", n)
	}
	clk.Advance(disk.Settle)
	waitFor(t, "the admin told it is over", func() bool { return len(h.ad.of("dm")) == 2 })
	if ok := h.ad.of("dm")[1]; !strings.HasPrefix(ok.Text, "disk ok again: ") {
		t.Errorf("admin told %q, want \"disk ok again: ...\"", ok.Text)
	}
	if posts := h.ad.of("post"); len(posts) != 1 {
		t.Errorf("the channel was told %q, want the one notice", texts(posts))
	}
}

// TestChatterNotStoredTellsNobody: a message not addressed to Mother that
// cannot be stored is refused the same way, without a word to the
// channel.
func TestChatterNotStoredTellsNobody(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	h := newHarness(t, withDisk(clk))
	logPath := filepath.Join(h.data, "workspace", "channels", "rec", "C2", "log.jsonl")
	defer fsync.InjectFault(func(p string) error {
		if p == logPath {
			return syscall.EIO
		}
		return nil
	})()
	msg := chat.ChannelMessage{ID: "M-chatter", ChannelID: "C2", Timestamp: time.Now(), Sender: chat.Sender{ID: "ULUIGI", Username: "luigi"}, Text: "just chatting"}
	if err := h.m.Deliver(t.Context(), "rec", msg, false); !errors.Is(err, chat.ErrNotStored) {
		t.Fatalf("err = %v, want ErrNotStored", err)
	}
	h.idle()
	if posts := h.ad.of("post"); len(posts) != 0 {
		t.Errorf("chatter not stored made Mother post %q", texts(posts))
	}
}

// TestMarkerRewrittenAfterAFailedFsync: when the in-flight marker's fsync
// fails (and the kernel dropped what it held), it is not fsynced again as
// it is: it is written again, whole, from the state Mother holds, and
// then fsynced.
func TestMarkerRewrittenAfterAFailedFsync(t *testing.T) {
	t.Parallel()
	block := newBlockTool()
	h := newHarness(t, withTools(block))
	marker := filepath.Join(h.data, "state", "inflight", "rec", "C1.json")
	var fsyncs, failed atomic.Int32
	defer fsync.InjectFault(func(p string) error {
		if p != marker {
			return nil
		}
		fsyncs.Add(1)
		if failed.CompareAndSwap(0, 1) {
			// The page it could not write is gone: the file is empty.
			if err := os.Truncate(p, 0); err != nil {
				t.Error(err)
			}
			return syscall.EIO
		}
		return nil
	})()
	h.say("C1", "please block", false, mention)
	block.waitStarted(t)
	// Two flushes a second apart; the package's tests run at once, so
	// give the timers time on a loaded machine.
	for deadline := time.Now().Add(30 * time.Second); fsyncs.Load() < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d fsync(s) of the marker in 30s, want a second one after the failed one", fsyncs.Load())
		}
	}
	b, err := os.ReadFile(marker)
	if err != nil {
		t.Fatal(err)
	}
	var f inflightFile
	if err := json.Unmarshal(bytes.TrimSpace(b), &f); err != nil || f.Running == nil || f.Running.Trigger == nil || f.Running.Trigger.Text != "please block" {
		t.Fatalf("marker after the failed fsync = %q (%v); want the running job, written again", b, err)
	}
	block.release <- struct{}{}
	h.idle()
}

// A spend notice about a cap that is not the channel's (Mother's own
// daily cap, a tier's) goes to the admins by direct message; one about the
// channel's own cap is said in the channel.
func TestSpendNoticeForTheAdminsIsADirectMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withDisk(clock.NewFake(time.Unix(1_700_000_000, 0))))
	h.m.Notify(SpendNotice{Channel: "rec/C1", Admins: true, Level: 80, Scope: "mother", Text: "My own model use has used 80% of today's cap"})
	waitFor(t, "the admin told", func() bool { return len(h.ad.of("dm")) == 1 })
	if dm := h.ad.of("dm")[0]; dm.Channel != "UADMIN" || dm.Text != "For the admins: My own model use has used 80% of today's cap" {
		t.Errorf("direct message %+v", dm)
	}
	h.m.Notify(SpendNotice{Channel: "rec/C1", Level: 80, Scope: "channel", Text: "This channel has used 80% of today's cap"})
	waitFor(t, "the channel told", func() bool {
		for _, p := range texts(h.ad.of("post")) {
			if p == "This channel has used 80% of today's cap" {
				return true
			}
		}
		return false
	})
	if n := len(h.ad.of("dm")); n != 1 {
		t.Errorf("%d direct messages, want only the admins' one", n)
	}
	for _, p := range texts(h.ad.of("post")) {
		if strings.Contains(p, "For the admins") {
			t.Errorf("the admins' notice was also posted in the channel: %q", p)
		}
	}
}
