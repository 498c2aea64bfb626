package migrate

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
)

// copyFixture copies testdata/old into a temp dir (so the test can add a
// symlink and compare before/after) and returns its path.
func copyFixture(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "old")
	err := filepath.WalkDir("testdata/old", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("testdata/old", p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	// A symlink pointing outside: never followed or copied.
	if err := os.Symlink("/etc/passwd", filepath.Join(dst, "1234567890", "attachments", "passwd")); err != nil {
		t.Fatal(err)
	}
	return dst
}

// treeHash fingerprints every entry's path, mode, size, mtime and content.
func treeHash(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		info, _ := os.Lstat(p)
		rel, _ := filepath.Rel(root, p)
		line := fmt.Sprintf("%s %v %d %d", rel, info.Mode(), info.Size(), info.ModTime().UnixNano())
		if info.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			line += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		lines = append(lines, line)
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func readMessages(t *testing.T, path string) []chat.ChannelMessage {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []chat.ChannelMessage
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m chat.ChannelMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("converted line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestMigrateFixture(t *testing.T) {
	t.Parallel()
	old := copyFixture(t)
	before := treeHash(t, old)
	newDir := filepath.Join(t.TempDir(), "new")

	rep, err := Run(Options{OldDir: old, NewDir: newDir, Adapter: "discord-mybot"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if after := treeHash(t, old); after != before {
		t.Errorf("the old directory changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	text := rep.String()
	t.Logf("report:\n%s", text)

	// Discord channel: 4 of 6 lines converted, the bad line and the torn
	// last line reported.
	chDir := filepath.Join(newDir, "workspace/channels/discord-mybot/1234567890")
	msgs := readMessages(t, filepath.Join(chDir, "log.jsonl"))
	if len(msgs) != 4 {
		t.Fatalf("discord channel: %d messages converted, want 4", len(msgs))
	}
	first := msgs[0]
	wantTime := time.Date(2025, 12, 14, 10, 0, 0, 0, time.UTC)
	if first.ID != "1317777777777777777" || first.ChannelID != "1234567890" || !first.Timestamp.Equal(wantTime) ||
		first.Sender != (chat.Sender{ID: "111", Username: "mario"}) || first.Text != "hello mother" {
		t.Errorf("first message = %+v", first)
	}
	if !msgs[1].Sender.IsBot || msgs[1].Text != "Hello Mario!" {
		t.Errorf("bot message = %+v", msgs[1])
	}
	if a := msgs[2].Attachments; len(a) != 1 || a[0].Filename != "photo.png" || a[0].LocalPath != "attachments/1700000000000_photo.png" {
		t.Errorf("attachments = %+v", a)
	}
	for _, want := range []string{
		"1234567890/log.jsonl:4: not JSON",
		"1234567890/log.jsonl:6: torn last line",
		"1234567890/context.jsonl:11: not JSON",
		"context: the compaction summary carried; 6 recent message(s) carried; it holds the log up to message 1317777777777777779 (matched by text); the 1 message(s) logged after it come in on the first run",
		"events/broken.json: not JSON",
		"attachments/passwd: not a regular file",
		"skipped: notachannel/",
		"channel 1234567890: 4 messages",
		"channel C0A34FL8PMH: 3 messages",
		"events: 2 converted",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(chDir, "attachments/1700000000000_photo.png")); err != nil || string(b) != "PNGDATA" {
		t.Errorf("attachment copy: %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(chDir, "attachments/passwd")); err == nil {
		t.Error("symlink was copied")
	}
	if b, _ := os.ReadFile(filepath.Join(chDir, "MEMORY.md")); !strings.Contains(string(b), "Fridays") {
		t.Errorf("channel MEMORY.md = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(chDir, "daily/2025-12-14.md")); string(b) != "- 10:00:00 [mario]: hello mother\n" {
		t.Errorf("old daily log not copied as is: %q", b)
	}

	// Slack channel (mom): no date on one line (taken from ts), a
	// duplicate ts made unique, string attachments, daily logs built.
	slack := readMessages(t, filepath.Join(newDir, "workspace/channels/discord-mybot/C0A34FL8PMH/log.jsonl"))
	if len(slack) != 3 {
		t.Fatalf("slack channel: %d messages", len(slack))
	}
	if !slack[1].Timestamp.Equal(time.Unix(1734688805, 200_000).UTC()) || slack[1].ID != "1734688805.000200" {
		t.Errorf("message without date = %+v", slack[1])
	}
	if slack[2].ID != "1734688805.000200-1" {
		t.Errorf("duplicate ts not made unique: %q", slack[2].ID)
	}
	if a := slack[2].Attachments; len(a) != 1 || a[0].LocalPath != "attachments/notes.txt" {
		t.Errorf("string attachment = %+v", a)
	}
	days, _ := filepath.Glob(filepath.Join(newDir, "workspace/channels/discord-mybot/C0A34FL8PMH/daily/*.md"))
	if len(days) == 0 {
		t.Error("no daily logs built for a channel that had none")
	}

	// Workspace files, skills and events with qualified channel ids.
	for _, f := range []string{"MEMORY.md", "MOTHER.md", "SYSTEM.md", "skills/weather/SKILL.md", "skills/weather/weather.sh"} {
		if _, err := os.Stat(filepath.Join(newDir, "workspace", f)); err != nil {
			t.Errorf("workspace %s: %v", f, err)
		}
	}
	var ev map[string]any
	b, _ := os.ReadFile(filepath.Join(newDir, "workspace/events/dentist.json"))
	if err := json.Unmarshal(b, &ev); err != nil || ev["channelId"] != "discord-mybot/1234567890" || ev["at"] != "2025-12-15T09:00:00+01:00" {
		t.Errorf("event = %s (%v)", b, err)
	}
	if _, err := os.Stat(filepath.Join(newDir, "workspace/events/broken.json")); err == nil {
		t.Error("broken event was copied")
	}

	// Running it again refuses to overwrite the channels already imported.
	rep2, err := Run(Options{OldDir: old, NewDir: newDir, Adapter: "discord-mybot"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep2.String(), "already has a log") {
		t.Errorf("second run report:\n%s", rep2)
	}
	if got := readMessages(t, filepath.Join(chDir, "log.jsonl")); len(got) != 4 {
		t.Errorf("second run changed the log: %d messages", len(got))
	}
}

func TestMigrateRefusesNestedDirs(t *testing.T) {
	t.Parallel()
	old := copyFixture(t)
	if _, err := Run(Options{OldDir: old, NewDir: filepath.Join(old, "new"), Adapter: "x"}); err == nil {
		t.Error("NEW inside OLD accepted")
	}
	if _, err := Run(Options{OldDir: old, NewDir: t.TempDir(), Adapter: "bad/name"}); err == nil {
		t.Error("bad adapter name accepted")
	}
	if _, err := Run(Options{OldDir: filepath.Join(old, "missing"), NewDir: t.TempDir(), Adapter: "x"}); err == nil {
		t.Error("missing OLD accepted")
	}
}
