package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// TestChickSkillsAndMemoryComeBack: a chick writes skills under
// /workspace/skills with bash (one good, one without front matter, one
// holding a symlink) and updates the channel's memory (once within its
// budget, once over it). The good skill is stored in the channel's
// skills/ and announced; the bad ones are refused with the reason; the
// memory update lands in MEMORY.md and the one over budget is refused. A
// later chick of the same channel finds the skill in its /workspace/skills
// and runs it, and sees the memory.
func TestChickSkillsAndMemoryComeBack(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	data, _ := chickData(t, api, nil)

	var s scriptedChick
	s.set("write",
		bashCall("skills", `set -e
mkdir -p skills/weather/bin skills/broken skills/linky
printf -- '---\nname: weather\ndescription: Tells the weather of a city\n---\n# Weather\nRun bin/run.sh CITY.\n' > skills/weather/SKILL.md
printf 'echo sunny in $1\n' > skills/weather/bin/run.sh
chmod +x skills/weather/bin/run.sh
printf '# Broken\nno front matter here\n' > skills/broken/SKILL.md
printf -- '---\nname: linky\ndescription: has a link\n---\n' > skills/linky/SKILL.md
ln -s /etc/passwd skills/linky/passwd
echo written`),
		ollamatest.Call{Name: "update_memory", Args: map[string]any{"label": "remember", "mode": "append", "content": "The weather skill answers for any city."}},
		ollamatest.Call{Name: "update_memory", Args: map[string]any{"label": "remember too much", "mode": "append", "content": strings.Repeat("too long ", 200)}},
	)
	s.set("use", bashCall("use", "ls skills; sh skills/weather/bin/run.sh Vienna; cat MEMORY.md"))
	fake := s.fake()
	defer fake.Close()

	p := startChickMother(t, data, chickEnv(fake))
	io.WriteString(p.stdin, "write some skills\n")
	p.waitCount(t, "· tier local ·", 1, 3*time.Minute)
	out := p.out()
	for _, want := range []string{
		"added skill `weather` in this channel's skills: Tells the weather of a city",
		"Skill broken from chick c-",
		"refused: SKILL.md: no front matter",
		"Skill linky from chick c-",
		"passwd is a symbolic link: a skill holds only files and directories",
		"updated this channel's memory (append)",
		"over its budget of 1000",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s\nstderr:\n%s", want, out, p.errs())
		}
	}

	chDir := filepath.Join(data, "workspace/channels/cli/local")
	md, err := os.ReadFile(filepath.Join(chDir, "skills/weather/SKILL.md"))
	if err != nil || !strings.Contains(string(md), "description: Tells the weather of a city") {
		t.Errorf("weather skill not stored in the channel's skills/: %q, %v", md, err)
	}
	if fi, err := os.Stat(filepath.Join(chDir, "skills/weather/bin/run.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("run.sh not stored executable: %v, %v", fi, err)
	}
	for _, bad := range []string{"broken", "linky"} {
		if _, err := os.Lstat(filepath.Join(chDir, "skills", bad)); !os.IsNotExist(err) {
			t.Errorf("refused skill %s was stored (%v)", bad, err)
		}
	}
	mem, _ := os.ReadFile(filepath.Join(chDir, "MEMORY.md"))
	if !strings.Contains(string(mem), "The weather skill answers for any city.") || strings.Contains(string(mem), "too long") {
		t.Errorf("MEMORY.md = %q, want the first update and not the one over budget", mem)
	}
	// The announcement is in the channel's log, for Mother's next runs.
	var logged bool
	for _, m := range readLog(t, data) {
		if m.Sender.ID == "mother" && strings.Contains(m.Text, "added skill `weather`") {
			logged = true
		}
	}
	if !logged {
		t.Errorf("skill announcement not in log.jsonl")
	}

	io.WriteString(p.stdin, "use the weather skill\n")
	p.waitCount(t, "· tier local ·", 2, 3*time.Minute)
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.errs())
	}
	second := p.out()[len(out):]
	if !strings.Contains(second, "sunny in Vienna") || !strings.Contains(second, "The weather skill answers for any city.") {
		t.Errorf("the later chick did not run the stored skill or see the memory:\n%s", second)
	}
	if strings.Contains(second, "broken") || strings.Contains(second, "linky") {
		t.Errorf("the later chick received a refused skill:\n%s", second)
	}
	if strings.Contains(second, "📚") {
		t.Errorf("an unchanged skill was announced again:\n%s", second)
	}
}
