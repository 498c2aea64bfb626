package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/fsync"
)

// DefaultMaxAttachment is the default size limit of a downloaded file.
const DefaultMaxAttachment = chat.DefaultMaxAttachment

// ErrAttachmentTooLarge means a file is over the size limit; nothing of it
// is kept.
var ErrAttachmentTooLarge = errors.New("attachment too large")

// SanitizeFilename turns a name a user chose into a safe file name: the
// last path element only, characters outside [A-Za-z0-9._-] replaced by
// "_", no leading dot, at most 100 bytes (the extension kept), never empty.
func SanitizeFilename(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	var b strings.Builder
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if ok {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	for strings.Contains(s, "__") {
		s = strings.ReplaceAll(s, "__", "_")
	}
	s = strings.TrimRight(strings.TrimLeft(s, "._"), "_")
	if s == "" || strings.Trim(s, ".") == "" {
		s = "file"
	}
	const maxLen = 100
	if len(s) > maxLen {
		ext := filepath.Ext(s)
		if len(ext) > 20 || !utf8.ValidString(ext) {
			ext = ""
		}
		s = s[:maxLen-len(ext)] + ext
	}
	return s
}

// SaveAttachment stores a downloaded file under channelDir/attachments/ as
// "<prefix>-<sanitised name>" (a numbered variant if that exists), reading
// at most max bytes from r. Over the limit, the partial file is removed and
// ErrAttachmentTooLarge returned. The file is created exclusively inside
// the attachments directory, so no name can escape it or overwrite
// anything. The returned attachment's LocalPath is relative to channelDir.
func SaveAttachment(channelDir, prefix, name, mimeType string, r io.Reader, max int64) (chat.ChannelAttachment, error) {
	if max <= 0 {
		max = DefaultMaxAttachment
	}
	dir := filepath.Join(channelDir, "attachments")
	if err := fsync.MkdirAll(dir, 0o700); err != nil {
		return chat.ChannelAttachment{}, fmt.Errorf("save attachment: %w", err)
	}
	base := SanitizeFilename(name)
	if prefix = SanitizeFilename(prefix); prefix != "file" {
		base = prefix + "-" + base
	}
	ext := filepath.Ext(base)
	stem := strings.TrimSuffix(base, ext)
	var (
		f    *os.File
		path string
		err  error
	)
	for i := 0; i < 1000; i++ {
		fn := base
		if i > 0 {
			fn = fmt.Sprintf("%s-%d%s", stem, i, ext)
		}
		path = filepath.Join(dir, fn)
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if !errors.Is(err, os.ErrExist) {
			break
		}
	}
	if err != nil {
		return chat.ChannelAttachment{}, fmt.Errorf("save attachment: %w", err)
	}
	n, cerr := io.Copy(f, io.LimitReader(r, max+1))
	serr := fsync.File(f, fsync.KindAttachment)
	if serr == nil {
		serr = fsync.Created(path) // its name, in the attachments directory
	}
	if err := errors.Join(cerr, serr, f.Close()); err != nil {
		os.Remove(path)
		return chat.ChannelAttachment{}, fmt.Errorf("save attachment %s: %w", name, err)
	}
	if n > max {
		os.Remove(path)
		return chat.ChannelAttachment{}, fmt.Errorf("save attachment %s: %w (over %d bytes)", name, ErrAttachmentTooLarge, max)
	}
	rel, err := filepath.Rel(channelDir, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		os.Remove(path)
		return chat.ChannelAttachment{}, fmt.Errorf("save attachment %s: path escapes the channel directory", name)
	}
	return chat.ChannelAttachment{Filename: name, LocalPath: filepath.ToSlash(rel), MimeType: mimeType, Size: n}, nil
}
