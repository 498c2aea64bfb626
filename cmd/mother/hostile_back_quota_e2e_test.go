package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
)

// The "a channel cannot be locked by size" rows of issue 42: what a chick
// leaves in its channel is a quota with eviction, never a wall. The rows
// run at the defaults (chicks.files.quota 256 MiB, chicks.skills 100 and
// 32 MiB): the wall of 1b46f1f is a constant of 1 GiB, and only a real
// 1 GiB shows it. The chick's files are sparse in its workspace, so
// only Mother's side writes them out.

const (
	// quotaDefault is chicks.files.quota's default.
	quotaDefault = 256 << 20
	// quotaSkillsCount and quotaSkillsBytes are chicks.skills' defaults.
	quotaSkillsCount = 100
	quotaSkillsBytes = 32 << 20
)

// TestHostileBackQuota runs the rows: a chick fills its channel past the
// quota, and the next chick still starts; a chick proposes more skills
// than their cap, and the rest are refused.
func TestHostileBackQuota(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	runHostileRows(t, api,
		hostileRow{"Outputs", quotaOutputs},
		hostileRow{"Skills", quotaSkills},
	)
}

// quotaFill writes 1 GiB of outputs, a chick's whole output cap: ten
// files of 100 MiB (the cap of one file) and one of 24 MiB, sparse.
const quotaFill = `mkdir -p outputs && for i in 01 02 03 04 05 06 07 08 09 10; do truncate -s 100M outputs/fill-$i.bin; done; ` +
	`truncate -s 24M outputs/fill-11.bin; echo FILLED $(du -sb outputs | cut -f1)`

// quotaOutputs: the first chick leaves 1 GiB of output files; the next
// chick of the channel starts and works, the channel's files stay within
// the quota, the oldest outputs went first, and the channel was told
// once, naming them. On 1b46f1f the next chick ends at once: "the
// channel's files exceed 1073741824 bytes".
func quotaOutputs(t *testing.T, api *client.Client) {
	s := &scriptedChick{}
	s.set("quotafill", bashCall("fill", quotaFill))
	s.set("quotanext", bashCall("next", "echo NEXT-WORKS; ls scratch/chicks/*/ | grep -c fill-"))
	fake := s.fake()
	defer fake.Close()
	data, _ := chickData(t, api, nil)
	p := startMotherBinary(t, motherBin, data, chickEnv(fake))
	channel := filepath.Join(data, "workspace", "channels", "cli", "local")
	io.WriteString(p.stdin, "quotafill the channel\n")
	p.waitCount(t, "(chick c-", 1, 4*time.Minute)
	p.waitOut(t, "Done: ", 4*time.Minute)
	first := p.out()
	kept := treeBytes(filepath.Join(channel, "scratch"))
	fills, _ := filepath.Glob(filepath.Join(channel, "scratch", "chicks", "*", "outputs", "fill-*"))
	t.Logf("after the first chick: %s; the channel's scratch/ holds %d bytes in %d fill files", regexp.MustCompile(`FILLED \d+`).FindString(first), kept, len(fills))

	io.WriteString(p.stdin, "quotanext say hello\n")
	p.waitCount(t, "(chick c-", 2, 4*time.Minute)
	deadline := time.Now().Add(3 * time.Minute)
	for !strings.Contains(p.out(), "NEXT-WORKS") && !regexp.MustCompile(`exceed \d+ bytes`).MatchString(p.out()) && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	out := p.out()
	if m := regexp.MustCompile(`[^\n]*exceed \d+ bytes[^\n]*`).FindString(out); m != "" || !strings.Contains(out, "NEXT-WORKS") {
		t.Errorf("the next chick of the channel did not start and work (%q):\n%s", m, tail(out, 3000))
	}
	if kept > quotaDefault {
		t.Errorf("the channel's scratch/ holds %d bytes after the first chick, over the quota of %d", kept, quotaDefault)
	}
	// The newest outputs stay, the oldest went.
	var names []string
	for _, f := range fills {
		names = append(names, filepath.Base(f))
	}
	if len(names) == 0 || !strings.Contains(strings.Join(names, " "), "fill-11.bin") || strings.Contains(strings.Join(names, " "), "fill-01.bin") {
		t.Errorf("the fill files kept are %v, want the newest (fill-11.bin) kept and the oldest (fill-01.bin) removed", names)
	}
	notices := regexp.MustCompile(`[^\n]*quota[^\n]*removed[^\n]*`).FindAllString(out, -1)
	t.Logf("notices: %q", notices)
	if len(notices) != 1 {
		t.Errorf("the channel was told %d times of removed outputs, want once:\n%s", len(notices), tail(out, 3000))
	} else if !strings.Contains(notices[0], "fill-01.bin") {
		t.Errorf("the notice does not name the oldest file removed (fill-01.bin): %s", notices[0])
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("exit %d\n%s", code, tail(p.errs(), 3000))
	}
}

// quotaSkillScript makes 40 skills of about 1 MB and 70 small ones in
// the chick's skills/: 40 MB and 110 skills, past both caps.
const quotaSkillScript = `cd skills && for i in $(seq -w 0 39); do mkdir -p big-$i; printf -- '---\nname: big-%s\ndescription: a big skill\n---\n' $i > big-$i/SKILL.md; ` +
	`head -c 999000 /dev/zero > big-$i/data.bin; done; for i in $(seq -w 0 69); do mkdir -p tiny-$i; printf -- '---\nname: tiny-%s\ndescription: a tiny skill\n---\n' $i > tiny-$i/SKILL.md; done; ls | wc -l | sed 's/^/SKILLS /'`

// quotaSkills: a chick proposes 110 skills holding 40 MB; at most
// quotaSkillsCount and quotaSkillsBytes are stored, the rest refused with
// a plain reason, and the next chick starts. On 1b46f1f every one is
// stored.
func quotaSkills(t *testing.T, api *client.Client) {
	s := &scriptedChick{}
	s.set("quotaskills", bashCall("skills", quotaSkillScript))
	s.set("quotaafter", bashCall("after", "echo AFTER-WORKS; ls skills | wc -l"))
	fake := s.fake()
	defer fake.Close()
	data, _ := chickData(t, api, nil)
	p := startMotherBinary(t, motherBin, data, chickEnv(fake))
	channel := filepath.Join(data, "workspace", "channels", "cli", "local")
	io.WriteString(p.stdin, "quotaskills make many\n")
	p.waitCount(t, "(chick c-", 1, 4*time.Minute)
	p.waitOut(t, "Done: ", 4*time.Minute)
	io.WriteString(p.stdin, "quotaafter say hello\n")
	p.waitCount(t, "(chick c-", 2, 4*time.Minute)
	p.waitCount(t, "Done: ", 2, 4*time.Minute)
	out := p.out()
	dirs, _ := os.ReadDir(filepath.Join(channel, "skills"))
	stored := treeBytes(filepath.Join(channel, "skills"))
	refused := regexp.MustCompile(`Skill \S+ from chick \S+ refused: [^\n]*`).FindAllString(out, -1)
	t.Logf("skills stored: %d holding %d bytes; refused: %d, e.g. %q", len(dirs), stored, len(refused), quotaFirst(refused))
	if len(dirs) > quotaSkillsCount || stored > quotaSkillsBytes {
		t.Errorf("the channel holds %d skills of %d bytes, over the caps of %d skills and %d bytes", len(dirs), stored, quotaSkillsCount, quotaSkillsBytes)
	}
	if len(refused) != 110-len(dirs) || len(refused) == 0 {
		t.Errorf("%d skills were refused with a reason, want the %d not stored:\n%s", len(refused), 110-len(dirs), tail(out, 3000))
	}
	for _, r := range refused {
		if !strings.Contains(r, "skills") || !regexp.MustCompile(`at most|cap|limit`).MatchString(r) {
			t.Errorf("a refusal gives no plain reason: %s", r)
		}
	}
	if !strings.Contains(out, "AFTER-WORKS") {
		t.Errorf("the next chick of the channel did not start and work:\n%s", tail(out, 3000))
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("exit %d\n%s", code, tail(p.errs(), 3000))
	}
}

// quotaFirst is the first of ss, or "".
func quotaFirst(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return ss[0]
}
