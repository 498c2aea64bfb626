package docker

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mother-chat/mother/pkg/hatchery"
)

// owner is the uid/gid given to the files in the archive.
type owner struct{ uid, gid int }

// parseOwner reads "uid[:gid]"; a name (not a number) gives -1, and the
// files are then made world-writable instead.
func parseOwner(user string) owner {
	u, g, _ := strings.Cut(user, ":")
	uid, err := strconv.Atoi(u)
	if err != nil {
		return owner{-1, -1}
	}
	gid := uid
	if g != "" {
		if n, err := strconv.Atoi(g); err == nil {
			gid = n
		}
	}
	return owner{uid, gid}
}

// pack writes a tar of the chick's files to w. Only regular files and
// directories are copied; symlinks and special files are skipped, never
// followed, so a link in a channel directory cannot pull in config.json.
func pack(w io.Writer, f hatchery.Files, own owner) error {
	tw := tar.NewWriter(w)
	var total int64
	seen := map[string]bool{}
	add := func(src, dst string) error {
		return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && p == src {
					return nil
				}
				return err
			}
			rel, err := filepath.Rel(src, p)
			if err != nil {
				return err
			}
			name := path.Join(dst, filepath.ToSlash(rel))
			info, err := d.Info()
			if err != nil {
				return err
			}
			mode := info.Mode()
			switch {
			case mode.IsDir():
				if seen[name+"/"] {
					return nil
				}
				seen[name+"/"] = true
				return tw.WriteHeader(header(name+"/", tar.TypeDir, 0, 0o755, info, own))
			case mode.IsRegular():
				total += info.Size()
				if total > hatchery.MaxPackBytes {
					return fmt.Errorf("the channel's files exceed %d bytes", hatchery.MaxPackBytes)
				}
				file, err := os.Open(p)
				if err != nil {
					return err
				}
				defer file.Close()
				if err := tw.WriteHeader(header(name, tar.TypeReg, info.Size(), 0o644, info, own)); err != nil {
					return err
				}
				_, err = io.CopyN(tw, file, info.Size())
				return err
			default:
				return nil
			}
		})
	}
	if f.SharedSkills != "" {
		if err := add(f.SharedSkills, "skills"); err != nil {
			return fmt.Errorf("pack workspace skills: %w", err)
		}
	}
	if f.ChannelDir != "" {
		for _, e := range hatchery.ChannelFiles {
			if err := add(filepath.Join(f.ChannelDir, e), e); err != nil {
				return fmt.Errorf("pack channel files: %w", err)
			}
		}
	}
	for _, d := range []string{"scratch/", "outputs/", "skills/", "attachments/"} {
		if !seen[d] {
			seen[d] = true
			if err := tw.WriteHeader(header(d, tar.TypeDir, 0, 0o755, nil, own)); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

func header(name string, typ byte, size int64, perm int64, info fs.FileInfo, own owner) *tar.Header {
	h := &tar.Header{Name: name, Typeflag: typ, Size: size, Mode: perm, Format: tar.FormatPAX}
	if info != nil {
		h.ModTime = info.ModTime()
		if info.Mode()&0o100 != 0 && typ == tar.TypeReg {
			h.Mode = 0o755
		}
	}
	if own.uid >= 0 {
		h.Uid, h.Gid = own.uid, own.gid
	} else if typ == tar.TypeDir {
		h.Mode = 0o777
	} else {
		h.Mode |= 0o666
	}
	return h
}
