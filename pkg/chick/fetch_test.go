package chick_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mother-chat/mother/pkg/chick"
	"github.com/mother-chat/mother/pkg/gate/gatetest"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

func fileEntry(path string, size int64, exec bool) *pb.FetchFilesResponse {
	return &pb.FetchFilesResponse{Kind: &pb.FetchFilesResponse_Entry{Entry: &pb.WorkspaceEntry{Path: path, Kind: pb.WorkspaceEntryKind_WORKSPACE_ENTRY_KIND_FILE, Size: size, Executable: exec}}}
}

func dirEntry(path string) *pb.FetchFilesResponse {
	return &pb.FetchFilesResponse{Kind: &pb.FetchFilesResponse_Entry{Entry: &pb.WorkspaceEntry{Path: path, Kind: pb.WorkspaceEntryKind_WORKSPACE_ENTRY_KIND_DIR}}}
}

func dataMsg(b []byte) *pb.FetchFilesResponse {
	return &pb.FetchFilesResponse{Kind: &pb.FetchFilesResponse_Data{Data: b}}
}

func doneMsg(files, n int64) *pb.FetchFilesResponse {
	return &pb.FetchFilesResponse{Kind: &pb.FetchFilesResponse_Done{Done: &pb.FetchFilesDone{Files: files, Bytes: n}}}
}

// file is a file's entry and its content in chunks of at most chunk bytes.
func file(path string, content []byte, chunk int) []*pb.FetchFilesResponse {
	out := []*pb.FetchFilesResponse{fileEntry(path, int64(len(content)), false)}
	for len(content) > 0 {
		n := min(chunk, len(content))
		out = append(out, dataMsg(content[:n]))
		content = content[n:]
	}
	return out
}

func sendAll(msgs ...[]*pb.FetchFilesResponse) func(pb.ChickService_FetchFilesServer) error {
	return func(s pb.ChickService_FetchFilesServer) error {
		for _, ms := range msgs {
			for _, m := range ms {
				if err := s.Send(m); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// runChick runs the real chick runtime against nest (over TLS on
// loopback) in workspace ws and returns its result.
func runChick(t *testing.T, nest *fakeNest, ws string) *pb.ChickResult {
	t.Helper()
	if nest.model == nil {
		nest.model = func(context.Context, int, *pb.GenerateRequest) (model.Response, error) {
			return model.Response{Message: model.Message{Content: "worked"}}, nil
		}
	}
	m := gatetest.Start(t, nest)
	err := chick.Run(t.Context(), chick.Options{
		Addr: m.Addr, Token: chickToken, ChickID: chickID, CAPEM: m.CAPEM, Workspace: ws,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, ReconnectFor: 30 * time.Second,
	})
	if err != nil {
		t.Fatalf("chick.Run: %v", err)
	}
	select {
	case r := <-nest.results:
		return r
	default:
		t.Fatal("Run returned without Mother having a result")
		return nil
	}
}

// TestFetchFilesWritesTheWorkspace: what the nest sends is what the chick
// finds in its workspace, content in several chunks, modes 0644 and 0755,
// times kept; the marker is written; the run goes on.
func TestFetchFilesWritesTheWorkspace(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdef"), 40000) // 640000 bytes: three chunks
	mod := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	memory := fileEntry("MEMORY.md", 6, false)
	memory.GetEntry().ModTime = timestamppb.New(mod)
	nest := newFakeNest()
	nest.files = sendAll(
		[]*pb.FetchFilesResponse{dirEntry("skills"), dirEntry("skills/greet"), fileEntry("skills/greet/run.sh", 8, true), dataMsg([]byte("echo hi\n"))},
		[]*pb.FetchFilesResponse{memory, dataMsg([]byte("mem")), dataMsg([]byte("ory"))},
		file("attachments/big.bin", big, wire.FetchChunkBytes),
		file("scratch/empty", nil, 1), // its directory made on the way
		[]*pb.FetchFilesResponse{dirEntry("outputs"), doneMsg(4, int64(8+6+len(big)))},
	)
	res := runChick(t, nest, ws)
	if res.GetError() != "" || res.GetText() != "worked" {
		t.Fatalf("result %v, want the run to go on after the fetch", res)
	}
	want := map[string]struct {
		content string
		mode    fs.FileMode
	}{
		"skills/greet/run.sh": {"echo hi\n", 0o755},
		"MEMORY.md":           {"memory", 0o644},
		"attachments/big.bin": {string(big), 0o644},
		"scratch/empty":       {"", 0o644},
	}
	for name, w := range want {
		p := filepath.Join(ws, name)
		b, err := os.ReadFile(p)
		st, serr := os.Lstat(p)
		if err != nil || serr != nil {
			t.Errorf("%s: %v %v", name, err, serr)
			continue
		}
		if string(b) != w.content {
			t.Errorf("%s: %d bytes, want %d", name, len(b), len(w.content))
		}
		// The umask may take bits away, never add them.
		if st.Mode().Perm()&^w.mode != 0 || st.Mode().Perm()&0o700 != w.mode&0o700 {
			t.Errorf("%s: mode %v, want %v", name, st.Mode().Perm(), w.mode)
		}
	}
	if st, err := os.Stat(filepath.Join(ws, "MEMORY.md")); err != nil || !st.ModTime().Equal(mod) {
		t.Errorf("MEMORY.md modified %v, want %v (%v)", st.ModTime(), mod, err)
	}
	if st, err := os.Stat(filepath.Join(ws, "outputs")); err != nil || !st.IsDir() {
		t.Errorf("outputs/ not made: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, wire.FetchedMarker)); err != nil {
		t.Errorf("no marker after the fetch: %v", err)
	}
}

// TestFetchFilesRefusesWhatLeavesTheWorkspace plays a hostile (or broken)
// Mother: whatever it sends, nothing is written outside the workspace,
// no link is written through, no file in the workspace that the stream
// did not name changes, the run does not start, and the chick's result
// says what was refused.
func TestFetchFilesRefusesWhatLeavesTheWorkspace(t *testing.T) {
	t.Parallel()
	type msgs = []*pb.FetchFilesResponse
	cases := []struct {
		name string
		// stream builds the messages; base is the directory holding the
		// workspace and outside/.
		stream func(base string) msgs
		want   string
	}{
		{"dot-dot", func(string) msgs { return append(file("../outside/evil", []byte("x"), 1), doneMsg(1, 1)) }, `".." element`},
		{"absolute", func(base string) msgs {
			return append(file(filepath.Join(base, "outside", "evil"), []byte("x"), 1), doneMsg(1, 1))
		}, "absolute"},
		{"file through a link out", func(string) msgs { return append(file("out-link/evil", []byte("x"), 1), doneMsg(1, 1)) }, "out-link/evil"},
		{"dir through a link out", func(string) msgs { return msgs{dirEntry("out-link/sub"), doneMsg(0, 0)} }, "out-link/sub"},
		{"dir onto a link out", func(string) msgs { return msgs{dirEntry("out-link"), doneMsg(0, 0)} }, "not a directory"},
		{"file onto a link inside", func(string) msgs { return append(file("in-link", []byte("clobbered"), 4), doneMsg(1, 9)) }, "not a regular file"},
		{"backslashes", func(string) msgs { return append(file(`..\outside\evil`, []byte("x"), 1), doneMsg(1, 1)) }, "backslash"},
		{"the marker", func(string) msgs { return append(file(wire.FetchedMarker, nil, 1), doneMsg(1, 0)) }, "reserved"},
		{"a link entry", func(string) msgs {
			return msgs{{Kind: &pb.FetchFilesResponse_Entry{Entry: &pb.WorkspaceEntry{Path: "link", Kind: pb.WorkspaceEntryKind(3)}}}, doneMsg(0, 0)}
		}, "only files and directories"},
		{"over the cap", func(string) msgs {
			return msgs{fileEntry("huge", wire.MaxFetchBytes+1, false), doneMsg(1, wire.MaxFetchBytes+1)}
		}, "exceed"},
		{"more than announced", func(string) msgs { return msgs{fileEntry("a", 3, false), dataMsg([]byte("toolong")), doneMsg(1, 3)} }, "more data"},
		{"less than announced", func(string) msgs { return msgs{fileEntry("a", 10, false), dataMsg([]byte("abc")), doneMsg(1, 10)} }, "7 bytes short"},
		{"data without entry", func(string) msgs { return msgs{dataMsg([]byte("x")), doneMsg(0, 0)} }, "without a file entry"},
		{"a file twice", func(string) msgs {
			return append(append(file("MEMORY.md", []byte("a"), 1), file("MEMORY.md", []byte("b"), 1)...), doneMsg(2, 2))
		}, "sent twice"},
		{"no done", func(string) msgs { return file("MEMORY.md", []byte("a"), 1) }, "before Mother said it was done"},
		{"wrong totals", func(string) msgs { return append(file("MEMORY.md", []byte("a"), 1), doneMsg(5, 1)) }, "Mother sent 5 files"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
			must(t, os.MkdirAll(ws, 0o755))
			must(t, os.MkdirAll(outside, 0o755))
			must(t, os.Symlink("../outside", filepath.Join(ws, "out-link")))
			must(t, os.WriteFile(filepath.Join(ws, "real.txt"), []byte("original"), 0o644))
			must(t, os.Symlink("real.txt", filepath.Join(ws, "in-link")))
			nest := newFakeNest()
			nest.files = sendAll(tc.stream(base))
			res := runChick(t, nest, ws)
			if !strings.Contains(res.GetError(), tc.want) || !strings.Contains(res.GetError(), "fetch files") {
				t.Errorf("result error %q, want one about fetching files with %q", res.GetError(), tc.want)
			}
			if res.GetStopReason() != pb.StopReason_STOP_REASON_ERROR {
				t.Errorf("stop reason %v, want error", res.GetStopReason())
			}
			if left, _ := os.ReadDir(outside); len(left) != 0 {
				t.Errorf("written outside the workspace: %v", left)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "real.txt")); string(b) != "original" {
				t.Errorf("real.txt = %q: written through a link", b)
			}
			if _, err := os.Lstat(filepath.Join(ws, wire.FetchedMarker)); err == nil {
				t.Error("marker written after a refused fetch")
			}
			nest.mu.Lock()
			calls := nest.calls
			nest.mu.Unlock()
			if calls != 0 {
				t.Errorf("the run started (%d model calls) without the files", calls)
			}
		})
	}
}

// TestFetchFilesOncePerWorkspace: a chick that starts again on a
// workspace that has its files (the marker) does not fetch them again:
// what it changed stays.
func TestFetchFilesOncePerWorkspace(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	nest := newFakeNest()
	nest.files = sendAll(file("MEMORY.md", []byte("from Mother"), 4), []*pb.FetchFilesResponse{doneMsg(1, 11)})
	if res := runChick(t, nest, ws); res.GetError() != "" {
		t.Fatalf("first run: %v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "MEMORY.md")); string(b) != "from Mother" {
		t.Fatalf("MEMORY.md = %q after the first run", b)
	}
	// What the chick's tools did before its process was restarted.
	must(t, os.WriteFile(filepath.Join(ws, "MEMORY.md"), []byte("changed by the chick"), 0o644))
	if res := runChick(t, nest, ws); res.GetError() != "" {
		t.Fatalf("second run: %v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "MEMORY.md")); string(b) != "changed by the chick" {
		t.Errorf("MEMORY.md = %q: a restarted chick clobbered what it had changed", b)
	}
	nest.mu.Lock()
	defer nest.mu.Unlock()
	if nest.fetches != 1 {
		t.Errorf("%d fetches for one workspace, want 1", nest.fetches)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// FuzzReceiveFiles feeds ReceiveFiles any stream of messages (each
// length-prefixed in the input, as protobuf would carry it). Whatever
// comes: no panic, nothing outside the workspace, no write through the
// links already in it, and everything made in it is a directory or a
// file of mode 0644 or 0755.
func FuzzReceiveFiles(f *testing.F) {
	seed := func(ms ...*pb.FetchFilesResponse) {
		var b []byte
		for _, m := range ms {
			mb, err := proto.Marshal(m)
			if err != nil {
				f.Fatal(err)
			}
			b = protowire.AppendBytes(b, mb)
		}
		f.Add(b)
	}
	seed(append(file("MEMORY.md", []byte("memory"), 2), dirEntry("skills"), doneMsg(1, 6))...)
	seed(append(file("../outside/x", []byte("x"), 1), doneMsg(1, 1))...)
	seed(append(file("out-link/x", []byte("x"), 1), doneMsg(1, 1))...)
	seed(append(file("in-link", []byte("x"), 1), doneMsg(1, 1))...)
	seed(dirEntry("out-link/d"), doneMsg(0, 0))
	seed(fileEntry("a", 3, true), dataMsg([]byte("abcdef")), doneMsg(1, 3))
	f.Fuzz(func(t *testing.T, in []byte) {
		base := t.TempDir()
		ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
		must(t, os.MkdirAll(ws, 0o755))
		must(t, os.MkdirAll(outside, 0o755))
		must(t, os.Symlink("../outside", filepath.Join(ws, "out-link")))
		must(t, os.WriteFile(filepath.Join(ws, "real.txt"), []byte("original"), 0o644))
		must(t, os.Symlink("real.txt", filepath.Join(ws, "in-link")))
		recv := func() (*pb.FetchFilesResponse, error) {
			for len(in) > 0 {
				mb, n := protowire.ConsumeBytes(in)
				if n < 0 {
					in = nil
					break
				}
				in = in[n:]
				m := &pb.FetchFilesResponse{}
				if proto.Unmarshal(mb, m) == nil {
					return m, nil
				}
			}
			return nil, io.EOF
		}
		_, _ = chick.ReceiveFiles(ws, recv)
		if left, _ := os.ReadDir(outside); len(left) != 0 {
			t.Fatalf("written outside the workspace: %v", left)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "real.txt")); string(b) != "original" {
			t.Fatalf("real.txt = %q: written through a link", b)
		}
		err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(ws, p)
			switch {
			case rel == "out-link" || rel == "in-link":
				if d.Type()&fs.ModeSymlink == 0 {
					t.Errorf("%s is no longer the link it was", rel)
				}
			case d.IsDir():
			case d.Type().IsRegular():
				st, err := d.Info()
				if err != nil {
					return err
				}
				if m := st.Mode().Perm(); m&^0o755 != 0 {
					t.Errorf("%s has mode %v", rel, m)
				}
			default:
				t.Errorf("%s is a %v", rel, d.Type())
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	})
}

// olderNest is a Mother from before FetchFiles: gRPC answers
// Unimplemented for it, as it does for any method a server lacks.
type olderNest struct{ *fakeNest }

func (o olderNest) FetchFiles(req *pb.FetchFilesRequest, s pb.ChickService_FetchFilesServer) error {
	return pb.UnimplementedChickServiceServer{}.FetchFiles(req, s)
}

// TestFetchFilesFromAnOlderMother: a Mother that does not know FetchFiles
// put the files in the workspace herself (the archive API): the chick
// runs on what is there.
func TestFetchFilesFromAnOlderMother(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	must(t, os.WriteFile(filepath.Join(ws, "MEMORY.md"), []byte("copied in by an older Mother"), 0o644))
	nest := newFakeNest()
	m := gatetest.Start(t, olderNest{nest})
	nest.model = func(context.Context, int, *pb.GenerateRequest) (model.Response, error) {
		return model.Response{Message: model.Message{Content: "worked"}}, nil
	}
	err := chick.Run(t.Context(), chick.Options{Addr: m.Addr, Token: chickToken, ChickID: chickID, CAPEM: m.CAPEM, Workspace: ws, MinBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res := <-nest.results; res.GetError() != "" || res.GetText() != "worked" {
		t.Errorf("result %v, want the run done on the workspace as it was", res)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "MEMORY.md")); string(b) != "copied in by an older Mother" {
		t.Errorf("MEMORY.md = %q", b)
	}
}
