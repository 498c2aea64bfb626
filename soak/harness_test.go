//go:build soak

package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

const (
	motherModel = "mother-m"
	chickModel  = "chick-m"
)

var motherBin, momctlBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mother-soak-")
	if err != nil {
		panic(err)
	}
	motherBin, momctlBin = filepath.Join(dir, "mother"), filepath.Join(dir, "momctl")
	for bin, pkg := range map[string]string{motherBin: "../cmd/mother", momctlBin: "../cmd/momctl"} {
		build := exec.Command("go", "build", "-o", bin, pkg)
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			panic("build " + pkg + ": " + err.Error())
		}
	}
	start := time.Now()
	code := m.Run()
	printReport(time.Since(start))
	os.RemoveAll(dir)
	os.Exit(code)
}

// ---- the report ----

var report struct {
	mu    sync.Mutex
	lines []string
}

// figure records one line of the final report under a scenario's name.
func figure(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	report.mu.Lock()
	report.lines = append(report.lines, fmt.Sprintf("| %s | %s |", t.Name(), line))
	report.mu.Unlock()
}

func printReport(total time.Duration) {
	report.mu.Lock()
	defer report.mu.Unlock()
	fmt.Printf("\n# Soak report (%s, %s in all)\n\n| scenario | figure |\n|---|---|\n", time.Now().Format("2006-01-02"), total.Round(time.Second))
	for _, l := range report.lines {
		fmt.Println(l)
	}
	fmt.Println()
}

// ---- a running Mother ----

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a running `mother --cli DATA` (or the daemon, for platform
// scenarios) with its debug listener.
type proc struct {
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	stdout, stderr *syncBuf
	done           chan error
	metrics        string // metrics.listen of the data directory's config
	exited         bool
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startMother runs the real binary on data; cli makes the terminal the
// channel (stdin lines are messages).
func startMother(t *testing.T, data string, cli bool, env ...string) *proc {
	t.Helper()
	p := &proc{stdout: &syncBuf{}, stderr: &syncBuf{}, done: make(chan error, 1)}
	var cfg struct {
		Metrics struct{ Listen string } `json:"metrics"`
	}
	b, _ := os.ReadFile(filepath.Join(data, "config.json"))
	json.Unmarshal(b, &cfg)
	p.metrics = cfg.Metrics.Listen
	args := []string{"--log-level", "info", data}
	if cli {
		args = append([]string{"--cli"}, args...)
	}
	p.cmd = exec.Command(motherBin, args...)
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "USER=mario"}, env...)
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if !p.exited {
			p.cmd.Process.Kill()
			<-p.done
			p.exited = true
		}
		if t.Failed() {
			t.Logf("mother's stdout:\n%s\nmother's stderr (tail):\n%s", p.stdout.String(), tail(p.stderr.String(), 60))
		}
	})
	return p
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (p *proc) say(t *testing.T, text string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, text+"\n"); err != nil {
		t.Fatalf("write to mother: %v", err)
	}
}

// waitOut waits until stdout contains s.
func (p *proc) waitOut(t *testing.T, s string, d time.Duration) time.Duration {
	t.Helper()
	return p.waitFrom(t, 0, s, d)
}

// mark is the current length of stdout, for waitFrom.
func (p *proc) mark() int { return len(p.stdout.String()) }

// waitFrom waits until stdout after byte from contains s.
func (p *proc) waitFrom(t *testing.T, from int, s string, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for !strings.Contains(p.stdout.String()[from:], s) {
		if time.Since(start) > d {
			t.Fatalf("mother's stdout never showed %q within %s", s, d)
		}
		select {
		case err := <-p.done:
			p.exited = true
			t.Fatalf("mother exited (%v) before stdout showed %q", err, s)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return time.Since(start)
}

// waitErr waits until stderr (the log) contains s.
func (p *proc) waitErr(t *testing.T, s string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(p.stderr.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("mother's log never showed %q within %s", s, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits for the process to go.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.exited = true
}

// finish closes stdin (the terminal channel ends: Mother finishes the work
// in flight, chicks included, and exits) and returns the exit code.
func (p *proc) finish(t *testing.T, d time.Duration) int {
	t.Helper()
	p.stdin.Close()
	return p.wait(t, d)
}

// stop sends SIGTERM and returns the exit code.
func (p *proc) stop(t *testing.T, d time.Duration) int {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	return p.wait(t, d)
}

func (p *proc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case err := <-p.done:
		p.exited = true
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		return 0
	case <-time.After(d):
		t.Fatalf("mother did not exit within %s", d)
	}
	return -1
}

// goroutines reads Mother's goroutine count from her metrics listener
// (go_goroutines).
func (p *proc) goroutines(t *testing.T) int {
	t.Helper()
	return int(p.metric(t, "go_goroutines"))
}

// heapInuse reads go_memstats_heap_inuse_bytes (after a few idle seconds,
// when Mother has collected and returned what she freed).
func (p *proc) heapInuse(t *testing.T) uint64 {
	t.Helper()
	return uint64(p.metric(t, "go_memstats_heap_inuse_bytes"))
}

// scrape reads /metrics without keeping connections open: an idle
// keep-alive connection is a goroutine in Mother, and would be counted.
var scrape = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

// metric reads one unlabelled series from Mother's /metrics.
func (p *proc) metric(t *testing.T, name string) float64 {
	t.Helper()
	if p.metrics == "" {
		t.Fatal("no metrics.listen in the config: newData sets one")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := scrape.Get("http://" + p.metrics + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(string(b))
			if m == nil {
				t.Fatalf("/metrics has no %s", name)
			}
			v, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics listener: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rss returns VmRSS and VmHWM (peak) of the process in KiB.
func (p *proc) rss(t *testing.T) (cur, peak int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "VmRSS:" {
			cur, _ = strconv.Atoi(f[1])
		}
		if len(f) >= 2 && f[0] == "VmHWM:" {
			peak, _ = strconv.Atoi(f[1])
		}
	}
	return cur, peak
}

func mb(kib int) float64 { return float64(kib) / 1024 }

// ---- configuration and the data directory ----

// chicksConfig is a config for the terminal with chicks on the local
// engine from the test image, short timings, and the fake model. The
// gRPC port is fixed for the data directory: a chick redials the address
// it was started with, so a Mother restarting on another port would lose
// her chicks.
func chicksConfig(t *testing.T, model string, extra map[string]any) map[string]any {
	chicks := map[string]any{
		"image":             hatcherytest.Image,
		"defaultTier":       "local",
		"tiers":             map[string]any{"local": map[string]any{"provider": "ollama", "model": chickModel, "description": "the soak tier"}},
		"heartbeatInterval": "500ms",
		"killGrace":         "1s",
		"timeout":           "5m",
		"maxConcurrent":     10,
		"maxPerChannel":     10,
		"maxTurns":          1000,
		"resources":         map[string]any{"memory": "256m", "cpus": 1, "pids": 128, "tmpfs": "32m"},
		// Results posted as they come: the scenarios count chicks and
		// their results, and spawner, which spawns a chick for every goal
		// a message names, would take a chick's report (it names the
		// goal) for a new request under "answer". Answer runs across
		// crashes are pkg/mother's results tests.
		"results": "relay",
	}
	for k, v := range extra {
		chicks[k] = v
	}
	return map[string]any{
		"chicks":    chicks,
		"grpc":      map[string]any{"listen": freeAddr(t)},
		"model":     map[string]any{"provider": "ollama", "id": motherModel},
		"providers": map[string]any{"ollama": map[string]any{"url": model}},
	}
}

// newData makes a data directory with cfg as config.json (with a metrics
// listener on a free port, where the harness reads goroutine and heap
// figures); the containers of its Mother are force-removed when the test
// ends.
func newData(t *testing.T, api *client.Client, cfg map[string]any) string {
	t.Helper()
	data := t.TempDir()
	if _, ok := cfg["metrics"]; !ok {
		cfg["metrics"] = map[string]any{"listen": freeAddr(t)}
	}
	writeConfig(t, data, cfg)
	if api != nil {
		hatcherytest.RemoveOnCleanup(t, api, func() string { return hatcherytest.InstanceFile(filepath.Join(data, "chicks")) })
	}
	return data
}

func writeConfig(t *testing.T, data string, cfg map[string]any) {
	t.Helper()
	b, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(filepath.Join(data, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// checkStore reads every JSONL file under data: each must end in a newline
// and every line must be a JSON value (nothing torn, nothing half-written).
func checkStore(t *testing.T, data string) (files, lines int) {
	t.Helper()
	filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("read %s: %v", p, err)
			return nil
		}
		files++
		if len(b) > 0 && b[len(b)-1] != '\n' {
			t.Errorf("%s ends without a newline (torn): %q", p, tail(string(b), 1))
		}
		for i, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
			if len(b) == 0 {
				break
			}
			lines++
			if !json.Valid(line) {
				t.Errorf("%s line %d is not JSON: %.200q", p, i+1, line)
			}
		}
		return nil
	})
	return files, lines
}

// records reads the hatchery's chick records (last line per chick).
func records(t *testing.T, data string) map[string]hatchery.Record {
	t.Helper()
	out := map[string]hatchery.Record{}
	b, _ := os.ReadFile(filepath.Join(data, "chicks", "chicks.jsonl"))
	for _, line := range strings.Split(string(b), "\n") {
		var r hatchery.Record
		if json.Unmarshal([]byte(line), &r) == nil && r.ID != "" {
			out[r.ID] = r
		}
	}
	return out
}

// containers lists the chick containers of data's Mother instance.
func containers(t *testing.T, api *client.Client, data string) []container.Summary {
	t.Helper()
	inst := hatcherytest.InstanceFile(filepath.Join(data, "chicks"))
	if inst == "" {
		return nil
	}
	return hatcherytest.Chicks(t, api, inst)
}

// running waits for a running container of data's Mother and returns it.
func running(t *testing.T, api *client.Client, data string, d time.Duration) container.Summary {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		for _, c := range containers(t, api, data) {
			if c.State == "running" {
				return c
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no running chick container within %s", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ---- the models ----

func lastIsTool(r ollamatest.Request) bool {
	return len(r.Messages) > 0 && r.Messages[len(r.Messages)-1].Role == "tool"
}

func toolCount(r ollamatest.Request) int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == "tool" {
			n++
		}
	}
	return n
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

// spawner's answers to a request that names goals: after spawning, and
// after a resumed run found a chick on every goal already.
const (
	startedAnswer = "Started."
	onItAnswer    = "A chick is already on it."
)

// spawner is Mother's model for the chick scenarios: a message naming
// goals ("do job-1 job-2") spawns a chick per goal; after the spawn she
// says so; anything else she answers herself. After a restart cut her run
// off she does what the resume note asks: she checks the channel's chicks
// (list_chicks) and spawns only the goals no chick has.
func spawner(prefixes ...string) func(r ollamatest.Request) (ollamatest.Turn, bool) {
	goals := func(text string) []string {
		var out []string
		for _, w := range strings.Fields(text) {
			for _, p := range prefixes {
				if strings.HasPrefix(w, p) {
					out = append(out, w)
				}
			}
		}
		return out
	}
	spawn := func(gs []string) ollamatest.Turn {
		var calls []ollamatest.Call
		for _, g := range gs {
			calls = append(calls, ollamatest.Call{Name: "spawn_chick", Args: map[string]any{"label": "delegating", "goal": g}})
		}
		return ollamatest.Turn{Calls: calls}
	}
	return func(r ollamatest.Request) (ollamatest.Turn, bool) {
		if r.Model != motherModel {
			return ollamatest.Turn{}, false
		}
		// The message to answer: the last user message, or the one before
		// a resume note.
		var users []string
		for _, m := range r.Messages {
			if m.Role == "user" {
				users = append(users, m.Content)
			}
		}
		msg := r.LastUser()
		resumed := strings.HasPrefix(msg, "[restart]")
		if resumed && len(users) > 1 {
			msg = users[len(users)-2]
		}
		if lastIsTool(r) {
			res := r.Messages[len(r.Messages)-1].Content
			if resumed && !strings.Contains(res, "hatched") && !strings.Contains(res, "Not started") {
				// The answer of list_chicks.
				var missing []string
				for _, g := range goals(msg) {
					if !strings.Contains(res, g) {
						missing = append(missing, g)
					}
				}
				if len(missing) > 0 {
					return spawn(missing), true
				}
				return ollamatest.Turn{Text: onItAnswer}, true
			}
			return ollamatest.Turn{Text: startedAnswer}, true
		}
		gs := goals(msg)
		if len(gs) == 0 {
			return ollamatest.Turn{Text: "Yes, I am here: " + lastWords(msg)}, true
		}
		if resumed {
			return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "list_chicks", Args: map[string]any{"label": "checking", "all": true}}}}, true
		}
		return spawn(gs), true
	}
}

func lastWords(s string) string {
	f := strings.Fields(s)
	if len(f) > 4 {
		f = f[len(f)-4:]
	}
	return strings.Join(f, " ")
}

func docker(t *testing.T) *client.Client {
	t.Helper()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	return api
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func ctx10(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
