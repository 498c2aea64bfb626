package chick_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chick"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/skills"
	"github.com/mother-chat/mother/pkg/tools"
)

type heardSkills struct {
	mu     sync.Mutex
	names  []string
	memory []string
}

func (d *heardSkills) ProposeSkill(_ context.Context, _ hatchery.Info, p skills.Proposal) (bool, string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.names = append(d.names, p.Name)
	return true, "taken", nil
}

func (d *heardSkills) UpdateChickMemory(_ context.Context, _ hatchery.Info, mode, content string) (bool, string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.memory = append(d.memory, mode+":"+content)
	return false, "refused: over its budget", nil
}

// TestChickOffersOnlyTheSkillsItChanged runs the real chick runtime with
// its real tools: of the skills it received it changes one and leaves one
// alone, and creates a new one; Mother hears of the changed and the new
// only. Its update_memory reaches Mother and her refusal reaches the model.
func TestChickOffersOnlyTheSkillsItChanged(t *testing.T) {
	t.Parallel()
	dockerAPI := hatcherytest.Docker(t)
	image := hatcherytest.BuildImage(t)
	cfg := &config.Config{}
	cfg.SetDefaults("")
	cfg.Chicks.Image = image
	cfg.Chicks.Tiers["local"] = config.Tier{Provider: "ollama", Model: "chick-m"}
	cfg.Chicks.KillGrace = config.Dur(time.Second)
	cfg.Chicks.Resources.Memory = "128m"
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	calls := []ollamatest.Call{
		{Name: "bash", Args: map[string]any{"command": "echo more >> skills/changed/SKILL.md && mkdir skills/fresh && echo new > skills/fresh/SKILL.md"}},
		{Name: "update_memory", Args: map[string]any{"mode": "append", "content": "a fact"}},
	}
	var lastResult string
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		n := 0
		for _, m := range r.Messages {
			if m.Role == "tool" {
				n++
				lastResult = m.Content
			}
		}
		if n < len(calls) {
			return ollamatest.Turn{Calls: []ollamatest.Call{calls[n]}}
		}
		return ollamatest.Turn{Text: "memory said: " + lastResult}
	})
	defer fake.Close()
	m := startMother(t, cfg, t.TempDir(), addr, fake)
	defer m.stop()
	d := &heardSkills{}
	m.srv.SetContributions(d)
	hatcherytest.RemoveOnCleanup(t, dockerAPI, m.h.Instance)
	chDir := filepath.Join(t.TempDir(), "chan")
	os.MkdirAll(chDir, 0o700)
	in, err := m.h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "work", Files: hatchery.Files{ChannelDir: chDir}})
	if err != nil {
		t.Fatal(err)
	}
	token := runningChickToken(t, dockerAPI, m, in.ID)
	ws := t.TempDir()
	for _, s := range []string{"kept", "changed"} {
		os.MkdirAll(filepath.Join(ws, "skills", s), 0o700)
		os.WriteFile(filepath.Join(ws, "skills", s, "SKILL.md"), []byte(s+"\n"), 0o600)
	}
	err = chick.Run(t.Context(), chick.Options{Addr: addr, Token: token, ChickID: in.ID, Workspace: ws, CAPEM: m.ca,
		Tools: func(root string, attach func(string, string) error) ([]agent.Tool, error) {
			return tools.Chick(root, attach)
		}})
	if err != nil {
		t.Fatalf("chick.Run: %v", err)
	}
	var end hatchery.Info
	select {
	case end = <-m.obs.ended:
	case <-time.After(time.Minute):
		t.Fatal("Mother did not end the chick")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if got := strings.Join(d.names, ","); got != "changed,fresh" {
		t.Errorf("Mother was offered %q, want %q", got, "changed,fresh")
	}
	if len(d.memory) != 1 || d.memory[0] != "append:a fact" {
		t.Errorf("Mother heard memory updates %q", d.memory)
	}
	if end.Result == nil || !strings.Contains(end.Result.Text, "memory said: refused: over its budget") {
		t.Errorf("result %+v: the model did not get Mother's refusal", end.Result)
	}
}

// runningChickToken waits until the chick's container runs and reads its token
// from the container's environment (the test plays the chick outside it).
func runningChickToken(t *testing.T, api *client.Client, m *mother, id string) string {
	t.Helper()
	for m.h.State(id) != hatchery.StateRunning {
		time.Sleep(20 * time.Millisecond)
	}
	got, _ := m.h.Get(id)
	insp, err := api.ContainerInspect(t.Context(), got.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range insp.Config.Env {
		if v, ok := strings.CutPrefix(e, hatchery.EnvToken+"="); ok {
			return v
		}
	}
	t.Fatal("no token in the chick's environment")
	return ""
}
