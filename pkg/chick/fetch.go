package chick

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// fetchFiles brings the chick's files from Mother into its workspace,
// once per workspace: when wire.FetchedMarker is there (a chick started
// again on the workspace it already filled), it keeps what is there, so a
// restart never clobbers what the chick changed. A broken stream starts
// the fetch over (what was written is written again); a refused stream or
// entry ends it with the reason.
func (r *runner) fetchFiles(ctx context.Context) error {
	ws := r.opts.Workspace
	if _, err := os.Lstat(filepath.Join(ws, wire.FetchedMarker)); err == nil {
		r.logger.Info("workspace already has its files; not fetching them again", "marker", wire.FetchedMarker)
		return nil
	}
	var got Received
	err := r.retry(ctx, "fetch files", func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := r.client.FetchFiles(ctx, &pb.FetchFilesRequest{})
		if err != nil {
			return err
		}
		got, err = ReceiveFiles(ws, stream.Recv)
		if status.Code(err) == codes.Aborted {
			// A file changed on Mother's side while it was sent: again.
			return status.Error(codes.Unavailable, status.Convert(err).Message())
		}
		return err
	})
	if status.Code(err) == codes.Unimplemented {
		// A Mother older than FetchFiles copied the files into the
		// container before it started (the chick outlives upgrades both
		// ways: proto/BASELINE).
		r.logger.Info("Mother does not offer FetchFiles; the workspace is as she made it", "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	marker := fmt.Sprintf("Mother's files came: %d files, %d bytes. While this file is here, a chick starting on this workspace does not fetch them again.\n", got.Files, got.Bytes)
	if err := writeSynced(filepath.Join(ws, wire.FetchedMarker), []byte(marker)); err != nil {
		return fmt.Errorf("fetch files: the marker: %w", err)
	}
	r.logger.Info("files fetched", "files", got.Files, "bytes", got.Bytes)
	return nil
}

func writeSynced(name string, b []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Received is what ReceiveFiles wrote.
type Received struct {
	Files, Bytes int64
}

// ReceiveFiles writes the messages of a FetchFiles stream, read with recv,
// under the directory root, and returns when the stream's done message
// came (and the stream ended after it). It trusts nothing it reads: every
// path must pass wire.CheckWorkspacePath, every write goes through an
// os.Root of root (no link leads out of it, whatever is already in the
// workspace), only files and directories are made, with modes 0644 or
// 0755, a file's data must be exactly its announced size, a file comes
// once, and the announced sizes together stay within wire.MaxFetchBytes.
// The first thing wrong ends it with an error naming the entry.
func ReceiveFiles(root string, recv func() (*pb.FetchFilesResponse, error)) (Received, error) {
	var got Received
	rt, err := os.OpenRoot(root)
	if err != nil {
		return got, fmt.Errorf("fetch files: the workspace: %w", err)
	}
	defer rt.Close()
	var (
		cur  *os.File // the file being written
		name string   // its path
		left int64    // its bytes still to come
		mod  *pb.WorkspaceEntry
		seen = map[string]bool{}
	)
	closeCur := func() error {
		if cur == nil {
			return nil
		}
		err := cur.Close()
		cur = nil
		if err == nil && mod.GetModTime() != nil {
			t := mod.GetModTime().AsTime()
			err = rt.Chtimes(name, t, t)
		}
		if err != nil {
			return fmt.Errorf("fetch files: %s: %w", name, err)
		}
		return nil
	}
	defer func() {
		if cur != nil {
			cur.Close()
		}
	}()
	for {
		m, err := recv()
		if errors.Is(err, io.EOF) {
			return got, errors.New("fetch files: the stream ended before Mother said it was done")
		}
		if err != nil {
			return got, err
		}
		if d, ok := m.GetKind().(*pb.FetchFilesResponse_Data); ok {
			if cur == nil {
				return got, errors.New("fetch files: data without a file entry")
			}
			if int64(len(d.Data)) > left {
				return got, fmt.Errorf("fetch files: %s: more data than its announced size", name)
			}
			if _, err := cur.Write(d.Data); err != nil {
				return got, fmt.Errorf("fetch files: %s: %w", name, err)
			}
			left -= int64(len(d.Data))
			continue
		}
		if left > 0 {
			return got, fmt.Errorf("fetch files: %s: %d bytes short of its announced size", name, left)
		}
		if err := closeCur(); err != nil {
			return got, err
		}
		switch k := m.GetKind().(type) {
		case *pb.FetchFilesResponse_Done:
			if k.Done.GetFiles() != got.Files || k.Done.GetBytes() != got.Bytes {
				return got, fmt.Errorf("fetch files: Mother sent %d files (%d bytes), %d (%d bytes) arrived", k.Done.GetFiles(), k.Done.GetBytes(), got.Files, got.Bytes)
			}
			if m, err := recv(); !errors.Is(err, io.EOF) {
				if err == nil {
					err = fmt.Errorf("a %T message after done", m.GetKind())
				}
				return got, fmt.Errorf("fetch files: %w", err)
			}
			return got, nil
		case *pb.FetchFilesResponse_Entry:
			e := k.Entry
			p := e.GetPath()
			if err := wire.CheckWorkspacePath(p); err != nil {
				return got, fmt.Errorf("fetch files: refused entry: %w", err)
			}
			if dir := path.Dir(p); dir != "." {
				if err := rt.MkdirAll(dir, 0o755); err != nil {
					return got, fmt.Errorf("fetch files: %s: %w", p, err)
				}
			}
			switch e.GetKind() {
			case pb.WorkspaceEntryKind_WORKSPACE_ENTRY_KIND_DIR:
				if err := rt.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
					return got, fmt.Errorf("fetch files: %s: %w", p, err)
				}
				if st, err := rt.Lstat(p); err != nil || !st.IsDir() {
					return got, fmt.Errorf("fetch files: %s: not a directory in the workspace", p)
				}
			case pb.WorkspaceEntryKind_WORKSPACE_ENTRY_KIND_FILE:
				size := e.GetSize()
				if size < 0 {
					return got, fmt.Errorf("fetch files: %s: negative size %d", p, size)
				}
				if seen[p] {
					return got, fmt.Errorf("fetch files: %s sent twice", p)
				}
				if got.Bytes+size > wire.MaxFetchBytes {
					return got, fmt.Errorf("fetch files: the channel's files exceed %d bytes (at %s)", wire.MaxFetchBytes, p)
				}
				perm := os.FileMode(0o644)
				if e.GetExecutable() {
					perm = 0o755
				}
				f, err := createFile(rt, p, perm)
				if err != nil {
					return got, fmt.Errorf("fetch files: %s: %w", p, err)
				}
				seen[p] = true
				cur, name, left, mod = f, p, size, e
				got.Files++
				got.Bytes += size
			default:
				return got, fmt.Errorf("fetch files: %s: refused entry of kind %v (only files and directories)", p, e.GetKind())
			}
		default:
			return got, fmt.Errorf("fetch files: an unknown message (%T)", m.GetKind())
		}
	}
}

// createFile opens name under rt for writing, truncated, with mode perm.
// os.Root keeps to the workspace but follows links inside it: a name that
// is anything but a regular file (a link, a directory) is refused, so the
// file written is the one named.
func createFile(rt *os.Root, name string, perm os.FileMode) (*os.File, error) {
	li, err := rt.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		li = nil
	case err != nil:
		return nil, err
	case !li.Mode().IsRegular():
		return nil, fmt.Errorf("already in the workspace as %v, not a regular file", li.Mode().Type())
	}
	f, err := rt.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && (!st.Mode().IsRegular() || li != nil && !os.SameFile(li, st)) {
		err = errors.New("replaced while being opened")
	}
	if err == nil {
		err = f.Chmod(perm) // an existing file keeps its mode otherwise
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
