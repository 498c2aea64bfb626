package hatchery

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
