package chick

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// uploadOutputs sends every regular file under outputs/ back to Mother. It
// returns where Mother stored them, and the files that did not arrive
// with the reason.
func (r *runner) uploadOutputs(ctx context.Context) (stored, failed []string) {
	root := filepath.Join(r.opts.Workspace, wire.OutputsDir)
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(r.opts.Workspace, p)
		s, err := r.upload(ctx, rel, false, "")
		if err != nil {
			r.logger.Warn("output file not sent", "path", rel, "err", err)
			msg := err.Error()
			if st, ok := status.FromError(err); ok {
				msg = st.Message()
			}
			failed = append(failed, filepath.ToSlash(rel)+" ("+msg+")")
			return nil
		}
		stored = append(stored, s)
		return nil
	})
	return stored, failed
}

// upload sends one workspace file to Mother and returns where she stored
// it (relative to the channel directory).
func (r *runner) upload(ctx context.Context, path string, attach bool, title string) (string, error) {
	abs := path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(r.opts.Workspace, path)
	}
	rel, err := filepath.Rel(r.opts.Workspace, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("upload %s: outside the workspace", path)
	}
	var stored string
	err = r.retry(ctx, "upload", func(ctx context.Context) error {
		f, err := os.Open(abs)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", rel)
		}
		up, err := r.client.UploadFile(ctx)
		if err != nil {
			return err
		}
		if err := up.Send(&pb.UploadFileRequest{Kind: &pb.UploadFileRequest_Header{Header: &pb.UploadFileHeader{Path: filepath.ToSlash(rel), Size: st.Size(), Attach: attach, Title: title}}}); err != nil {
			_, rerr := up.CloseAndRecv()
			return errors.Join(err, rerr)
		}
		buf := make([]byte, 256<<10)
		for {
			n, rerr := f.Read(buf)
			if n > 0 {
				if err := up.Send(&pb.UploadFileRequest{Kind: &pb.UploadFileRequest_Data{Data: buf[:n]}}); err != nil {
					_, cerr := up.CloseAndRecv()
					return errors.Join(err, cerr)
				}
			}
			if errors.Is(rerr, io.EOF) {
				break
			}
			if rerr != nil {
				return rerr
			}
		}
		resp, err := up.CloseAndRecv()
		if err != nil {
			return err
		}
		stored = resp.GetStoredPath()
		return nil
	})
	if err != nil {
		return "", err
	}
	r.logger.Info("file sent", "path", rel, "stored", stored, "attach", attach)
	return stored, nil
}
