package skills

import (
	"fmt"
	"strings"
	"testing"
)

// capSkill is a valid skill of name with a data file of n bytes.
func capSkill(t *testing.T, name string, n int) Skill {
	t.Helper()
	md := fmt.Sprintf("---\nname: %s\ndescription: a skill\n---\n", name)
	s, err := Validate(Proposal{Name: name, Entries: []Entry{
		{Path: "SKILL.md", Kind: KindFile, Size: int64(len(md)), Data: []byte(md)},
		{Path: "data", Kind: KindFile, Size: int64(n), Data: make([]byte, n)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCheckCaps: a new skill past the count or the bytes is refused with
// a reason naming the setting; an update of a skill already there needs
// room only for what it adds, and one that shrinks is taken even over
// the bytes.
func TestCheckCaps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	caps := Caps{MaxCount: 2, MaxBytes: 10_000}
	for _, name := range []string{"a", "b"} {
		if err := CheckCaps(dir, "here", capSkill(t, name, 4000), caps); err != nil {
			t.Fatalf("skill %s within the caps: %v", name, err)
		}
		if _, err := Install(dir, capSkill(t, name, 4000)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		s    Skill
		caps Caps
		want string // "" for taken
	}{
		{"a third skill", capSkill(t, "c", 10), caps, "chicks.skills.maxCount"},
		{"a third skill, no count cap", capSkill(t, "c", 10), Caps{MaxBytes: 10_000}, ""},
		{"a third skill past the bytes", capSkill(t, "c", 3000), Caps{MaxBytes: 10_000}, "chicks.skills.maxBytes"},
		{"an update that grows within the bytes", capSkill(t, "a", 5000), caps, ""},
		{"an update that grows past the bytes", capSkill(t, "a", 7000), caps, "chicks.skills.maxBytes"},
		{"an update that shrinks", capSkill(t, "a", 10), Caps{MaxCount: 1, MaxBytes: 1000}, ""},
	} {
		err := CheckCaps(dir, "this channel's skills", c.s, c.caps)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "this channel's skills")):
			t.Errorf("%s: %v, want a refusal naming this channel's skills and %s", c.name, err, c.want)
		}
	}
	if got, err := Usage(dir); err != nil || len(got) != 2 {
		t.Errorf("Usage = %v, %v; want the two skills, which stay", got, err)
	}
}
