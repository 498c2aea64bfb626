package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/chat"
)

func TestSanitizeFilename(t *testing.T) {
	tests := []struct{ in, want string }{
		{"report.pdf", "report.pdf"},
		{"../../etc/passwd", "passwd"},
		{`..\..\windows\system.ini`, "system.ini"},
		{".bashrc", "bashrc"},
		{"..", "file"},
		{"", "file"},
		{"my photo (1).JPG", "my_photo_1_.JPG"},
		{"日本語.txt", "txt"},
		{"a/b/", "file"},
		{"x\x00y.sh", "x_y.sh"},
		{strings.Repeat("n", 300) + ".tar.gz", strings.Repeat("n", 97) + ".gz"},
	}
	for _, tt := range tests {
		if got := SanitizeFilename(tt.in); got != tt.want {
			t.Errorf("SanitizeFilename(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzSanitizeFilename(f *testing.F) {
	for _, s := range []string{"a.txt", "../x", "..", "/", `\\x`, ".a.b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := SanitizeFilename(s)
		if got == "" || len(got) > 100 || strings.ContainsAny(got, `/\`) || strings.HasPrefix(got, ".") {
			t.Fatalf("SanitizeFilename(%q) = %q", s, got)
		}
		dir := t.TempDir()
		a, err := SaveAttachment(dir, "1", s, "", strings.NewReader("x"), 10)
		if err != nil {
			t.Fatalf("SaveAttachment(%q): %v", s, err)
		}
		if el := strings.Split(a.LocalPath, "/"); len(el) != 2 || el[0] != "attachments" || el[1] == ".." || el[1] == "." {
			t.Fatalf("LocalPath %q escapes attachments/", a.LocalPath)
		}
	})
}

func TestSaveAttachment(t *testing.T) {
	dir := t.TempDir()
	a, err := SaveAttachment(dir, "1234", "../../secret.txt", "text/plain", strings.NewReader("hello"), 100)
	if err != nil {
		t.Fatal(err)
	}
	if a.LocalPath != "attachments/1234-secret.txt" || a.Size != 5 || a.Filename != "../../secret.txt" || a.MimeType != "text/plain" {
		t.Errorf("attachment = %+v", a)
	}
	if b, err := os.ReadFile(filepath.Join(dir, a.LocalPath)); err != nil || string(b) != "hello" {
		t.Errorf("content = %q, %v", b, err)
	}
	// Same name again: a numbered variant, the first file untouched.
	b, err := SaveAttachment(dir, "1234", "secret.txt", "", strings.NewReader("other"), 100)
	if err != nil {
		t.Fatal(err)
	}
	if b.LocalPath != "attachments/1234-secret-1.txt" {
		t.Errorf("second LocalPath = %q", b.LocalPath)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, a.LocalPath)); string(got) != "hello" {
		t.Errorf("first file overwritten: %q", got)
	}
}

func TestSaveAttachmentTooLarge(t *testing.T) {
	dir := t.TempDir()
	_, err := SaveAttachment(dir, "9", "big.bin", "", bytes.NewReader(make([]byte, 101)), 100)
	if !errors.Is(err, ErrAttachmentTooLarge) {
		t.Fatalf("err = %v, want ErrAttachmentTooLarge", err)
	}
	left, _ := os.ReadDir(filepath.Join(dir, "attachments"))
	if len(left) != 0 {
		t.Errorf("partial file left behind: %v", left)
	}
	if _, err := SaveAttachment(dir, "9", "exact.bin", "", bytes.NewReader(make([]byte, 100)), 100); err != nil {
		t.Errorf("file of exactly the limit refused: %v", err)
	}
}

func TestSaveAttachmentDoesNotFollowSymlink(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "target")
	if err := os.MkdirAll(filepath.Join(dir, "attachments"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "attachments", "7-x.txt")); err != nil {
		t.Fatal(err)
	}
	a, err := SaveAttachment(dir, "7", "x.txt", "", strings.NewReader("data"), 100)
	if err != nil {
		t.Fatal(err)
	}
	if a.LocalPath != "attachments/7-x-1.txt" {
		t.Errorf("LocalPath = %q", a.LocalPath)
	}
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Errorf("write followed a symlink out of the channel: %v", err)
	}
}

func TestNewestMessage(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ch, err := s.Channel("discord", "42")
	if err != nil {
		t.Fatal(err)
	}
	if _, found, err := NewestMessage(ch.Dir(), nil, 10); found || err != nil {
		t.Fatalf("empty log: found %v, err %v", found, err)
	}
	for _, id := range []string{"100", "200", "1734567890123.7"} {
		if _, err := ch.AppendMessage(chat.ChannelMessage{ID: id, ChannelID: "42", Text: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	digits := func(m chat.ChannelMessage) bool { return !strings.Contains(m.ID, ".") }
	m, found, err := NewestMessage(ch.Dir(), digits, 10)
	if err != nil || !found || m.ID != "200" {
		t.Errorf("NewestMessage = %q, %v, %v; want 200", m.ID, found, err)
	}
	if _, found, _ := NewestMessage(ch.Dir(), digits, 1); found {
		t.Errorf("maxLines 1 looked past the last line")
	}
	if _, found, _ := NewestMessage(t.TempDir(), nil, 10); found {
		t.Errorf("missing log found something")
	}
}
