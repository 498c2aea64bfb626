package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// The hostile suite (issue 31, docs/isolation.md "How it is proved"): a
// program the chick's own bash runs, as a prompt-injected model could
// write one, tries each door of the threat model from inside a real
// chick. The program is internal/hostile/attack, built from the project's
// wire packages, statically, and put in the channel's scratch/ before the
// chick starts, so it reaches /workspace/scratch/attack the way any
// channel file does (FetchFiles). The chick's model is a script: its first
// call prints the chick's id; the test then reads the chick's credentials
// from its container (what a leak would give the program) and hands them
// to the program in the next call. Every row has a positive control: the
// same probe where it must succeed.
//
// The rows run at once, each with its own Mother (and gate), so the suite
// takes the time of its slowest row.

// Settings of the closed doors, as the suite configures them.
const (
	// hostileChickTokens is budgets.chickTokens of the budget row. The
	// issue measured against 1,000; a call now reserves a token per byte
	// of its prompt, and a chick's own first call (its system prompt and
	// tools' schemas) reserves about 8,000, so the row's chick gets room
	// for its own calls and the attack scales with it: each attack call
	// sends a 4,000-byte prompt and costs 1,024 tokens, and 30 of them
	// are 2.5 times the budget.
	hostileChickTokens = 12000
	// hostileCallTokens is what the fake model reports per attack call
	// (prompt 1,000, about 4 bytes a token, + output 24).
	hostileCallTokens = 1024
	// hostileWorkspace is chicks.resources.workspaceBytes of the disk row.
	hostileWorkspace = 64 << 20
)

var (
	plainOnce sync.Once
	plainBin  string
	plainErr  error
)

// plainMother is the mother binary as it ships, without the race
// detector, whose shadow memory would be counted in her RSS: the flood
// row measures that. Without MOTHER_TEST_RACE it is motherBin.
func plainMother(t *testing.T) string {
	t.Helper()
	if len(raceFlags()) == 0 {
		return motherBin
	}
	plainOnce.Do(func() {
		plainBin = motherBin + "-plain"
		if out, err := exec.Command("go", "build", "-o", plainBin, ".").CombinedOutput(); err != nil {
			plainErr = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if plainErr != nil {
		t.Fatalf("build mother without the race detector: %v", plainErr)
	}
	return plainBin
}

var (
	attackOnce sync.Once
	attackBin  string
	attackErr  error
)

// buildAttack builds the attack program for the engine's machine: static,
// linux, this machine's architecture (the chick image's).
func buildAttack(t *testing.T) string {
	t.Helper()
	attackOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mother-attack-")
		if err != nil {
			attackErr = err
			return
		}
		attackBin = filepath.Join(dir, "attack")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", attackBin, "../../internal/hostile/attack")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
		if out, err := cmd.CombinedOutput(); err != nil {
			attackErr = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if attackErr != nil {
		t.Fatalf("build the attack program: %v", attackErr)
	}
	return attackBin
}

// leaked is what the test read from a chick's container: the credentials
// the attack program assumes it has.
type leaked struct {
	ID, Container, Token, Key, CA string
}

// args are the program's credential flags.
func (l leaked) args() string {
	return fmt.Sprintf("-id %s -token %s -key %s -ca %s", l.ID, l.Token, l.Key, base64.StdEncoding.EncodeToString([]byte(l.CA)))
}

// chickCreds reads chick id's credentials from its container's
// environment (container inspect).
func chickCreds(api *client.Client, id string) (leaked, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := api.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "mother.chick.id="+id))})
	if err != nil || len(cs) != 1 {
		return leaked{}, fmt.Errorf("the container of chick %s: %v (%d found)", id, err, len(cs))
	}
	ci, err := api.ContainerInspect(ctx, cs[0].ID)
	if err != nil {
		return leaked{}, err
	}
	l := leaked{ID: id, Container: cs[0].ID}
	for _, kv := range ci.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "MOTHER_TOKEN":
			l.Token = v
		case "MOTHER_GATE_KEY":
			l.Key = v
		case "MOTHER_CA_PEM":
			l.CA = v
		}
	}
	if l.Token == "" || l.Key == "" || l.CA == "" {
		return l, fmt.Errorf("chick %s's container has no MOTHER_TOKEN, MOTHER_GATE_KEY or MOTHER_CA_PEM", id)
	}
	return l, nil
}

// step is one tool call of a row's chick, made from what leaked.
type step func(l leaked) ollamatest.Call

// hostileModel is the model of every hostile Mother: Mother delegates
// each message; a chick runs its row's steps (by the goal's first word)
// after printing its id; a call whose system prompt starts with HOSTILE
// is the attack program's own, answered with hostileCallTokens and
// recorded (with the num_predict it asked for).
type hostileModel struct {
	api *client.Client

	mu       sync.Mutex
	rows     map[string][]step
	leaks    map[string]leaked // by row
	attacks  map[string][]float64
	onTurn   map[string]func(l leaked, done int) // called before a row's step done+1
	attacksN int
}

func newHostileModel(api *client.Client) *hostileModel {
	return &hostileModel{api: api, rows: map[string][]step{}, leaks: map[string]leaked{}, attacks: map[string][]float64{}, onTurn: map[string]func(leaked, int){}}
}

func (h *hostileModel) row(word string, steps ...step) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rows[word] = steps
}

// numPredict lists the num_predict of the attack calls with system
// prompt sys (-1: none sent).
func (h *hostileModel) numPredict(sys string) []float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]float64(nil), h.attacks[sys]...)
}

func (h *hostileModel) leak(word string) leaked {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.leaks[word]
}

var chickIDLine = regexp.MustCompile(`CHICK=(c-[0-9a-zA-Z-]+)`)

func (h *hostileModel) turn(r ollamatest.Request) ollamatest.Turn {
	if sys := r.System(); strings.HasPrefix(sys, "HOSTILE") {
		np := -1.0
		if v, ok := r.Options["num_predict"].(float64); ok {
			np = v
		}
		h.mu.Lock()
		h.attacks[sys] = append(h.attacks[sys], np)
		h.attacksN++
		h.mu.Unlock()
		return ollamatest.Turn{Text: "ok", PromptTokens: 1000, OutputTokens: hostileCallTokens - 1000, Delay: 300 * time.Millisecond}
	}
	switch r.Model {
	case motherModel:
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "tool" {
			return ollamatest.Turn{Text: "Delegated."}
		}
		return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "spawn_chick", Args: map[string]any{"label": "delegating", "goal": r.LastUser()}}}}
	case chickModel:
	default:
		return ollamatest.Turn{Status: 404, Error: "unknown model " + r.Model}
	}
	goal := ""
	for _, m := range r.Messages {
		if m.Role == "user" {
			goal = m.Content
			break
		}
	}
	// The goal is the message, after Mother's stamp: its row is the
	// row word it holds.
	h.mu.Lock()
	word := ""
	for w := range h.rows {
		if regexp.MustCompile(`\b` + w + `\b`).MatchString(goal) {
			word = w
		}
	}
	steps := h.rows[word]
	onTurn := h.onTurn[word]
	h.mu.Unlock()
	if word == "" {
		return ollamatest.Turn{Text: "Done: no row in " + goal}
	}
	res := toolResults(r)
	if len(res) == 0 {
		return ollamatest.Turn{Calls: []ollamatest.Call{bashCall("whoami", "echo CHICK=$MOTHER_CHICK_ID; ls -l scratch/attack")}}
	}
	m := chickIDLine.FindStringSubmatch(res[0])
	if m == nil {
		return ollamatest.Turn{Text: "Done: no chick id in " + res[0]}
	}
	h.mu.Lock()
	l, known := h.leaks[word]
	h.mu.Unlock()
	if !known {
		var err error
		if l, err = chickCreds(h.api, m[1]); err != nil {
			return ollamatest.Turn{Text: "Done: " + err.Error()}
		}
		h.mu.Lock()
		h.leaks[word] = l
		h.mu.Unlock()
	}
	done := len(res) - 1
	if onTurn != nil {
		onTurn(l, done)
	}
	if done < len(steps) {
		return ollamatest.Turn{Calls: []ollamatest.Call{steps[done](l)}}
	}
	return ollamatest.Turn{Text: "Done: " + strings.Join(res[1:], " || ")}
}

// attackCall is a bash call running the attack program with the leaked
// credentials.
func attackCall(label, sub, flags string) step {
	return func(l leaked) ollamatest.Call {
		return bashCall(label, fmt.Sprintf("./scratch/attack %s %s %s 2>&1 | grep -v -e '^PROC ' -e '^DENIED '", sub, l.args(), flags))
	}
}

// plainCall is a bash call that needs no credentials.
func plainCall(label, command string) step {
	return func(leaked) ollamatest.Call { return bashCall(label, command) }
}

// hostileMother starts a Mother for one row: the test image, the attack
// program in the channel's scratch/, chicks settings over chickData's,
// and extra top-level config.
func hostileMother(t *testing.T, api *client.Client, h *hostileModel, fake *ollamatest.Server, extra map[string]any, chicks map[string]any) (*chickProc, string) {
	t.Helper()
	return hostileMotherBin(t, motherBin, api, h, fake, extra, chicks)
}

// hostileMotherBin is hostileMother with the mother binary bin.
func hostileMotherBin(t *testing.T, bin string, api *client.Client, h *hostileModel, fake *ollamatest.Server, extra map[string]any, chicks map[string]any) (*chickProc, string) {
	t.Helper()
	data, _ := chickData(t, api, extra)
	removeGateVolumes(t, api, data)
	if len(chicks) > 0 {
		setChicks(t, data, chicks)
	}
	scratch := filepath.Join(data, "workspace", "channels", "cli", "local", "scratch")
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(buildAttack(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scratch, "attack"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return startMotherBinary(t, bin, data, chickEnv(fake)), data
}

// doneOf is the output of the chick whose result holds marker.
func doneOf(out, marker string) string {
	for _, part := range strings.Split(out, "Done: ") {
		if strings.Contains(part, marker) {
			return part
		}
	}
	return ""
}

// intField reads "KEY=<n>" from s (-1: absent).
func intField(s, key string) int {
	m := regexp.MustCompile(regexp.QuoteMeta(key) + `=(-?\d+)`).FindStringSubmatch(s)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// vmRSS is a process's resident set in bytes.
func vmRSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return -1
}

// treeBytes is the bytes of the regular files under dir (0 if none).
func treeBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// hostBytes is what a chick's container holds on the engine's disk: its
// writable layer and every volume or bind it has (a tmpfs is memory).
func hostBytes(api *client.Client, id string) (int64, string, error) {
	ci, err := api.ContainerInspect(context.Background(), id)
	if err != nil {
		return 0, "", err
	}
	var n int64
	var where []string
	if up := ci.GraphDriver.Data["UpperDir"]; up != "" {
		b := treeBytes(up)
		n += b
		where = append(where, fmt.Sprintf("layer %d", b))
	}
	for _, m := range ci.Mounts {
		if m.Source != "" && (m.Type == "volume" || m.Type == "bind") {
			b := treeBytes(m.Source)
			n += b
			where = append(where, fmt.Sprintf("%s %s %d", m.Type, m.Destination, b))
		}
	}
	for dst := range ci.HostConfig.Tmpfs {
		where = append(where, "tmpfs "+dst)
	}
	for _, m := range ci.HostConfig.Mounts {
		if m.Type == "tmpfs" {
			where = append(where, "tmpfs "+m.Target)
		}
	}
	return n, strings.Join(where, ", "), nil
}

// hostileRow is one row of a hostile suite: a subtest given the engine.
type hostileRow struct {
	name string
	run  func(t *testing.T, api *client.Client)
}

// runHostileRows runs rows as subtests, all at once whatever -parallel
// is: each is a Mother waiting on her chicks most of the time.
func runHostileRows(t *testing.T, api *client.Client, rows ...hostileRow) {
	var wg sync.WaitGroup
	for _, r := range rows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(r.name, func(t *testing.T) { r.run(t, api) })
		}()
	}
	wg.Wait()
}

// TestHostile runs every row of the threat model from inside real chicks
// (docs/isolation.md, "How it is proved").
func TestHostile(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	buildAttack(t)
	plainMother(t)
	runHostileRows(t, api,
		hostileRow{"Memory", hostileMemory},
		hostileRow{"Budget", hostileBudget},
		hostileRow{"Flood", hostileFlood},
		hostileRow{"GateStorm", hostileGateStorm},
		hostileRow{"Egress", hostileEgress},
		hostileRow{"Approvals", hostileApprovals},
		hostileRow{"Disk", hostileDisk},
	)
}
