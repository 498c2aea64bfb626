package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

type lsChickHost struct {
	ID      string `json:"id"`
	Tier    string `json:"tier"`
	State   string `json:"state"`
	Host    string `json:"host"`
	Version string `json:"version"`
}

func chicksLs(t *testing.T, data string, all bool) []lsChickHost {
	t.Helper()
	args := []string{"chicks", "ls", "--json"}
	if all {
		args = append(args, "--all")
	}
	out, code := momctl(t, data, args...)
	var list []lsChickHost
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("momctl chicks ls: exit %d: %s", code, out)
	}
	return list
}

// lastIsTool: the request answers a tool call of the current run.
func lastIsTool(r ollamatest.Request) bool {
	return len(r.Messages) > 0 && r.Messages[len(r.Messages)-1].Role == "tool"
}

// TestTwoDockerHosts: the real mother and momctl with two Docker hosts in
// config.json: the local engine (capacity 1, tiers local and big) and a
// second real dockerd over TLS (capacity 2, tier local). Real chicks run on
// both, placed by free capacity and tier; the second host goes down and
// momctl status and the log say so, and a new chick runs on the first;
// it comes back, momctl status shows it up, and the next chick goes there.
func TestTwoDockerHosts(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	image := hatcherytest.BuildImage(t)
	eng := hatcherytest.SecondEngine(t, image)
	api2 := eng.Client()

	release := make(chan struct{})
	var once sync.Once
	called := make(chan string, 16)
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		switch r.Model {
		case motherModel:
			if lastIsTool(r) {
				return ollamatest.Turn{Text: "Hatched."}
			}
			spawn := func(tier string) ollamatest.Call {
				return ollamatest.Call{Name: "spawn_chick", Args: map[string]any{"label": "delegating", "goal": "Work on tier " + tier + ".", "tier": tier}}
			}
			if strings.Contains(r.LastUser(), "four") {
				return ollamatest.Turn{Calls: []ollamatest.Call{spawn("local"), spawn("big"), spawn("local"), spawn("local")}}
			}
			return ollamatest.Turn{Calls: []ollamatest.Call{spawn("local")}}
		case chickModel, "chick-big":
			called <- r.Model
			select {
			case <-release:
			case <-time.After(3 * time.Minute):
			}
			return ollamatest.Turn{Text: "Chick finished."}
		}
		return ollamatest.Turn{Status: 404, Error: "unknown model " + r.Model}
	})
	defer fake.Close()
	defer once.Do(func() { close(release) })

	data, _ := chickData(t, api, map[string]any{})
	hatcherytest.RemoveOnCleanup(t, api2, func() string { return hatcherytest.InstanceFile(filepath.Join(data, "chicks")) })
	cfgPath := filepath.Join(data, "config.json")
	var cfg map[string]any
	b, _ := os.ReadFile(cfgPath)
	json.Unmarshal(b, &cfg)
	chicks := cfg["chicks"].(map[string]any)
	chicks["tiers"] = map[string]any{
		"local": map[string]any{"provider": "ollama", "model": chickModel, "description": "small"},
		"big":   map[string]any{"provider": "ollama", "model": "chick-big", "description": "large"},
	}
	chicks["maxPerChannel"] = 10
	chicks["hosts"] = []any{
		map[string]any{"name": "gpu1", "address": "unix:///var/run/docker.sock", "capacity": 1, "tiers": []string{"local", "big"}},
		map[string]any{"name": "gpu2", "address": eng.Address, "tlsCA": eng.CA, "tlsCert": eng.Cert, "tlsKey": eng.Key, "capacity": 2, "tiers": []string{"local"}},
	}
	b, _ = json.MarshalIndent(cfg, "", "  ")
	os.WriteFile(cfgPath, b, 0o600)
	if r := runMother(t, "", nil, "--check-config", data); r.code != 0 {
		t.Fatalf("--check-config: %s%s", r.stdout, r.stderr)
	}

	p := startChickMother(t, data, chickEnv(fake))
	finished := func(n int) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for strings.Count(p.out(), "Chick finished.") < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d chick results, want %d; stdout:\n%s\nstderr:\n%s", strings.Count(p.out(), "Chick finished."), n, p.out(), p.errs())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// Four chicks: local -> gpu2 (2 free), big -> gpu1 (only it serves
	// big), local -> gpu2, local -> queued (both full).
	io.WriteString(p.stdin, "spawn four chicks\n")
	for range 3 {
		select {
		case <-called:
		case <-time.After(2 * time.Minute):
			t.Fatalf("three chicks never called their model; stderr:\n%s", p.errs())
		}
	}
	list := chicksLs(t, data, false)
	byHost := map[string][]string{}
	queued := 0
	for _, c := range list {
		if c.State == "queued" {
			queued++
			continue
		}
		byHost[c.Host] = append(byHost[c.Host], c.Tier)
		if c.Version != "dev" {
			t.Errorf("chick %s reported version %q, want dev (what it said when it joined)", c.ID, c.Version)
		}
	}
	if strings.Join(byHost["gpu1"], ",") != "big" || strings.Join(byHost["gpu2"], ",") != "local,local" || queued != 1 {
		t.Errorf("placement %v with %d queued; want gpu1: big, gpu2: local,local, 1 queued\n%+v", byHost, queued, list)
	}
	st, _ := momctl(t, data, "status")
	for _, re := range []string{`(?m)^  gpu1\s+up for \S+\s+1/1 chicks\s+tiers local,big\s+Docker `, `(?m)^  gpu2\s+up for \S+\s+2/2 chicks\s+tiers local\s+Docker `, `CHICKS  4 alive, 1 queued`} {
		if !regexp.MustCompile(re).MatchString(st) {
			t.Errorf("momctl status does not match %s:\n%s", re, st)
		}
	}
	once.Do(func() { close(release) })
	finished(4)

	// gpu2 goes down: momctl status says so (it asks the hosts), the log
	// too, and the next chick runs on gpu1 although gpu2 has more room.
	eng.Stop()
	st, _ = momctl(t, data, "status")
	if !regexp.MustCompile(`(?m)^  gpu2\s+DOWN for \S+\s+0/2 chicks\s+tiers local\s+Docker \S+\s+.*Cannot connect`).MatchString(st) {
		t.Errorf("momctl status does not report gpu2 down:\n%s", st)
	}
	var sj struct {
		Hosts []struct {
			Name  string
			Up    bool
			Error string
		}
	}
	out, _ := momctl(t, data, "status", "--json")
	json.Unmarshal([]byte(out), &sj)
	if len(sj.Hosts) != 2 || sj.Hosts[1].Name != "gpu2" || sj.Hosts[1].Up || sj.Hosts[1].Error == "" {
		t.Errorf("momctl status --json hosts: %+v", sj.Hosts)
	}
	if !regexp.MustCompile(`Docker host is down.*host=gpu2`).MatchString(p.errs()) {
		t.Errorf("the log does not say gpu2 is down:\n%s", p.errs())
	}
	io.WriteString(p.stdin, "one more\n")
	finished(5)
	newest := func() lsChickHost {
		t.Helper()
		all := chicksLs(t, data, true)
		return all[len(all)-1]
	}
	if c := newest(); c.Host != "gpu1" || c.State != "done" {
		t.Errorf("the chick started while gpu2 is down: %+v, want done on gpu1", c)
	}

	// gpu2 is back: momctl status (which asks the hosts) shows it up, and
	// the next local chick goes there (2 free against 1).
	eng.Start()
	deadline := time.Now().Add(time.Minute)
	for {
		st, _ = momctl(t, data, "status")
		if regexp.MustCompile(`(?m)^  gpu2\s+up for `).MatchString(st) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gpu2 never shown up again:\n%s", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(p.errs(), "Docker host answers again") {
		t.Errorf("the log does not say gpu2 is back:\n%s", p.errs())
	}
	io.WriteString(p.stdin, "and another\n")
	finished(6)
	if c := newest(); c.Host != "gpu2" || c.State != "done" {
		t.Errorf("the chick after gpu2 came back: %+v, want done on gpu2", c)
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, p.errs())
	}
	for _, c := range []*client.Client{api, api2} {
		if left := hatcherytest.Chicks(t, c, hatcherytest.InstanceFile(filepath.Join(data, "chicks"))); len(left) != 0 {
			t.Errorf("%d chick containers left", len(left))
		}
	}
}
