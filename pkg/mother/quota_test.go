package mother

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
)

// TestEvictionsToldOnce: what the channel quota removed on a chick's
// account, in several evictions, is told once when the chick ends: one
// notice naming the first files removed (inert), counting
// the rest, and logged in the channel. A chick that evicted nothing
// posts no notice.
func TestEvictionsToldOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withChickResults(config.ResultsRelay))
	obs := h.m.ChickObserver().(hatchery.EvictionObserver)
	in := hatchery.Info{Record: hatchery.Record{ID: "c-1", Adapter: "rec", ChannelID: "C1", Tier: "local", Goal: "fill"}, Channel: "rec/C1"}
	for i := range 4 {
		var removed []string
		for j := range 4 {
			removed = append(removed, fmt.Sprintf("scratch/chicks/c-0/outputs/f-%d-%d.bin", i, j))
		}
		if i == 0 {
			removed[0] = "scratch/chicks/c-0/outputs/@everyone`x`.bin"
		}
		obs.ChannelFilesEvicted(in, hatchery.Eviction{Quota: 256 << 20, Removed: removed, Bytes: 4 << 20})
	}
	end := in
	end.State, end.Reason = hatchery.StateDone, hatchery.ReasonDone
	end.Result = &hatchery.Result{Text: "Filled."}
	h.m.ChickObserver().ChickEnded(end)
	quiet := in
	quiet.ID = "c-2"
	quiet.State, quiet.Reason = hatchery.StateDone, hatchery.ReasonDone
	quiet.Result = &hatchery.Result{Text: "Nothing."}
	h.m.ChickObserver().ChickEnded(quiet)
	h.idle()

	var notices []string
	for _, p := range h.ad.of("post") {
		if strings.Contains(p.Text, "quota") {
			notices = append(notices, p.Text)
		}
	}
	if len(notices) != 1 {
		t.Fatalf("notices of removed files: %q, want one", notices)
	}
	n := notices[0]
	for _, want := range []string{"256 MiB", "16 oldest chick output files (16 MiB)", "chick c-1", "f-0-1.bin", "and 6 more"} {
		if !strings.Contains(n, want) {
			t.Errorf("the notice %q does not say %q", n, want)
		}
	}
	if strings.Contains(n, "@everyone") || strings.Count(n, "`")%2 != 0 {
		t.Errorf("a file name is not inert in the notice: %q", n)
	}
	logged := false
	for _, m := range h.logged("C1") {
		logged = logged || m.Text == n
	}
	if !logged {
		t.Errorf("the notice is not in the channel's log")
	}
}

func TestSizeText(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{12: "12 bytes", 1536: "1.5 KiB", 256 << 20: "256 MiB", 1 << 30: "1 GiB"} {
		if got := sizeText(n); got != want {
			t.Errorf("sizeText(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestProposeSkillCapped: past chicks.skills.maxCount a chick's new skill
// is refused, posted with the reason and not written; the skills there
// stay and may still be updated.
func TestProposeSkillCapped(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(h *harness) { h.cfg.Chicks.Skills.MaxCount = 2 })
	chDir := filepath.Join(h.data, "workspace", "channels", "rec", "C1")
	in := hatchery.Info{Record: hatchery.Record{ID: "c-1", Adapter: "rec", ChannelID: "C1", ChannelDir: chDir}}
	for _, name := range []string{"one", "two"} {
		if ok, msg, err := h.m.ProposeSkill(t.Context(), in, skillProposal(name, "a skill")); !ok || err != nil {
			t.Fatalf("ProposeSkill(%s) = %v, %q, %v", name, ok, msg, err)
		}
	}
	ok, msg, err := h.m.ProposeSkill(t.Context(), in, skillProposal("three", "one too many"))
	if ok || err != nil || !strings.Contains(msg, "refused") || !strings.Contains(msg, "at most 2 (chicks.skills.maxCount)") {
		t.Errorf("ProposeSkill past the cap = %v, %q, %v; want refused with the cap", ok, msg, err)
	}
	if _, err := os.Stat(filepath.Join(chDir, "skills", "three")); !os.IsNotExist(err) {
		t.Errorf("a refused skill was written: %v", err)
	}
	posted := false
	for _, p := range h.ad.of("post") {
		posted = posted || strings.Contains(p.Text, "Skill three from chick c-1 refused")
	}
	if !posted {
		t.Error("the refusal was not posted")
	}
	if ok, msg, _ := h.m.ProposeSkill(t.Context(), in, skillProposal("two", "a better skill")); !ok || !strings.Contains(msg, "updated") {
		t.Errorf("updating a skill at the cap = %v, %q; want updated", ok, msg)
	}
}
