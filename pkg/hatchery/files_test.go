package hatchery

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestUploadPathsStayInside(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "/etc/passwd", "../x", "a/../../x", ".", ".."} {
		if _, err := cleanRel(bad); err == nil {
			t.Errorf("cleanRel(%q) accepted", bad)
		}
	}
	for in, want := range map[string]string{"a/b.txt": "a/b.txt", "/workspace/out/r.md": "out/r.md", "a/./b/../c": "a/c"} {
		if got, err := cleanRel(in); err != nil || got != want {
			t.Errorf("cleanRel(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFilesList: what a chick receives. The channel's own files (not its
// logs), the shared skills but those the channel has its own of (the
// whole directory replaced, not merged), no link followed, no other
// channel, the workspace's usual directories, parents first.
func TestFilesList(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	ch := filepath.Join(data, "channels", "cli", "local")
	shared := filepath.Join(data, "skills")
	writeFiles(t, ch, map[string]string{
		"MEMORY.md": "memory", "attachments/a.txt": "attached", "skills/greet/SKILL.md": "channel greet",
		"daily/2026-11-23.md": "day", "log.jsonl": "{}\n", "context.jsonl": "{}\n",
		`scratch/chicks/c-1/outputs/a\b.txt`: "a name the chick refuses",
	})
	writeFiles(t, shared, map[string]string{
		"greet/SKILL.md": "workspace greet", "greet/extra.sh": "shared only file of a replaced skill",
		"shared-only/SKILL.md": "shared", "shared-only/bin/run.sh": "echo hi",
	})
	must(t, os.Chmod(filepath.Join(shared, "shared-only/bin/run.sh"), 0o700))
	writeFiles(t, filepath.Join(data, "channels", "cli", "other"), map[string]string{"MEMORY.md": "other channel"})
	must(t, os.WriteFile(filepath.Join(data, "config.json"), []byte("secret"), 0o600))
	must(t, os.MkdirAll(filepath.Join(ch, "scratch"), 0o700))
	must(t, os.Symlink(filepath.Join(data, "config.json"), filepath.Join(ch, "scratch", "link-to-config")))
	must(t, os.Symlink(filepath.Join(data, "channels", "cli", "other"), filepath.Join(ch, "attachments", "link-to-other")))

	entries, err := Files{ChannelDir: ch, SharedSkills: shared}.List()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]FileEntry{}
	for i, e := range entries {
		if _, dup := got[e.Path]; dup {
			t.Errorf("%s listed twice", e.Path)
		}
		if parent := filepath.Dir(e.Path); parent != "." {
			if p, ok := got[parent]; !ok || !p.Dir {
				t.Errorf("entry %d %s comes before its directory", i, e.Path)
			}
		}
		got[e.Path] = e
	}
	wantFiles := map[string]string{
		"MEMORY.md": "memory", "attachments/a.txt": "attached", "skills/greet/SKILL.md": "channel greet",
		"daily/2026-11-23.md": "day", "skills/shared-only/SKILL.md": "shared", "skills/shared-only/bin/run.sh": "echo hi",
	}
	for p, e := range got {
		if e.Dir {
			continue
		}
		want, ok := wantFiles[p]
		if !ok {
			t.Errorf("listed %s: nothing but the channel's files and the shared skills may go in", p)
			continue
		}
		f, err := e.Open()
		if err != nil {
			t.Fatalf("open %s: %v", p, err)
		}
		b, _ := io.ReadAll(f)
		f.Close()
		if string(b) != want || e.Size != int64(len(want)) {
			t.Errorf("%s = %q (size %d), want %q", p, b, e.Size, want)
		}
		if e.Executable != (p == "skills/shared-only/bin/run.sh") {
			t.Errorf("%s executable %v", p, e.Executable)
		}
	}
	for p := range wantFiles {
		if _, ok := got[p]; !ok {
			t.Errorf("%s not listed", p)
		}
	}
	for _, d := range []string{"scratch", "outputs", "skills", "attachments", "daily", "skills/greet"} {
		if !got[d].Dir {
			t.Errorf("directory %s not listed", d)
		}
	}
}

// TestFileEntryOpenRefusesALinkSwappedIn: a file replaced by a link
// between List and Open is not sent.
func TestFileEntryOpenRefusesALinkSwappedIn(t *testing.T) {
	t.Parallel()
	ch := t.TempDir()
	secret := filepath.Join(t.TempDir(), "config.json")
	writeFiles(t, ch, map[string]string{"MEMORY.md": "memory", "log.jsonl": "the channel's log"})
	must(t, os.WriteFile(secret, []byte("secret"), 0o600))
	entries, err := Files{ChannelDir: ch}.List()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(entries, func(e FileEntry) bool { return e.Path == "MEMORY.md" })
	if i < 0 {
		t.Fatalf("MEMORY.md not listed: %+v", entries)
	}
	// A link out of the channel, and one to its log (inside it).
	for _, target := range []string{secret, "log.jsonl"} {
		must(t, os.Remove(filepath.Join(ch, "MEMORY.md")))
		must(t, os.Symlink(target, filepath.Join(ch, "MEMORY.md")))
		if f, err := entries[i].Open(); err == nil {
			b, _ := io.ReadAll(f)
			f.Close()
			t.Errorf("Open followed a link to %s swapped in: read %q", target, b)
		}
	}
}

// TestFilesListLeavesOutPastTheCap: a file that would pass MaxPackBytes
// is left out, the rest listed (a sparse file: nothing is read to learn
// it).
func TestFilesListLeavesOutPastTheCap(t *testing.T) {
	t.Parallel()
	ch := t.TempDir()
	writeFiles(t, ch, map[string]string{"MEMORY.md": "memory", "attachments/huge.bin": "", "attachments/small.txt": "small"})
	must(t, os.Truncate(filepath.Join(ch, "attachments", "huge.bin"), MaxPackBytes))
	entries, left, err := Files{ChannelDir: ch}.list()
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if !e.Dir {
			files = append(files, e.Path)
		}
	}
	if strings.Join(files, " ") != "MEMORY.md attachments/small.txt" || strings.Join(left, " ") != "attachments/huge.bin" {
		t.Errorf("list over the cap: %v, left out %v; want MEMORY.md and attachments/small.txt, huge.bin left out", files, left)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
