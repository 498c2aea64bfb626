package mother

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/prompt"
	"github.com/mother-chat/mother/pkg/skills"
)

func skillProposal(name, desc string) skills.Proposal {
	md := "---\nname: " + name + "\ndescription: " + desc + "\n---\n# " + name + "\n"
	return skills.Proposal{Name: name, Entries: []skills.Entry{{Path: "SKILL.md", Kind: skills.KindFile, Size: int64(len(md)), Data: []byte(md)}}}
}

// TestProposeSkillWhereItGoes: a chick's skill goes to its channel's
// skills/, or the workspace's for a chick spawned for that; what changed
// is posted, an unchanged skill is not; a refusal is posted with the
// reason and nothing is written.
func TestProposeSkillWhereItGoes(t *testing.T) {
	h := newHarness(t)
	chDir := filepath.Join(h.data, "workspace", "channels", "rec", "C1")
	in := hatchery.Info{Record: hatchery.Record{ID: "c-1", Adapter: "rec", ChannelID: "C1", ChannelDir: chDir}}
	posts := func() string {
		var b strings.Builder
		for _, r := range h.ad.of("post") {
			b.WriteString(r.Text + "\n")
		}
		return b.String()
	}

	ok, msg, err := h.m.ProposeSkill(t.Context(), in, skillProposal("weather", "the weather"))
	if !ok || err != nil || !strings.Contains(msg, "added skill `weather` in this channel's skills") {
		t.Fatalf("ProposeSkill(channel) = %v, %q, %v", ok, msg, err)
	}
	if _, err := os.Stat(filepath.Join(chDir, "skills", "weather", "SKILL.md")); err != nil {
		t.Errorf("channel skill not written: %v", err)
	}
	ok, msg, _ = h.m.ProposeSkill(t.Context(), in, skillProposal("weather", "the weather"))
	if !ok || !strings.Contains(msg, "unchanged") {
		t.Errorf("ProposeSkill(same again) = %v, %q; want unchanged", ok, msg)
	}
	ok, msg, _ = h.m.ProposeSkill(t.Context(), in, skillProposal("weather", "the weather, better"))
	if !ok || !strings.Contains(msg, "updated skill `weather`") {
		t.Errorf("ProposeSkill(changed) = %v, %q; want updated", ok, msg)
	}

	ws := in
	ws.SkillsTo = hatchery.SkillsToWorkspace
	ok, msg, _ = h.m.ProposeSkill(t.Context(), ws, skillProposal("shared", "for everyone"))
	if !ok || !strings.Contains(msg, "in the workspace's skills") {
		t.Errorf("ProposeSkill(workspace) = %v, %q", ok, msg)
	}
	if _, err := os.Stat(filepath.Join(h.data, "workspace", "skills", "shared", "SKILL.md")); err != nil {
		t.Errorf("workspace skill not written: %v", err)
	}
	if _, err := os.Stat(filepath.Join(chDir, "skills", "shared")); !os.IsNotExist(err) {
		t.Errorf("workspace skill also written to the channel (%v)", err)
	}

	bad := skillProposal("nodesc", "")
	ok, msg, _ = h.m.ProposeSkill(t.Context(), in, bad)
	if ok || !strings.Contains(msg, "front matter has no description") {
		t.Errorf("ProposeSkill(no description) = %v, %q; want refused", ok, msg)
	}
	if _, err := os.Stat(filepath.Join(chDir, "skills", "nodesc")); !os.IsNotExist(err) {
		t.Errorf("refused skill written (%v)", err)
	}
	got := posts()
	for _, want := range []string{"added skill `weather`", "updated skill `weather`", "added skill `shared`", "Skill nodesc from chick c-1 refused: SKILL.md: front matter has no description"} {
		if !strings.Contains(got, want) {
			t.Errorf("posts lack %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "skill `weather`") != 2 {
		t.Errorf("the unchanged skill was announced:\n%s", got)
	}
}

func TestChickSkillsTo(t *testing.T) {
	tests := []struct {
		arg     string
		admin   bool
		want    string
		wantErr string
	}{
		{"", false, "", ""},
		{"channel", false, "", ""},
		{"workspace", true, hatchery.SkillsToWorkspace, ""},
		{"workspace", false, "", "only an admin"},
		{"elsewhere", true, "", `skills: "elsewhere" is not`},
	}
	for _, tc := range tests {
		got, err := chickSkillsTo(tc.arg, tc.admin)
		if got != tc.want || (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("chickSkillsTo(%q, %v) = %q, %v; want %q, error with %q", tc.arg, tc.admin, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestUpdateChickMemoryBudget: a chick's memory update shares
// update_memory's budget; over it, nothing is written and the reason is
// returned.
func TestUpdateChickMemoryBudget(t *testing.T) {
	h := newHarness(t)
	chDir := filepath.Join(h.data, "workspace", "channels", "rec", "C1")
	if err := os.MkdirAll(chDir, 0o700); err != nil {
		t.Fatal(err)
	}
	in := hatchery.Info{Record: hatchery.Record{ID: "c-1", Adapter: "rec", ChannelID: "C1", ChannelDir: chDir}}
	ok, msg, err := h.m.UpdateChickMemory(t.Context(), in, "append", "fact one")
	if !ok || err != nil {
		t.Fatalf("UpdateChickMemory = %v, %q, %v", ok, msg, err)
	}
	ok, msg, err = h.m.UpdateChickMemory(t.Context(), in, "append", strings.Repeat("x", prompt.BudgetChannelMemory))
	if ok || err != nil || !strings.Contains(msg, "over its budget of") {
		t.Errorf("UpdateChickMemory(over budget) = %v, %q, %v; want refused with the budget", ok, msg, err)
	}
	ok, msg, _ = h.m.UpdateChickMemory(t.Context(), in, "prepend", "x")
	if ok || !strings.Contains(msg, `mode: "prepend"`) {
		t.Errorf("UpdateChickMemory(bad mode) = %v, %q; want refused naming the mode", ok, msg)
	}
	b, _ := os.ReadFile(filepath.Join(chDir, "MEMORY.md"))
	if string(b) != "fact one\n" {
		t.Errorf("MEMORY.md = %q, want only the first update", b)
	}
}
