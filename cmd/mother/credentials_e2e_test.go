package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/mother-chat/mother/internal/credprobe"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/wire"
)

// credprobeReport is the output line of cmd credprobe.
type credprobeReport struct {
	credprobe.Report
	PlantPID int `json:"plantPID"`
}

// buildCredprobe builds internal/credprobe/cmd/credprobe, static, into
// dir as name.
func buildCredprobe(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, name), "../../internal/credprobe/cmd/credprobe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build credprobe: %v\n%s", err, out)
	}
}

// TestToolsCannotReachCredentials: a real isolated chick's model runs,
// from its bash, a program handed to it as a channel file that searches
// every process it can see (cmdline, environ, memory through maps and
// mem, descriptors, threads, root, ptrace attach) for the chick's token
// and its gate key, as the engine gave them to the container. It finds
// neither; the same search finds a marker it planted in a dumpable
// process of its own, in its environment, memory and an open file (so a
// broken search cannot pass), and the chick goes on to answer.
func TestToolsCannotReachCredentials(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	data, _ := chickData(t, api, nil)
	removeGateVolumes(t, api, data)
	buildCredprobe(t, filepath.Join(data, "workspace", "channels", "cli", "local", "attachments"), "credprobe")
	inst := func() string { return hatcherytest.InstanceFile(filepath.Join(data, "chicks")) }
	plant := make([]byte, 16)
	rand.Read(plant)
	plantMarker := "PLANTED-" + hex.EncodeToString(plant)

	var mu sync.Mutex
	var secrets map[string]string // what the engine gave the chick
	var seen, setupErr string
	var gateBad []string
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if r.Model == motherModel {
			if !hasToolResult(r) {
				return motherTurn("Search every process for credentials.")
			}
			return ollamatest.Turn{Text: "The chick searched."}
		}
		if res := toolResults(r); len(res) > 0 {
			mu.Lock()
			seen = res[0]
			mu.Unlock()
			return ollamatest.Turn{Text: "Searched."}
		}
		// The chick asks for its first turn: it runs. Read its secrets
		// off the container (the engine's view, outside the chick).
		found := map[string]string{}
		for _, c := range hatcherytest.Chicks(t, api, inst()) {
			insp, err := api.ContainerInspect(t.Context(), c.ID)
			if err != nil {
				continue
			}
			for _, kv := range insp.Config.Env {
				k, v, _ := strings.Cut(kv, "=")
				if k == hatchery.EnvToken || k == wire.EnvGateKey {
					found[k] = v
				}
			}
		}
		bad := gateHidesToken(t.Context(), api, data)
		mu.Lock()
		secrets, gateBad = found, bad
		mu.Unlock()
		if len(found) != 2 {
			mu.Lock()
			setupErr = fmt.Sprintf("the chick's container holds %d of the two secrets: %v", len(found), found)
			mu.Unlock()
			return ollamatest.Turn{Text: "No secrets to look for."}
		}
		// Given in hex: no process's command line holds them as they are.
		cmd := fmt.Sprintf("chmod 755 /workspace/attachments/credprobe && /workspace/attachments/credprobe -needle token=%s -needle gatekey=%s -plant %s",
			hex.EncodeToString([]byte(found[hatchery.EnvToken])), hex.EncodeToString([]byte(found[wire.EnvGateKey])), hex.EncodeToString([]byte(plantMarker)))
		return ollamatest.Turn{Calls: []ollamatest.Call{bashCall("search", cmd)}}
	})
	defer fake.Close()
	p := startChickMother(t, data, chickEnv(fake))
	io.WriteString(p.stdin, "search\n")
	p.stdin.Close()
	if code := p.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, p.out(), p.errs())
	}
	mu.Lock()
	out, errS, sec, gateBad := seen, setupErr, secrets, gateBad
	mu.Unlock()
	if errS != "" {
		t.Fatal(errS)
	}
	// The chick worked: it ran the search and answered after it.
	if !strings.Contains(p.out(), "The chick searched.") {
		t.Errorf("the chick did not finish its goal:\n%s", p.out())
	}
	_, line, ok := strings.Cut(out, "CREDPROBE-REPORT ")
	if !ok {
		t.Fatalf("no report from the search; the tool said:\n%s", out)
	}
	line, _, _ = strings.Cut(line, "\n")
	var rep credprobeReport
	if err := json.Unmarshal([]byte(line), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	t.Logf("the search, from inside the chick:\n%s", out)
	checkCredprobe(t, rep, "the chick")
	if len(sec[hatchery.EnvToken]) < 16 || len(sec[wire.EnvGateKey]) < 16 {
		t.Errorf("the secrets searched for are too short to mean anything: %q", sec)
	}
	for _, b := range gateBad {
		t.Error(b)
	}
}

// gateHidesToken: the gate holds its token neither in its initial
// environment, as the host's root reads it (/proc/<pid>/environ outside
// the container), nor where a process of its user inside its container
// could read it: its /proc files are closed to such a process, while
// those of a dumpable sibling are open (the control). It returns what is
// wrong (it runs while the chick does: the gate goes when Mother stops).
func gateHidesToken(ctx context.Context, api *client.Client, data string) []string {
	inst := hatcherytest.InstanceFile(filepath.Join(data, "chicks"))
	gs, err := api.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", hatchery.LabelGate+"="+inst))})
	if err != nil || len(gs) != 1 {
		return []string{fmt.Sprintf("gates: %d, %v; want 1", len(gs), err)}
	}
	insp, err := api.ContainerInspect(ctx, gs[0].ID)
	if err != nil {
		return []string{err.Error()}
	}
	var token string
	for _, kv := range insp.Config.Env {
		if v, ok := strings.CutPrefix(kv, wire.EnvGateToken+"="); ok {
			token = v
		}
	}
	if len(token) < 16 || !insp.State.Running {
		return []string{fmt.Sprintf("gate: token %q, running %v", token, insp.State.Running)}
	}
	var bad []string
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", insp.State.Pid))
	if err != nil {
		bad = append(bad, fmt.Sprintf("the gate's environ, from the host: %v", err))
	}
	if strings.Contains(string(environ), token) || !strings.Contains(string(environ), "MOTHER_TOKEN_FD=") {
		bad = append(bad, "the gate's initial environment holds its token, or it was not re-executed:\n"+strings.ReplaceAll(string(environ), "\x00", "\n"))
	}
	out, err := execOut(ctx, api, gs[0].ID, "sh", "-c", `id -u
for f in environ maps; do cat /proc/1/$f >/dev/null 2>&1 && echo "gate-$f=open" || echo "gate-$f=closed"; done
(exec 3</proc/1/mem) 2>/dev/null && echo gate-mem=open || echo gate-mem=closed
ls /proc/1/fd >/dev/null 2>&1 && echo gate-fd=open || echo gate-fd=closed
sleep 30 & s=$!
for f in environ maps; do cat /proc/$s/$f >/dev/null 2>&1 && echo "sibling-$f=open" || echo "sibling-$f=closed"; done
(exec 3</proc/$s/mem) 2>/dev/null && echo sibling-mem=open || echo sibling-mem=closed
kill $s`)
	if err != nil {
		return append(bad, err.Error())
	}
	uid, _, _ := strings.Cut(insp.Config.User, ":")
	for _, w := range []string{uid, "gate-environ=closed", "gate-maps=closed", "gate-mem=closed", "gate-fd=closed", "sibling-environ=open", "sibling-maps=open", "sibling-mem=open"} {
		if !strings.Contains(out, w) {
			bad = append(bad, fmt.Sprintf("inside the gate's container: %q lacks %q", out, w))
		}
	}
	return bad
}

// execOut runs cmd in a container as its user and returns its output.
func execOut(ctx context.Context, api *client.Client, id string, cmd ...string) (string, error) {
	ex, err := api.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return "", err
	}
	att, err := api.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return "", err
	}
	defer att.Close()
	var out bytes.Buffer
	_, err = stdcopy.StdCopy(&out, &out, att.Reader)
	return out.String(), err
}

// checkCredprobe asserts a credprobe report from inside a chick: neither
// the token nor the gate key anywhere; the agent (pid 1) seen and closed
// to every way in but its command line; the planted marker found in the
// holder's environment, memory and open file, and ptrace allowed there.
func checkCredprobe(t *testing.T, rep credprobeReport, where string) {
	t.Helper()
	for _, n := range []string{"token", "gatekey"} {
		if f := rep.Anywhere(n); len(f) > 0 {
			t.Errorf("%s: the %s was found: %q", where, n, f)
		}
	}
	agent, ok := rep.Proc(1)
	if !ok || agent.Comm != "chick" {
		t.Errorf("%s: the search did not see the chick agent as pid 1: %+v", where, agent)
	}
	for _, way := range []string{"environ", "maps", "mem", "fd", "root", "ptrace"} {
		if agent.Access[way] == "ok" {
			t.Errorf("%s: the agent's %s is open to its tools", where, way)
		}
	}
	if agent.MemBytes != 0 || len(agent.FDs) != 0 {
		t.Errorf("%s: %d bytes of the agent's memory and its descriptors %q were read", where, agent.MemBytes, agent.FDs)
	}
	// The positive control.
	holder, ok := rep.Proc(rep.PlantPID)
	if rep.PlantPID == 0 || !ok {
		t.Fatalf("%s: the planted process (%d) is not in the report", where, rep.PlantPID)
	}
	got := strings.Join(rep.Find(rep.PlantPID, "plant"), "; ")
	for _, w := range []string{"environ", "mem ", "fd "} {
		if !strings.Contains(got, w) {
			t.Errorf("%s: the search missed the marker planted in a dumpable process's %s (found: %q): it proves nothing", where, w, got)
		}
	}
	if holder.Access["ptrace"] != "ok" || holder.Access["mem"] != "ok" {
		t.Errorf("%s: ptrace %q, mem %q on the planted process, want both ok", where, holder.Access["ptrace"], holder.Access["mem"])
	}
}
