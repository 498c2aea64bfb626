package nest_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// evictions records what the channel quota removed.
type evictions struct {
	hatchery.NopObserver
	mu  sync.Mutex
	got []hatchery.Eviction
}

func (e *evictions) ChannelFilesEvicted(_ hatchery.Info, ev hatchery.Eviction) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, ev)
}

func (e *evictions) all() []hatchery.Eviction {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]hatchery.Eviction(nil), e.got...)
}

// quotaFixture is a nest whose channel quota is 1 MiB.
func quotaFixture(t *testing.T) (*fixture, *evictions) {
	f := newFixtureConfig(t, 0, func(cfg *config.Config) { cfg.Chicks.Files.Quota = "1m" })
	ev := &evictions{}
	f.h.Subscribe(ev)
	return f, ev
}

// upload sends data as the chick's file path; it returns where it was
// stored.
func upload(t *testing.T, f *fixture, id, tok, path string, data []byte) (string, error) {
	t.Helper()
	up, err := f.client.UploadFile(wire.Credentials(t.Context(), id, tok))
	if err != nil {
		t.Fatal(err)
	}
	if err := up.Send(&pb.UploadFileRequest{Kind: &pb.UploadFileRequest_Header{Header: &pb.UploadFileHeader{Path: path, Size: int64(len(data))}}}); err != nil {
		t.Fatal(err)
	}
	if err := up.Send(&pb.UploadFileRequest{Kind: &pb.UploadFileRequest_Data{Data: data}}); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	resp, err := up.CloseAndRecv()
	return resp.GetStoredPath(), err
}

// aged writes files under root with modification times a minute apart,
// the first the oldest.
func aged(t *testing.T, root string, size int, names ...string) {
	t.Helper()
	base := time.Now().Add(-time.Hour)
	for i, n := range names {
		p := filepath.Join(root, n)
		must(t, os.MkdirAll(filepath.Dir(p), 0o700))
		must(t, os.WriteFile(p, bytes.Repeat([]byte{'x'}, size), 0o600))
		ts := base.Add(time.Duration(i) * time.Minute)
		must(t, os.Chtimes(p, ts, ts))
	}
}

// TestUploadKeepsTheQuota: a chick's outputs that would pass the channel's
// quota make room by removing the oldest chick outputs, and only those:
// the memory, attachments and skills stay. A file that does not fit even
// with every older output removed is refused, saying so, and removes
// nothing.
func TestUploadKeepsTheQuota(t *testing.T) {
	t.Parallel()
	f, ev := quotaFixture(t)
	ch := t.TempDir()
	writeTree(t, ch, map[string]string{"MEMORY.md": "memory", "attachments/sent.txt": "a person's file", "skills/s/SKILL.md": "---\nname: s\ndescription: d\n---\n", "scratch/mine.txt": "the operator's"})
	aged(t, ch, 300<<10, "scratch/chicks/c-old1/outputs/a.bin", "scratch/chicks/c-old2/outputs/b.bin", "scratch/chicks/c-old2/outputs/c.bin")
	id, tok := f.spawnFiles(t, hatchery.Files{ChannelDir: ch})
	// 900 KiB are there; 500 KiB more must remove a.bin and b.bin (the
	// oldest), not c.bin.
	stored, err := upload(t, f, id, tok, "outputs/new.bin", bytes.Repeat([]byte{'n'}, 500<<10))
	if err != nil {
		t.Fatalf("upload within the quota once old outputs go: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ch, stored)); err != nil {
		t.Errorf("the new file is not stored: %v", err)
	}
	for _, gone := range []string{"scratch/chicks/c-old1", "scratch/chicks/c-old2/outputs/b.bin"} {
		if _, err := os.Stat(filepath.Join(ch, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there (%v), want it removed (oldest first)", gone, err)
		}
	}
	for _, kept := range []string{"scratch/chicks/c-old2/outputs/c.bin", "MEMORY.md", "attachments/sent.txt", "skills/s/SKILL.md", "scratch/mine.txt"} {
		if _, err := os.Stat(filepath.Join(ch, kept)); err != nil {
			t.Errorf("%s was removed: %v", kept, err)
		}
	}
	got := ev.all()
	if len(got) != 1 || strings.Join(got[0].Removed, " ") != "scratch/chicks/c-old1/outputs/a.bin scratch/chicks/c-old2/outputs/b.bin" || got[0].Bytes != 600<<10 || got[0].Quota != 1<<20 {
		t.Errorf("evictions told: %+v, want one removing a.bin and b.bin (600 KiB) for a quota of 1 MiB", got)
	}
	if n := usage(t, ch); n > 1<<20 {
		t.Errorf("the channel holds %d bytes, over its quota", n)
	}

	// 1.5 MiB cannot fit: refused, nothing removed.
	_, err = upload(t, f, id, tok, "outputs/huge.bin", bytes.Repeat([]byte{'h'}, 3<<19))
	if err == nil || !strings.Contains(err.Error(), "quota") {
		t.Errorf("a file larger than the quota: %v, want a refusal naming the quota", err)
	}
	if _, err := os.Stat(filepath.Join(ch, "scratch/chicks/c-old2/outputs/c.bin")); err != nil {
		t.Errorf("a refused file removed an older output: %v", err)
	}
	if len(ev.all()) != 1 {
		t.Errorf("a refused file told an eviction: %+v", ev.all())
	}
}

// usage is the bytes of the regular files under dir.
func usage(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// TestFetchFilesKeepsTheQuota: a channel over its quota when a chick
// starts (filled before there was one: 2 GiB of outputs, sparse) loses its
// oldest outputs, and the chick receives the rest; a person's file over
// what a chick can receive is left out and named, never the whole fetch.
func TestFetchFilesKeepsTheQuota(t *testing.T) {
	t.Parallel()
	f, ev := quotaFixture(t)
	ch := t.TempDir()
	writeTree(t, ch, map[string]string{"MEMORY.md": "memory", "attachments/huge.bin": "", "scratch/chicks/c-old/outputs/big.bin": ""})
	must(t, os.Truncate(filepath.Join(ch, "attachments", "huge.bin"), hatchery.MaxPackBytes))
	must(t, os.Truncate(filepath.Join(ch, "scratch/chicks/c-old/outputs/big.bin"), 2<<30))
	aged(t, ch, 100<<10, "scratch/chicks/c-old/outputs/small.bin")
	id, tok := f.spawnFiles(t, hatchery.Files{ChannelDir: ch})
	s, err := f.client.FetchFiles(wire.Credentials(t.Context(), id, tok), &pb.FetchFilesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	var done *pb.FetchFilesDone
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("FetchFiles of a channel over its quota: %v, want the files within it", err)
		}
		if e := m.GetEntry(); e != nil && e.GetKind() == pb.WorkspaceEntryKind_WORKSPACE_ENTRY_KIND_FILE {
			paths = append(paths, e.GetPath())
		}
		if d := m.GetDone(); d != nil {
			done = d
		}
	}
	if done == nil || strings.Join(paths, " ") != "MEMORY.md" {
		t.Errorf("received %v (%v), want MEMORY.md alone", paths, done)
	}
	if _, err := os.Stat(filepath.Join(ch, "scratch/chicks/c-old")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old outputs are still there (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(ch, "attachments/huge.bin")); err != nil {
		t.Errorf("a person's file was removed: %v", err)
	}
	got := ev.all()
	if len(got) != 1 || len(got[0].Removed) != 2 || strings.Join(got[0].LeftOut, " ") != "attachments/huge.bin" {
		t.Errorf("evictions told: %+v, want the two old outputs removed and attachments/huge.bin left out", got)
	}
}
