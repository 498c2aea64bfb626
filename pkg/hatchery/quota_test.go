package hatchery

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
)

// TestMakeRoom: the oldest chick outputs go first, and only they: a file
// still being stored, the operator's scratch files and the channel's own
// files stay; emptied chick folders go too. Past what removing every
// output could free, nothing is removed (a file landing) or everything is
// (a chick starting).
func TestMakeRoom(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) string {
		ch := t.TempDir()
		writeFiles(t, ch, map[string]string{"MEMORY.md": "m", "scratch/tool.sh": "t"})
		base := time.Now().Add(-time.Hour)
		for i, rel := range []string{"scratch/chicks/c-1/outputs/old.bin", "scratch/chicks/c-2/.upload-123", "scratch/chicks/c-2/mid.bin", "scratch/chicks/c-3/new.bin"} {
			p := filepath.Join(ch, rel)
			must(t, os.MkdirAll(filepath.Dir(p), 0o700))
			must(t, os.WriteFile(p, make([]byte, 1000), 0o600))
			ts := base.Add(time.Duration(i) * time.Minute)
			must(t, os.Chtimes(p, ts, ts))
		}
		return ch
	}
	exists := func(ch, rel string) bool { _, err := os.Stat(filepath.Join(ch, rel)); return err == nil }

	ch := setup(t)
	ev, err := (&Hatchery{}).makeRoom(Files{ChannelDir: ch}, 2500, "", 0, false)
	if err != nil || strings.Join(ev.Removed, " ") != "scratch/chicks/c-1/outputs/old.bin scratch/chicks/c-2/mid.bin" || ev.Bytes != 2000 {
		t.Errorf("makeRoom(2500) = %+v, %v; want old.bin and mid.bin removed", ev, err)
	}
	if exists(ch, "scratch/chicks/c-1") || !exists(ch, "scratch/chicks/c-2/.upload-123") || !exists(ch, "scratch/tool.sh") || !exists(ch, "scratch/chicks/c-3/new.bin") {
		t.Errorf("after makeRoom: c-1 %v (want gone), the upload %v, tool.sh %v, new.bin %v (want kept)",
			exists(ch, "scratch/chicks/c-1"), exists(ch, "scratch/chicks/c-2/.upload-123"), exists(ch, "scratch/tool.sh"), exists(ch, "scratch/chicks/c-3/new.bin"))
	}

	ch = setup(t)
	if ev, err := (&Hatchery{}).makeRoom(Files{ChannelDir: ch}, 900, "", 0, false); !errors.Is(err, ErrOverQuota) || len(ev.Removed) != 0 || !exists(ch, "scratch/chicks/c-1/outputs/old.bin") {
		t.Errorf("makeRoom(900) landing = %+v, %v; want ErrOverQuota and nothing removed", ev, err)
	}
	if ev, err := (&Hatchery{}).makeRoom(Files{ChannelDir: ch}, 900, "", 0, true); !errors.Is(err, ErrOverQuota) || len(ev.Removed) != 3 {
		t.Errorf("makeRoom(900) starting = %+v, %v; want ErrOverQuota and every output removed", ev, err)
	}
}

// TestChannelUsageMeasuredOnceInAWhile: a channel is walked at most once
// every usageFresh while files land (a chick storing 3,000 files walked
// it 3,000 times), the quota's own changes kept in between; a write the
// quota did not make is counted at the next walk, and a chick starting
// always walks.
func TestChannelUsageMeasuredOnceInAWhile(t *testing.T) {
	t.Parallel()
	ch := t.TempDir()
	writeFiles(t, ch, map[string]string{"MEMORY.md": "0123456789"})
	clk := clock.NewFake(time.Now())
	h := &Hatchery{clock: clk}
	f := Files{ChannelDir: ch}
	land := func(rel string, size int) {
		t.Helper()
		p := filepath.Join(ch, rel)
		must(t, os.MkdirAll(filepath.Dir(p), 0o700))
		tmp := filepath.Join(filepath.Dir(p), uploadPrefix+"x")
		must(t, os.WriteFile(tmp, make([]byte, size), 0o600))
		if _, err := h.makeRoom(f, 1<<20, p, int64(size), false); err != nil {
			t.Fatalf("makeRoom %s: %v", rel, err)
		}
		must(t, os.Rename(tmp, p))
	}
	land("scratch/chicks/c-1/a", 100)
	if got := h.usage[ch].bytes; got != 110 {
		t.Fatalf("after the first file: %d bytes measured, want 110 (a walk, the file being stored in it)", got)
	}
	land("scratch/chicks/c-1/b", 200)
	writeFiles(t, ch, map[string]string{"attachments/photo.jpg": "0123456789012345678901234567890123456789"})
	land("scratch/chicks/c-1/c", 300)
	if got := h.usage[ch].bytes; got != 610 {
		t.Fatalf("within usageFresh: %d bytes, want 610 (the last walk and what the quota stored since, not the attachment yet)", got)
	}
	clk.Advance(usageFresh)
	land("scratch/chicks/c-1/d", 400)
	if got := h.usage[ch].bytes; got != 1050 {
		t.Fatalf("after usageFresh: %d bytes, want 1050 (walked again: the attachment counted)", got)
	}
	writeFiles(t, ch, map[string]string{"attachments/more.bin": "0123456789"})
	if n, err := h.channelUsage(f, 0, true); err != nil || n != 1060 {
		t.Fatalf("a chick starting: %d bytes, %v; want 1060 (always walked)", n, err)
	}
}
