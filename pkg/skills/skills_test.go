package skills

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const goodMD = "---\nname: weather\ndescription: Current weather for a city\n---\n# Weather\nRun ./run.sh CITY.\n"

func file(p, content string) Entry {
	return Entry{Path: p, Kind: KindFile, Size: int64(len(content)), Data: []byte(content)}
}

func TestValidate(t *testing.T) {
	big := strings.Repeat("x", MaxSkillBytes)
	tests := []struct {
		name    string
		p       Proposal
		wantErr string // empty: valid
	}{
		{"valid", Proposal{Name: "weather", Entries: []Entry{file("SKILL.md", goodMD), {Path: "bin", Kind: KindDir}, file("bin/run.sh", "echo hi")}}, ""},
		{"missing name", Proposal{Name: "weather", Entries: []Entry{file("SKILL.md", "---\ndescription: d\n---\n")}}, "front matter has no name"},
		{"missing description", Proposal{Name: "weather", Entries: []Entry{file("SKILL.md", "---\nname: weather\n---\n")}}, "front matter has no description"},
		{"no front matter", Proposal{Name: "weather", Entries: []Entry{file("SKILL.md", "# Weather\nname: weather\n")}}, "no front matter"},
		{"unclosed front matter", Proposal{Name: "weather", Entries: []Entry{file("SKILL.md", "---\nname: weather\ndescription: d\n")}}, "not closed"},
		{"name differs from directory", Proposal{Name: "weather", Entries: []Entry{file("SKILL.md", "---\nname: forecast\ndescription: d\n---\n")}}, `name "forecast" is not the skill's directory name "weather"`},
		{"no SKILL.md", Proposal{Name: "weather", Entries: []Entry{file("README.md", goodMD)}}, "no SKILL.md"},
		{"too large", Proposal{Name: "weather", Entries: []Entry{file("SKILL.md", goodMD), file("data.txt", big)}}, "too large"},
		{"too large, data not sent", Proposal{Name: "weather", Entries: []Entry{file("SKILL.md", goodMD), {Path: "data.bin", Kind: KindFile, Size: 5 << 20}}}, "too large"},
		{"SKILL.md too large", Proposal{Name: "weather", Entries: []Entry{file("SKILL.md", goodMD+strings.Repeat("y", MaxSkillMDBytes))}}, "SKILL.md too large"},
		{"symlink", Proposal{Name: "weather", Entries: []Entry{file("SKILL.md", goodMD), {Path: "secrets", Kind: KindSymlink}}}, "secrets is a symbolic link"},
		{"device", Proposal{Name: "weather", Entries: []Entry{file("SKILL.md", goodMD), {Path: "disk", Kind: KindOther}}}, "disk is a device, pipe or socket"},
		{"path escapes", Proposal{Name: "weather", Entries: []Entry{file("SKILL.md", goodMD), file("../MEMORY.md", "x")}}, "leaves the skill's directory"},
		{"absolute path", Proposal{Name: "weather", Entries: []Entry{file("SKILL.md", goodMD), file("/etc/passwd", "x")}}, "must be relative"},
		{"file in unlisted directory", Proposal{Name: "weather", Entries: []Entry{file("SKILL.md", goodMD), file("bin/run.sh", "x")}}, "is not a directory of the skill"},
		{"bad name", Proposal{Name: "../x", Entries: []Entry{file("SKILL.md", goodMD)}}, "a skill's name is"},
		{"data shorter than size", Proposal{Name: "weather", Entries: []Entry{file("SKILL.md", goodMD), {Path: "a", Kind: KindFile, Size: 10, Data: []byte("x")}}}, "1 bytes sent for a file of 10"},
		{"too many entries", Proposal{Name: "weather", Entries: manyEntries(MaxEntries + 1)}, "too many entries"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Validate(tc.p)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want valid", err)
				}
				if s.Description != "Current weather for a city" || len(s.Files) != 2 {
					t.Errorf("Validate = %+v, want the description and two files", s)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Validate = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func manyEntries(n int) []Entry {
	out := []Entry{file("SKILL.md", goodMD)}
	for i := 1; i < n; i++ {
		out = append(out, file("f"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+string(rune('a'+i/26)), "x"))
	}
	return out
}

// TestCollectReportsLinksAndDevices reads real directories: a symlink and
// a FIFO (a device needs root; both are "not a file or a directory") come
// back as such, and Validate refuses them.
func TestCollectReportsLinksAndDevices(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "weather")
	must(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(goodMD), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "bin", "run.sh"), []byte("echo hi\n"), 0o755))
	p, err := Collect(dir)
	must(t, err)
	s, err := Validate(p)
	if err != nil {
		t.Fatalf("Validate(Collect(a good skill)) = %v", err)
	}
	var exec bool
	for _, f := range s.Files {
		if f.Path == "bin/run.sh" {
			exec = f.Executable
		}
	}
	if !exec {
		t.Errorf("bin/run.sh collected as not executable")
	}

	must(t, os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")))
	p, err = Collect(dir)
	must(t, err)
	if _, err := Validate(p); err == nil || !strings.Contains(err.Error(), "passwd is a symbolic link") {
		t.Errorf("Validate(skill with a symlink) = %v, want a symbolic link refusal", err)
	}
	must(t, os.Remove(filepath.Join(dir, "passwd")))

	must(t, syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o600))
	p, err = Collect(dir)
	must(t, err)
	if _, err := Validate(p); err == nil || !strings.Contains(err.Error(), "pipe is a device, pipe or socket") {
		t.Errorf("Validate(skill with a fifo) = %v, want a device refusal", err)
	}
	must(t, os.Remove(filepath.Join(dir, "pipe")))

	// The skill directory itself a link.
	must(t, os.Symlink(dir, filepath.Join(root, "linked")))
	p, err = Collect(filepath.Join(root, "linked"))
	must(t, err)
	if _, err := Validate(p); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Validate(a linked skill directory) = %v, want a symbolic link refusal", err)
	}

	// Too large on disk: the data is not read, the size refuses it.
	must(t, os.WriteFile(filepath.Join(dir, "big"), make([]byte, MaxSkillBytes+1), 0o644))
	p, err = Collect(dir)
	must(t, err)
	if _, err := Validate(p); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Errorf("Validate(a skill over the size limit) = %v, want too large", err)
	}
}

func TestSnapshotChanged(t *testing.T) {
	root := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755))
		must(t, os.WriteFile(filepath.Join(root, p), []byte(s), 0o644))
	}
	write("a/SKILL.md", "a")
	write("b/SKILL.md", "b")
	before := Snapshot(root)
	write("b/SKILL.md", "b2")
	write("c/SKILL.md", "c")
	must(t, os.RemoveAll(filepath.Join(root, "a")))
	got := strings.Join(Changed(before, Snapshot(root)), ",")
	if got != "b,c" {
		t.Errorf("Changed = %q, want %q", got, "b,c")
	}
	if got := Changed(Snapshot(root), Snapshot(root)); len(got) != 0 {
		t.Errorf("Changed(same) = %v, want none", got)
	}
}

func TestInstall(t *testing.T) {
	skillsDir := filepath.Join(t.TempDir(), "skills")
	v1, err := Validate(Proposal{Name: "weather", Entries: []Entry{file("SKILL.md", goodMD), {Path: "bin", Kind: KindDir}, file("bin/old.sh", "old"), {Path: "x", Kind: KindFile, Size: 1, Data: []byte("1"), Executable: true}}})
	must(t, err)
	if c, err := Install(skillsDir, v1); c != Added || err != nil {
		t.Fatalf("Install(new) = %q, %v; want added", c, err)
	}
	if fi, err := os.Stat(filepath.Join(skillsDir, "weather", "x")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("executable file installed as %v, %v", fi.Mode(), err)
	}
	if c, err := Install(skillsDir, v1); c != Unchanged || err != nil {
		t.Errorf("Install(same again) = %q, %v; want unchanged", c, err)
	}
	v2, err := Validate(Proposal{Name: "weather", Entries: []Entry{file("SKILL.md", goodMD+"v2\n")}})
	must(t, err)
	if c, err := Install(skillsDir, v2); c != Updated || err != nil {
		t.Fatalf("Install(changed) = %q, %v; want updated", c, err)
	}
	b, _ := os.ReadFile(filepath.Join(skillsDir, "weather", "SKILL.md"))
	if !strings.HasSuffix(string(b), "v2\n") {
		t.Errorf("SKILL.md after update = %q", b)
	}
	for _, gone := range []string{"bin", "x"} {
		if _, err := os.Lstat(filepath.Join(skillsDir, "weather", gone)); !os.IsNotExist(err) {
			t.Errorf("%s still there after an update without it (%v)", gone, err)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(skillsDir, "weather"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temp file %s left behind", e.Name())
		}
	}
	// A link where the skill would go is refused, never followed.
	must(t, os.Symlink(t.TempDir(), filepath.Join(skillsDir, "linked")))
	v3, err := Validate(Proposal{Name: "linked", Entries: []Entry{file("SKILL.md", "---\nname: linked\ndescription: d\n---\n")}})
	must(t, err)
	if _, err := Install(skillsDir, v3); err == nil {
		t.Errorf("Install over a symlinked directory succeeded")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
