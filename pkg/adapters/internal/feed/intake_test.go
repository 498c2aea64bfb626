package feed

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mother-chat/mother/internal/testenv"
	"github.com/mother-chat/mother/pkg/chat"
)

// memFiles is a chat.Files over a temporary directory, with a log per
// channel given by the test.
type memFiles struct {
	root   string
	logged map[string][]chat.ChannelMessage
}

func (f *memFiles) ChannelDir(id string) (string, error) {
	if id == "broken" {
		return "", errors.New("disk full")
	}
	return filepath.Join(f.root, id), nil
}

func (f *memFiles) LoggedChannels() ([]string, error) {
	var ids []string
	for id := range f.logged {
		ids = append(ids, id)
	}
	return ids, nil
}

func (f *memFiles) NewestMessage(dir string, keep func(chat.ChannelMessage) bool, _ int) (chat.ChannelMessage, bool, error) {
	msgs := f.logged[filepath.Base(dir)]
	for i := len(msgs) - 1; i >= 0; i-- {
		if keep(msgs[i]) {
			return msgs[i], true, nil
		}
	}
	return chat.ChannelMessage{}, false, nil
}

func (f *memFiles) SaveAttachment(dir, prefix, name, mime string, r io.Reader, max int64) (chat.ChannelAttachment, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return chat.ChannelAttachment{}, err
	}
	if int64(len(b)) > max {
		return chat.ChannelAttachment{}, errors.New("attachment too large")
	}
	return chat.ChannelAttachment{Filename: name, LocalPath: "attachments/" + prefix + "-" + name, MimeType: mime, Size: int64(len(b))}, nil
}

func body(s string) func(context.Context) (io.ReadCloser, string, error) {
	return func(context.Context) (io.ReadCloser, string, error) {
		return io.NopCloser(strings.NewReader(s)), "text/plain", nil
	}
}

func TestIntakeNotes(t *testing.T) {
	t.Parallel()
	in := Intake{Files: &memFiles{root: t.TempDir()}, Max: 10}
	atts := []Attachment{
		{Name: "ok.txt", Size: 2, Fetch: body("hi")},
		{Name: "big.bin", Size: 2048},
		{Name: "nourl.png", Unavailable: "no download URL (scope files:read?)"},
		{Name: "lies.txt", Size: 1, Fetch: body("much longer than ten bytes")},
		{Name: "gone.txt", Fetch: func(context.Context) (io.ReadCloser, string, error) { return nil, "", errors.New("download: HTTP 404") }},
	}
	saved, text := in.Save(t.Context(), "C1", "m1", atts, "look")
	if len(saved) != 1 || saved[0].Filename != "ok.txt" || saved[0].MimeType != "text/plain" {
		t.Errorf("Save saved %+v, want ok.txt only, with the fetched mime type", saved)
	}
	for _, want := range []string{
		"look\n",
		"[attachment big.bin not downloaded: 2.0 KB is over the 10 B limit]",
		"[attachment nourl.png not downloaded: no download URL (scope files:read?)]",
		"[attachment lies.txt not downloaded: attachment too large]",
		"[attachment gone.txt not downloaded: download: HTTP 404]",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("Save text = %q, want it to contain %q", text, want)
		}
	}
	_, text = in.Save(t.Context(), "broken", "m2", atts[:1], "x")
	if text != "x\n[attachments not saved: disk full]" {
		t.Errorf("Save into a broken channel: text = %q", text)
	}
}

func TestCursorResumesFromNewestOfLogAndRun(t *testing.T) {
	t.Parallel()
	files := &memFiles{root: "/nowhere", logged: map[string][]chat.ChannelMessage{
		"A": {{ID: "10"}, {ID: "20"}, {ID: "local-1"}},
		"B": {{ID: "5"}},
		"x": {{ID: "7"}},
	}}
	newer := func(a, b string) bool { return b == "" || len(a) > len(b) || len(a) == len(b) && a > b }
	isID := func(id string) bool { return !strings.HasPrefix(id, "local") }
	c := &Cursor{Files: files, Newer: newer, IsPlatformID: isID, LoggedChannel: func(id string) bool { return id != "x" }}
	if got := c.Logged(); len(got) != 2 || got["A"] != "20" || got["B"] != "5" {
		t.Errorf("Logged() = %v, want A:20 B:5 (made-up ids and filtered channels skipped)", got)
	}
	c.Note("B", "9")
	c.Note("B", "6")
	c.Note("C", "3")
	if got := c.Resume(); len(got) != 3 || got["A"] != "20" || got["B"] != "9" || got["C"] != "3" {
		t.Errorf("Resume() = %v, want A:20 B:9 C:3", got)
	}
}

// TestAdaptersDoNotImportStore: adapters reach the store only through
// chat.Env.Files.
func TestAdaptersDoNotImportStore(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "github.com/mother-chat/mother/pkg/adapters/...").Output()
	if err != nil {
		testenv.Unavailable(t, "go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "github.com/mother-chat/mother/pkg/store" {
			t.Errorf("pkg/adapters/... depends on pkg/store; give adapters what they need through chat.Env")
		}
	}
}
