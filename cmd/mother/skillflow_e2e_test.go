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

// TestMotherSkillReachesChick: the whole way of a skill Mother writes
// herself. In one run her model writes a channel skill (SKILL.md and a
// script beside it) with her own write tool and hands a goal to a chick;
// the chick, a real container, finds the skill in its /workspace/skills
// and runs its script.
func TestMotherSkillReachesChick(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	data, _ := chickData(t, api, nil)
	const dir = "channels/cli/local/skills/greet/"
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		switch r.Model {
		case motherModel:
			// The tool results since the user's message say how far the
			// run is.
			n := 0
			for i := len(r.Messages) - 1; i >= 0 && r.Messages[i].Role != "user"; i-- {
				if r.Messages[i].Role == "tool" {
					n++
				}
			}
			switch n {
			case 0:
				return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "write", Args: map[string]any{"label": "writing the skill", "path": dir + "SKILL.md",
					"content": "---\nname: greet\ndescription: Greets in the house style\n---\nRun `sh run.sh` in this directory.\n"}}}}
			case 1:
				return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "write", Args: map[string]any{"label": "writing its script", "path": dir + "run.sh",
					"content": "echo GREETINGS-FROM-MOTHERS-SKILL\n"}}}}
			case 2:
				return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "spawn_chick", Args: map[string]any{"label": "delegating", "goal": "Greet with the greet skill."}}}}
			}
			return ollamatest.Turn{Text: "Delegated."}
		case chickModel:
			if res := toolResults(r); len(res) > 0 {
				return ollamatest.Turn{Text: "Chick says: " + res[0]}
			}
			return ollamatest.Turn{Calls: []ollamatest.Call{bashCall("greet", "grep -c 'name: greet' /workspace/skills/greet/SKILL.md; sh /workspace/skills/greet/run.sh")}}
		}
		return ollamatest.Turn{Status: 404, Error: "unknown model " + r.Model}
	})
	defer fake.Close()
	p := startChickMother(t, data, chickEnv(fake))
	io.WriteString(p.stdin, "make a greet skill and have a chick use it\n")
	p.waitOut(t, "Chick says: ", 3*time.Minute)
	out := p.out()
	if !strings.Contains(out, "1\nGREETINGS-FROM-MOTHERS-SKILL") {
		t.Errorf("the chick did not find and run Mother's skill:\n%s", out)
	}
	b, err := os.ReadFile(filepath.Join(data, "workspace", dir, "SKILL.md"))
	if err != nil || !strings.Contains(string(b), "name: greet") {
		t.Errorf("the skill on disk: %q, %v", b, err)
	}
	var logged bool
	for _, m := range readLog(t, data) {
		if strings.Contains(m.Text, "skills/greet/SKILL.md") {
			logged = true
		}
	}
	if !logged {
		t.Error("Mother's write of the skill is not in the channel's log")
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.errs())
	}
}
