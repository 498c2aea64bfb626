package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/internal/testenv"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

const (
	motherModel = "mother-m"
	chickModel  = "chick-m"
	secretKey   = "sk-ant-api03-SECRETSECRET"
	secretBot   = "discord-bot-token-SECRET2"
)

var (
	momctlOnce sync.Once
	momctlBin  string
	momctlErr  error
)

func buildMomctl(t *testing.T) string {
	t.Helper()
	momctlOnce.Do(func() {
		momctlBin = filepath.Join(filepath.Dir(motherBin), "momctl")
		out, err := goBuild("-o", momctlBin, "../momctl").CombinedOutput()
		if err != nil {
			momctlErr = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if momctlErr != nil {
		t.Fatalf("build momctl: %v", momctlErr)
	}
	return momctlBin
}

// freePort returns a loopback address whose port was free a moment ago,
// for a Mother started later (the tests that restart her need to know it in
// advance). It is picked below the kernel's ephemeral range: a port the
// kernel hands out itself can be taken again by any outgoing connection
// before Mother binds it (seen as "address already in use").
func freePort(t *testing.T) string {
	t.Helper()
	lo, _ := ephemeralRange()
	for range 200 {
		port := 10000 + rand.IntN(lo-10000)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	t.Fatal("no free port below the ephemeral range")
	return ""
}

// ephemeralRange is the kernel's range for ports it picks itself (Linux
// default 32768-60999).
func ephemeralRange() (lo, hi int) {
	lo, hi = 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		fmt.Sscan(string(b), &lo, &hi)
	}
	if lo <= 10000 {
		lo = 32768
	}
	return lo, hi
}

// chickData makes a data dir whose config runs chicks from the test image
// with short timings, and registers the cleanup of every container it
// leaves.
func chickData(t *testing.T, api *client.Client, extra map[string]any) (data, listen string) {
	t.Helper()
	data = t.TempDir()
	listen = freePort(t)
	cfg := map[string]any{
		"chicks": map[string]any{
			"image":             hatcherytest.Image,
			"defaultTier":       "local",
			"tiers":             map[string]any{"local": map[string]any{"provider": "ollama", "model": chickModel, "description": "the test tier"}},
			"heartbeatInterval": "500ms",
			"killGrace":         "2s",
			"timeout":           "3m",
			"resources":         map[string]any{"memory": "256m", "cpus": 1, "pids": 128, "tmpfs": "32m"},
			// The chick tests are about the chick's path and show its
			// result as it came; results_e2e_test.go has "answer".
			"results": "relay",
		},
		"grpc": map[string]any{"listen": listen},
	}
	for k, v := range extra {
		cfg[k] = v
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(filepath.Join(data, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	hatcherytest.RemoveOnCleanup(t, api, func() string { return hatcherytest.InstanceFile(filepath.Join(data, "chicks")) })
	return data, listen
}

func chickEnv(fake *ollamatest.Server) []string {
	return []string{
		"MOTHER_OLLAMA_URL=" + fake.URL, "MOTHER_MODEL_ID=" + motherModel,
		"ANTHROPIC_API_KEY=" + secretKey, "DISCORD_BOT_TOKEN=" + secretBot,
	}
}

func hasToolResult(r ollamatest.Request) bool {
	for _, m := range r.Messages {
		if m.Role == "tool" {
			return true
		}
	}
	return false
}

func toolResults(r ollamatest.Request) []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role == "tool" {
			out = append(out, m.Content)
		}
	}
	return out
}

// motherTurn is Mother's model: delegate the goal once, then say so.
func motherTurn(goal string) ollamatest.Turn {
	return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "spawn_chick", Args: map[string]any{"label": "delegating", "goal": goal}}}}
}

// chickProc is a running mother --cli.
type chickProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	mu     sync.Mutex
	stdout bytes.Buffer
	stderr bytes.Buffer
	done   chan error
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func startChickMother(t *testing.T, data string, env []string) *chickProc {
	t.Helper()
	return startMotherBinary(t, motherBin, data, env)
}

func (p *chickProc) out() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String()
}

func (p *chickProc) errs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// waitOut waits until stdout contains s.
func (p *chickProc) waitOut(t *testing.T, s string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(p.out(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("stdout never showed %q; stdout:\n%s\nstderr:\n%s", s, p.out(), p.errs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// wait waits for exit and returns the exit code.
func (p *chickProc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case err := <-p.done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatalf("mother: %v", err)
		}
		return 0
	case <-time.After(d):
		t.Fatalf("mother did not exit within %s; stdout:\n%s\nstderr:\n%s", d, p.out(), p.errs())
	}
	return -1
}

func instanceContainers(t *testing.T, api *client.Client, data string) []container.Summary {
	t.Helper()
	inst := hatcherytest.InstanceFile(filepath.Join(data, "chicks"))
	if inst == "" {
		t.Fatal("no hatchery instance id in the data dir")
	}
	return hatcherytest.Chicks(t, api, inst)
}

// TestChickWholePath: a message asks for heavy work; Mother's model calls
// spawn_chick; a hardened container starts from the offline image; its
// model calls go through the broker to the fake; bash runs in the
// container; the result reaches stdout of mother --cli as it came
// (chicks.results "relay", set by chickData); no secret of Mother's is in
// the chick; the container is gone afterwards.
func TestChickWholePath(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	data, _ := chickData(t, api, nil)
	// Mother also holds a secret in config.json.
	cfgPath := filepath.Join(data, "config.json")
	var cfg map[string]any
	b, _ := os.ReadFile(cfgPath)
	json.Unmarshal(b, &cfg)
	cfg["providers"] = map[string]any{"anthropic": map[string]any{"apiKey": secretKey}}
	b, _ = json.Marshal(cfg)
	os.WriteFile(cfgPath, b, 0o600)

	var inspected sync.Once
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		switch r.Model {
		case motherModel:
			if strings.Contains(r.LastUser(), "what did it find") {
				for _, m := range r.Messages {
					if m.Role == "assistant" && strings.Contains(m.Content, "result=42") {
						return ollamatest.Turn{Text: "It found 42."}
					}
				}
				return ollamatest.Turn{Text: "I have no idea."}
			}
			if !hasToolResult(r) {
				return motherTurn("Compute 6*7 in the shell and report who ran it.")
			}
			return ollamatest.Turn{Text: "A chick is on it."}
		case chickModel:
			inspected.Do(func() { checkChickContainer(t, api, data) })
			res := toolResults(r)
			switch len(res) {
			case 0:
				return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "bash", Args: map[string]any{"label": "compute",
					"command": "mkdir -p outputs && echo 42 > outputs/answer.txt && echo plot > scratch/plot.txt && echo result=$((6*7)) uid=$(id -u); env; tr '\\0' '\\n' < /proc/1/environ; ls -a /workspace"}}}}
			case 1:
				return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "attach", Args: map[string]any{"label": "share", "path": "scratch/plot.txt", "title": "the plot"}}}}
			}
			return ollamatest.Turn{Text: "Chick says: " + strings.Join(strings.Fields(res[0]), " ")}
		}
		return ollamatest.Turn{Status: 404, Error: "unknown model " + r.Model}
	})
	defer fake.Close()

	p := startChickMother(t, data, chickEnv(fake))
	io.WriteString(p.stdin, "please run the heavy computation\n")
	p.waitOut(t, "Chick says:", 2*time.Minute)
	// The chick's final words show before its result is logged (they are
	// its progress); the follow-up waits for the result in log.jsonl, so
	// that it comes after it.
	logPath := filepath.Join(data, "workspace/channels/cli/local/log.jsonl")
	waitUntil(t, "the chick's result in log.jsonl", func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "Files: `scratch/chicks/c-")
	})
	// A follow-up: the chick's result is in Mother's context now.
	io.WriteString(p.stdin, "what did it find?\n")
	p.stdin.Close()
	if code := p.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, p.out(), p.errs())
	}
	out := p.out()
	for _, want := range []string{"A chick is on it.", "Chick says: result=42 uid=65534", "tier local", "[attached the plot: ", "Files: `scratch/chicks/c-", "It found 42."} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s\nstderr:\n%s", want, out, p.errs())
		}
	}
	// Mother answered before the chick was done: she does not wait for it.
	if i, j := strings.Index(out, "A chick is on it."), strings.Index(out, "Chick says:"); i < 0 || j < 0 || i > j {
		t.Errorf("Mother's own answer should come before the chick's result:\n%s", out)
	}
	for _, secret := range []string{secretKey, secretBot, "MOTHER_TOKEN=", "MOTHER_GATE_KEY="} {
		if strings.Contains(out, secret) {
			t.Errorf("%s reached the chick's tools: %s", secret, out)
		}
	}
	// The tools' environment was printed; PID 1's (/proc/1/environ) is
	// closed to them: the agent is not dumpable (docs/isolation.md,
	// "Credentials"). Isolated (the default): the chick dialled Mother
	// through its gate.
	if !strings.Contains(out, "MOTHER_ADDR=unix:///run/mother-gate/nest.sock") || !strings.Contains(out, "/proc/1/environ: Permission denied") {
		t.Errorf("the chick's environments were not printed (the check above proves nothing):\n%s", out)
	}
	if left := instanceContainers(t, api, data); len(left) != 0 {
		t.Errorf("%d chick containers left after mother exited", len(left))
	}
	// Attached and output files came back into the channel's directory.
	for _, f := range []string{"scratch/plot.txt", "outputs/answer.txt"} {
		got, _ := filepath.Glob(filepath.Join(data, "workspace/channels/cli/local/scratch/chicks/c-*", f))
		if len(got) != 1 {
			t.Errorf("%s not stored in the channel's directory", f)
		}
	}
	// The result is in the log as Mother's message, for her next runs.
	logged := readLog(t, data)
	found := false
	for _, m := range logged {
		if m.Sender.ID == "mother" && strings.Contains(m.Text, "[chick c-") && strings.Contains(m.Text, "result=42") {
			found = true
		}
	}
	if !found {
		t.Errorf("chick result not logged as Mother's message in log.jsonl: %+v", logged)
	}
	// Every model call of the chick went through the broker's ledger, and
	// so did Mother's own (each settled as it was reserved).
	kinds := map[string]int{}
	for _, l := range readLedger(t, data) {
		kinds[l.ledgerKind()]++
	}
	if kinds[""] != 3 || kinds["report"] != 1 {
		t.Errorf("ledger has %d chick calls and %d reports charged to it, want 3 and 1 (%v)", kinds[""], kinds["report"], kinds)
	}
	if kinds["mother"] == 0 || kinds["mother"] != kinds["mother-reserve"] || kinds["reserve"] != 3 {
		t.Errorf("ledger lines by kind: %v, want Mother's own calls reserved and settled", kinds)
	}
}

// checkChickContainer inspects the running chick: hardening on, and no
// secret of Mother's in its environment or files.
func checkChickContainer(t *testing.T, api *client.Client, data string) {
	list := instanceContainers(t, api, data)
	if len(list) != 1 {
		t.Errorf("%d chick containers running, want 1", len(list))
		return
	}
	insp, err := api.ContainerInspect(context.Background(), list[0].ID)
	if err != nil {
		t.Error(err)
		return
	}
	hc := insp.HostConfig
	if !hc.ReadonlyRootfs || !slices.Equal(hc.CapDrop, []string{"ALL"}) || !slices.Equal(hc.SecurityOpt, []string{"no-new-privileges"}) || insp.Config.User != "65534:65534" || hc.PidsLimit == nil || *hc.PidsLimit <= 0 || hc.Memory <= 0 {
		t.Errorf("chick not hardened: readonly=%v capdrop=%v secopt=%v user=%q pids=%v mem=%d", hc.ReadonlyRootfs, hc.CapDrop, hc.SecurityOpt, insp.Config.User, hc.PidsLimit, hc.Memory)
	}
	if hc.NetworkMode != "none" {
		t.Errorf("chick network %q, want none (isolated, the default)", hc.NetworkMode)
	}
	envs := [][]string{insp.Config.Env}
	// Its gate holds none of Mother's secrets either.
	gates := hatcherytest.Gates(t, api, hatcherytest.InstanceFile(filepath.Join(data, "chicks")))
	if len(gates) != 1 {
		t.Errorf("%d gates, want 1", len(gates))
	}
	for _, g := range gates {
		gi, err := api.ContainerInspect(context.Background(), g.ID)
		if err != nil {
			t.Error(err)
			continue
		}
		envs = append(envs, gi.Config.Env)
	}
	for _, env := range envs {
		for _, v := range env {
			if strings.Contains(v, secretKey) || strings.Contains(v, secretBot) || strings.HasPrefix(v, "ANTHROPIC") || strings.HasPrefix(v, "DISCORD") {
				t.Errorf("chick or gate environment holds a secret of Mother's: %s", strings.SplitN(v, "=", 2)[0])
			}
		}
	}
	rc, _, err := api.CopyFromContainer(context.Background(), list[0].ID, "/")
	if err != nil {
		t.Error(err)
		return
	}
	defer rc.Close()
	problems, err := scanChickFiles(rc, secretKey, secretBot)
	for _, p := range problems {
		t.Error(p)
	}
	if err != nil {
		t.Errorf("the chick's file scan did not finish: %v", err)
	}
}

// scanChickFiles reads a tar of the chick's file system and names each
// config.json and each file (under 1 MiB) holding one of the secrets. A
// tar that cannot be read to its end is an error: a scan that stopped
// early proves nothing.
func scanChickFiles(r io.Reader, secrets ...string) ([]string, error) {
	var problems []string
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return problems, nil
		}
		if err != nil {
			return problems, err
		}
		if strings.HasSuffix(h.Name, "config.json") {
			problems = append(problems, "config.json in the chick: "+h.Name)
		}
		if h.Typeflag == tar.TypeReg && h.Size < 1<<20 {
			b, err := io.ReadAll(tr)
			if err != nil {
				return problems, fmt.Errorf("%s: %w", h.Name, err)
			}
			for _, s := range secrets {
				if bytes.Contains(b, []byte(s)) {
					problems = append(problems, "a secret of Mother's is in the chick's file "+h.Name)
				}
			}
		}
	}
}

func momctl(t *testing.T, data string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(buildMomctl(t), append([]string{"--socket", filepath.Join(data, "mother.sock")}, args...)...)
	out, err := cmd.CombinedOutput()
	noRace(t, "momctl", string(out))
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

type lsChick struct {
	ID      string `json:"id"`
	Channel string `json:"channel"`
	Tier    string `json:"tier"`
	State   string `json:"state"`
	Tokens  int64  `json:"tokens"`
}

func waitRunning(t *testing.T, data string, d time.Duration) lsChick {
	t.Helper()
	return waitRunningOr(t, data, d, func() string { return "" })
}

// waitRunningOr is waitRunning, adding why() (Mother's stderr, say) to
// its failure.
func waitRunningOr(t *testing.T, data string, d time.Duration, why func() string) lsChick {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		out, code := momctl(t, data, "chicks", "ls", "--json")
		var list []lsChick
		if code == 0 && json.Unmarshal([]byte(out), &list) == nil && len(list) == 1 && list[0].State == "running" {
			return list[0]
		}
		if time.Now().After(deadline) {
			all, _ := momctl(t, data, "chicks", "ls", "--all")
			t.Fatalf("no running chick in momctl chicks ls: %s (exit %d)\nall chicks:\n%s\n%s", out, code, all, why())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestMomctlKillsChickMidRun: momctl lists the running chick and kills it
// (cancel, then kill); the channel is told; nothing is left.
func TestMomctlKillsChickMidRun(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	data, _ := chickData(t, api, nil)
	calling := make(chan struct{}, 10)
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if r.Model == motherModel {
			if strings.Contains(r.LastUser(), "are you there") {
				return ollamatest.Turn{Text: "Yes, still here."}
			}
			if !hasToolResult(r) {
				return motherTurn("Think for a very long time.")
			}
			return ollamatest.Turn{Text: "Started."}
		}
		calling <- struct{}{}
		return ollamatest.Turn{Text: "never", Delay: 5 * time.Minute}
	})
	defer fake.Close()

	if out, code := momctl(t, data, "chicks", "ls"); code == 0 || !strings.Contains(out, "is Mother running?") {
		t.Errorf("momctl without Mother: exit %d, %q: want a clear error", code, out)
	}
	evDir := filepath.Join(data, "workspace", "events")
	os.MkdirAll(evDir, 0o700)
	os.WriteFile(filepath.Join(evDir, "standup.json"), []byte(`{"type":"periodic","channelId":"local","text":"standup","schedule":"0 9 * * 1-5","timezone":"UTC"}`), 0o600)
	p := startChickMother(t, data, chickEnv(fake))
	io.WriteString(p.stdin, "think hard\n")
	select {
	case <-calling:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the chick never called its model; stderr:\n%s", p.errs())
	}
	c := waitRunning(t, data, 30*time.Second)
	if c.Channel != "cli/local" || c.Tier != "local" {
		t.Errorf("momctl chicks ls: %+v", c)
	}
	// Mother stays responsive while her chick works.
	io.WriteString(p.stdin, "are you there?\n")
	p.waitOut(t, "Yes, still here.", 30*time.Second)
	checkSocketDenied(t, data)
	table, _ := momctl(t, data, "chicks", "ls")
	if !strings.Contains(table, "ID") || !strings.Contains(table, "TOKENS") || !strings.Contains(table, c.ID) {
		t.Errorf("momctl chicks ls table:\n%s", table)
	}
	logs, code := momctl(t, data, "chicks", "logs", c.ID)
	if code != 0 || !strings.Contains(logs, "joined") {
		t.Errorf("momctl chicks logs (exit %d): %q, want the chick's own log", code, logs)
	}
	evs, code := momctl(t, data, "events")
	if code != 0 || !strings.Contains(evs, "standup.json") || !strings.Contains(evs, "periodic") {
		t.Errorf("momctl events (exit %d):\n%s", code, evs)
	}
	evls, code := momctl(t, data, "events", "ls")
	if code != 0 || evls != evs {
		t.Errorf("momctl events ls (exit %d) differs from momctl events:\n%s", code, evls)
	}
	st, code := momctl(t, data, "status")
	for _, re := range []string{`(?m)^  cli\s+cli\s+connected`, `(?m)^  local\s+up for \S+\s+1/\d+ chicks\s+all tiers\s+Docker \d`, `(?m)^  ` + c.ID + `\s+cli/local\s+local\s+running\s+on local`, `standup\.json \(periodic, cli/local\)`, `chick image ` + hatcherytest.Image} {
		if code != 0 || !regexp.MustCompile(re).MatchString(st) {
			t.Errorf("momctl status (exit %d) does not match %s:\n%s", code, re, st)
		}
	}
	fi, err := os.Stat(filepath.Join(data, "mother.sock"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("admin socket mode: %v %v, want 0600", fi.Mode(), err)
	}

	out, code := momctl(t, data, "chicks", "kill", c.ID)
	if code != 0 || !strings.Contains(out, c.ID+" killed") {
		t.Errorf("momctl chicks kill: exit %d: %s", code, out)
	}
	again, code := momctl(t, data, "chicks", "kill", c.ID)
	if code != 0 || !strings.Contains(again, "already ended") {
		t.Errorf("second kill (repeat-safe): exit %d: %s", code, again)
	}
	if out, code := momctl(t, data, "chicks", "kill", "c-nothere"); code == 0 || !strings.Contains(out, "no chick") {
		t.Errorf("kill of an unknown chick: exit %d: %s", code, out)
	}
	p.waitOut(t, "killed by the operator", 30*time.Second)
	p.stdin.Close()
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, p.errs())
	}
	if left := instanceContainers(t, api, data); len(left) != 0 {
		t.Errorf("%d chick containers left", len(left))
	}
}

// TestChickSurvivesMotherSIGKILL: Mother dies mid-run without a word; the
// next Mother resumes the chick, which reconnects with its token, finishes,
// and is cleaned up.
func TestChickSurvivesMotherSIGKILL(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	data, _ := chickData(t, api, nil)
	var mu sync.Mutex
	chickCalls := 0
	first := make(chan struct{})
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if r.Model == motherModel {
			if !hasToolResult(r) {
				return motherTurn("Survive a restart.")
			}
			return ollamatest.Turn{Text: "On it."}
		}
		mu.Lock()
		chickCalls++
		n := chickCalls
		mu.Unlock()
		if n == 1 {
			close(first)
			// Hangs until the caller goes away (Mother is killed).
			return ollamatest.Turn{Text: "lost", Delay: 5 * time.Minute}
		}
		return ollamatest.Turn{Text: "Finished after the restart."}
	})
	defer fake.Close()

	a := startChickMother(t, data, chickEnv(fake))
	io.WriteString(a.stdin, "work through a restart\n")
	select {
	case <-first:
	case <-time.After(2 * time.Minute):
		t.Fatalf("chick never called its model; stderr:\n%s", a.errs())
	}
	c := waitRunning(t, data, 30*time.Second)
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.wait(t, 10*time.Second)
	if n := len(instanceContainers(t, api, data)); n != 1 {
		t.Fatalf("%d chick containers after Mother died, want the 1 still running", n)
	}

	b := startChickMother(t, data, chickEnv(fake))
	b.stdin.Close() // nothing to say: finish the chick in flight and exit
	if code := b.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("second Mother exit %d\nstdout:\n%s\nstderr:\n%s", code, b.out(), b.errs())
	}
	out := b.out()
	for _, want := range []string{"chick " + c.ID + " is still working", "Finished after the restart."} {
		if !strings.Contains(out, want) {
			t.Errorf("second Mother's stdout lacks %q:\n%s\nstderr:\n%s", want, out, b.errs())
		}
	}
	if left := instanceContainers(t, api, data); len(left) != 0 {
		t.Errorf("%d chick containers left", len(left))
	}
}

// TestChickBudgetExhausted: the broker refuses the call past the chick's
// token budget before it is sent; the chick ends with a clear message and
// its usage. The first call reserves its prompt's estimate (a few
// thousand tokens: the system prompt and tools) plus the tier's 8192 and
// fits in 200,000; it reports 199,970 prompt tokens, so the second's
// reservation does not fit in what is left.
func TestChickBudgetExhausted(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	data, _ := chickData(t, api, map[string]any{"budgets": map[string]any{"chickTokens": 200000}})
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if r.Model == motherModel {
			if !hasToolResult(r) {
				return motherTurn("Spend a lot.")
			}
			return ollamatest.Turn{Text: "Spending."}
		}
		// Every turn asks for a tool, so the loop calls the model again.
		return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "bash", Args: map[string]any{"label": "more", "command": "true"}}}, PromptTokens: 199970, OutputTokens: 30}
	})
	defer fake.Close()
	p := startChickMother(t, data, chickEnv(fake))
	io.WriteString(p.stdin, "spend\n")
	p.stdin.Close()
	if code := p.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, p.errs())
	}
	out := p.out()
	for _, want := range []string{"stopped because a budget ran out", "used 200000 of its 200000 tokens", "200000 tokens: 199970 in, 30 out"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s\nstderr:\n%s", want, out, p.errs())
		}
	}
	chickReqs := 0
	for _, r := range fake.Requests() {
		if r.Model == chickModel {
			chickReqs++
		}
	}
	if chickReqs != 1 {
		t.Errorf("%d chick calls reached the provider, want 1 (the second is refused)", chickReqs)
	}
	if left := instanceContainers(t, api, data); len(left) != 0 {
		t.Errorf("%d chick containers left", len(left))
	}
}

// otherUser is the unprivileged second user .ci/ensure-tools creates
// (mother-test), else nobody; neither existing is a failure under CI=true.
func otherUser(t *testing.T) *syscall.Credential {
	t.Helper()
	for _, name := range []string{"mother-test", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 == nil && err2 == nil && uid != 0 {
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		}
	}
	testenv.Unavailable(t, "no second unprivileged user (mother-test or nobody) for the admin-socket access check")
	return nil
}

// checkSocketDenied runs momctl as another user (mother-test or nobody): it must say that
// access is denied, not fail obscurely. Needs root to switch users.
func checkSocketDenied(t *testing.T, data string) {
	t.Helper()
	if os.Getuid() != 0 {
		testenv.Unavailable(t, "not root: cannot run momctl as another user for the admin-socket access check")
	}
	dir, err := os.MkdirTemp("", "momctl-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "momctl")
	b, err := os.ReadFile(buildMomctl(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--socket", filepath.Join(data, "mother.sock"), "chicks", "ls")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: otherUser(t)}
	out, err := cmd.CombinedOutput()
	noRace(t, "momctl", string(out))
	if err == nil || !strings.Contains(string(out), "permission denied") || !strings.Contains(string(out), "run momctl as the user that runs Mother") {
		t.Errorf("momctl as another user: %v: %s", err, out)
	}
}

// TestScanChickFiles: the container file scan finds a secret and a
// config.json, and a tar cut short is an error, not a clean scan.
func TestScanChickFiles(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, body := range map[string]string{"etc/config.json": "{}", "tmp/leak": "key=sk-secret", "bin/ok": "nothing"} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.Close()
	problems, err := scanChickFiles(bytes.NewReader(buf.Bytes()), "sk-secret")
	if err != nil || len(problems) != 2 {
		t.Errorf("whole tar: problems %q, err %v; want config.json and the leak named", problems, err)
	}
	if _, err := scanChickFiles(bytes.NewReader(buf.Bytes()[:1024+100]), "sk-secret"); err == nil {
		t.Error("a truncated tar scanned cleanly")
	}
}
