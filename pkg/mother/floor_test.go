package mother

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/store"
)

// A power cut within the marker's deferred fsync leaves an older marker
// (here: the one written when the channel was last idle) and the line of
// a message whose job it does not name. The line carries its job
// (MetaAnswering): the restart answers it.
func TestFloorStaleMarkerAnswersTheLoggedMessage(t *testing.T) {
	t.Parallel()
	block := newBlockTool()
	h := newHarness(t, withTools(block))
	h.say("C1", "hello", false, mention, from("UMARIO", "mario"))
	h.idle()
	path := filepath.Join(h.data, "state/inflight/rec/C1.json")
	idleMarker, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no marker kept for the idle channel: %v", err)
	}
	h.say("C1", "please block", false, mention, from("UANNA", "anna"))
	block.waitStarted(t)
	if err := os.WriteFile(path, idleMarker, 0o600); err != nil {
		t.Fatal(err)
	}

	h.boot() // the power cut: a new process on what survived
	h.idle()
	notices := texts(h.ad.of("post"))
	if len(notices) != 1 || !strings.Contains(notices[0], `Answering @anna ("please block"), which was waiting.`) {
		t.Errorf("notices after the restart = %q, want one saying the message is answered", notices)
	}
	replies := texts(h.ad.of("finish"))
	if len(replies) != 1 || !strings.Contains(replies[0], "answer to: [restart]") {
		t.Fatalf("replies after the restart = %q, want the blocked message answered", replies)
	}
}

// A line whose answer is in the log is not answered again, whatever the
// marker a power cut left says; a line Mother took no job for (another
// bot's, a message past the queue) is not answered at all.
func TestFloorStaleMarkerKeepsAnsweredMessagesAnswered(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.say("C1", "hello", false, mention, from("UMARIO", "mario"))
	h.idle()
	path := filepath.Join(h.data, "state/inflight/rec/C1.json")
	idleMarker, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h.say("C1", "second", false, mention, from("UMARIO", "mario"))
	h.say("C1", "just chatting", false, from("UANNA", "anna"))
	h.idle()
	if err := os.WriteFile(path, idleMarker, 0o600); err != nil {
		t.Fatal(err)
	}
	lines := h.logged("C1")
	answering := 0
	for _, l := range lines {
		if l.Metadata[MetaAnswering] == true {
			answering++
		}
	}
	if answering != 2 {
		t.Errorf("%d lines marked %s in %+v, want the two messages to answer", answering, MetaAnswering, lines)
	}

	h.boot()
	h.idle()
	if got := h.ad.all(); len(got) != 0 {
		t.Fatalf("after the restart Mother rendered %+v, want nothing", got)
	}
}

// Answering message after message in one channel fsyncs the in-flight
// marker once for the channel (its first message: file and directory) and
// then only at its deferred flush, never once per message: the log's line
// carries the job.
func TestFloorNoMarkerFsyncPerMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var mu sync.Mutex
	marker, logs := 0, 0
	remove := fsync.InjectFault(func(path string) error {
		if !strings.HasPrefix(path, h.data) {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case strings.HasSuffix(path, filepath.Join("inflight", "rec", "C1.json")):
			marker++
		case strings.HasSuffix(path, filepath.Join("C1", "log.jsonl")):
			logs++
		}
		return nil
	})
	defer remove()
	const n = 30
	start := time.Now()
	for i := range n {
		h.say("C1", "message "+string(rune('a'+i%26)), false, mention)
		h.idle()
	}
	// The deferred flush runs at most once per store.FlushAfter: what the
	// messages took bounds it, whatever the machine's speed.
	flushes := 2 + 2*int(time.Since(start)/store.FlushAfter)
	mu.Lock()
	defer mu.Unlock()
	if marker > flushes || marker >= n {
		t.Errorf("the marker was fsynced %d times for %d messages (deferred flushes allowed: %d), want no fsync per message", marker, n, flushes)
	}
	if logs > 2*n+flushes {
		t.Errorf("log.jsonl fsynced %d times for %d messages, want at most two per message", logs, n)
	}
}
