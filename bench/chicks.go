package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

const (
	benchImage  = "mother-chick:bench"
	motherModel = "mother-m"
	chickModel  = "chick-m"
)

// stamped is a line of Mother's stdout with the time it was read.
type stamped struct {
	at   time.Time
	text string
}

// lineLog collects Mother's stdout lines as they arrive.
type lineLog struct {
	mu    sync.Mutex
	lines []stamped
	wake  chan struct{}
}

func newLineLog(r *bufio.Reader) *lineLog {
	l := &lineLog{wake: make(chan struct{})}
	go func() {
		for {
			s, err := r.ReadString('\n')
			at := time.Now()
			if s != "" {
				l.mu.Lock()
				l.lines = append(l.lines, stamped{at, strings.TrimRight(s, "\n")})
				close(l.wake)
				l.wake = make(chan struct{})
				l.mu.Unlock()
			}
			if err != nil {
				return
			}
		}
	}()
	return l
}

// wait returns the first line from index from on that contains s.
func (l *lineLog) wait(from int, s string, timeout time.Duration) (stamped, int) {
	deadline := time.After(timeout)
	for {
		l.mu.Lock()
		for i := from; i < len(l.lines); i++ {
			if strings.Contains(l.lines[i].text, s) {
				st := l.lines[i]
				l.mu.Unlock()
				return st, i
			}
		}
		w := l.wake
		l.mu.Unlock()
		select {
		case <-w:
		case <-deadline:
			check(fmt.Errorf("timed out waiting for %q on Mother's stdout", s))
		}
	}
}

func (l *lineLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

func (l *lineLog) snapshot() []stamped {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]stamped(nil), l.lines...)
}

// cpuTicks is utime+stime of pid from /proc/<pid>/stat, in clock ticks.
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	check(err)
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// After the comm: state is field 3, utime 14, stime 15 (1-based).
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}

// clockTicks is the kernel's USER_HZ (100 on every Linux Mother targets).
const clockTicks = 100

// chickScript is the chicks' model: what each goal does, turn by turn.
type chickScript struct {
	overheadTurns int
	relayTurns    int
	relayBatch    int
}

// turn answers one chick request: goal "job-N" makes one tool call and
// ends; "overhead" makes overheadTurns calls, one per turn; "relay-N"
// makes relayTurns turns of relayBatch calls each. Tools are reads of a
// small file: the chick's work is negligible, the relay is what is timed.
func (s chickScript) turn(r ollamatest.Request) ollamatest.Turn {
	goal := r.LastUser()
	done := 0
	for _, m := range r.Messages {
		if m.Role == "tool" {
			done++
		}
	}
	read := func(label string) ollamatest.Call {
		return ollamatest.Call{Name: "read", Args: map[string]any{"label": label, "path": "MEMORY.md"}}
	}
	switch {
	case strings.HasPrefix(goal, "job-"):
		if done == 0 {
			return ollamatest.Turn{Calls: []ollamatest.Call{read("first " + goal)}}
		}
	case goal == "overhead":
		if done < s.overheadTurns {
			return ollamatest.Turn{Calls: []ollamatest.Call{read(fmt.Sprintf("ev-%d", done))}}
		}
	case strings.HasPrefix(goal, "relay-"):
		if t := done / s.relayBatch; t < s.relayTurns {
			var calls []ollamatest.Call
			for j := range s.relayBatch {
				calls = append(calls, read(fmt.Sprintf("%s-%d-%d", goal, t, j)))
			}
			return ollamatest.Turn{Calls: calls}
		}
	}
	return ollamatest.Turn{Text: goal + " finished"}
}

var imageOnce sync.Once

// buildBenchImage builds the offline chick image once per bench run.
func buildBenchImage() {
	imageOnce.Do(func() {
		build := exec.Command("bash", "images/chick/build-offline.sh", benchImage)
		build.Stderr = os.Stderr
		build.Stdout = os.Stderr
		check(build.Run())
	})
}

// chicks measures the chick path with the real Docker engine, the real
// offline image and the real binaries: spawn latency against `docker run
// --rm` of the same image, the overhead from a chick's event to the
// adapter's render, and relay throughput from 10 chicks at once.
func chicks(bin, tmp string, quick bool) {
	if err := exec.Command("docker", "info").Run(); err != nil {
		fmt.Printf("## Chicks\n\nskipped: no Docker engine answers (`docker info`: %v)\n\n", err)
		return
	}
	buildBenchImage()

	spawns, events, batch, turns := 20, 300, 25, 20
	if quick {
		spawns, events, batch, turns = 5, 50, 10, 5
	}
	script := chickScript{overheadTurns: events, relayTurns: turns, relayBatch: batch}
	var mu sync.Mutex
	spawnAt := map[string]time.Time{}
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if r.Model == chickModel {
			return script.turn(r)
		}
		if r.Messages[len(r.Messages)-1].Role == "tool" {
			return ollamatest.Turn{Text: "Started."}
		}
		var calls []ollamatest.Call
		for _, goal := range strings.Fields(r.LastUser()) {
			if strings.HasPrefix(goal, "job-") || goal == "overhead" || strings.HasPrefix(goal, "relay-") {
				calls = append(calls, ollamatest.Call{Name: "spawn_chick", Args: map[string]any{"label": "delegating", "goal": goal}})
			}
		}
		if len(calls) == 0 {
			return ollamatest.Turn{Text: "Nothing to do."}
		}
		mu.Lock()
		now := time.Now()
		for _, c := range calls {
			spawnAt[c.Args["goal"].(string)] = now
		}
		mu.Unlock()
		return ollamatest.Turn{Calls: calls}
	})
	defer fake.Close()
	fake.ForgetRequests()

	start := func(name, network string) (d *daemon, out *lineLog, stop func()) {
		data := filepath.Join(tmp, name)
		chDir := filepath.Join(data, "workspace", "channels", "cli", "local")
		check(os.MkdirAll(chDir, 0o700))
		check(os.WriteFile(filepath.Join(chDir, "MEMORY.md"), []byte("A small file the chicks read.\n"), 0o600))
		cfg, _ := json.Marshal(map[string]any{
			"adapters":  map[string]any{"cli": map[string]any{"type": "cli"}},
			"model":     map[string]any{"provider": "ollama", "id": motherModel},
			"providers": map[string]any{"ollama": map[string]any{"url": fake.URL}},
			"chicks": map[string]any{
				"image": benchImage, "defaultTier": "local", "maxConcurrent": 10, "maxPerChannel": 10, "maxTurns": 1000,
				"tiers":     map[string]any{"local": map[string]any{"provider": "ollama", "model": chickModel, "description": "bench"}},
				"resources": map[string]any{"memory": "256m", "cpus": 1, "pids": 128, "tmpfs": "16m"},
				"network":   network,
				// The relay's fake model answers at once, so its chicks send
				// events far faster than chicks.events' default rate (100 a
				// second, a burst of 1,000), which a real model never nears:
				// the bench measures the relay, not that bound.
				"events": map[string]any{"perSecond": 1000000, "burst": 1000000},
				// Results posted as they come: the bench model spawns a chick for
				// every goal a message names and would take a chick's report
				// (it names the goal) for a new request under "answer".
				"results": "relay",
			},
			"log": map[string]any{"level": "warn"},
		})
		d = startDaemonOpts(bin, data, cfg, true)
		return d, newLineLog(d.stdout), func() {
			d.stop()
			removeInstance(filepath.Join(data, "chicks"))
		}
	}
	// measure times spawns one at a time: spawn_chick (the model's call)
	// to the chick's first event rendered.
	measure := func(d *daemon, out *lineLog, prefix string) []time.Duration {
		var spawn []time.Duration
		for i := range spawns {
			goal := fmt.Sprintf("job-%s%d", prefix, i)
			from := out.len()
			fmt.Fprintln(d.stdin, "please do "+goal)
			first, _ := out.wait(from, "→ first "+goal, 2*time.Minute)
			mu.Lock()
			spawn = append(spawn, first.at.Sub(spawnAt[goal]))
			mu.Unlock()
			out.wait(from, goal+" finished", 2*time.Minute)
		}
		sortD(spawn)
		return spawn
	}
	// The same spawns with the host's network, for the cost of isolation.
	hd, hout, hstop := start("chicks-host", "host")
	hostSpawn := measure(hd, hout, "host-")

	data := filepath.Join(tmp, "chicks")
	d, out, stop := start("chicks", "isolated")
	defer stop()

	// Spawn: spawn_chick (the model's call) to the chick's first event
	// rendered, one chick at a time, beside `docker run --rm` of the image.
	spawn := measure(d, out, "")
	var runFirst, runExit []time.Duration
	for range spawns {
		f, e := dockerRun()
		runFirst, runExit = append(runFirst, f), append(runExit, e)
	}
	sortD(runFirst)
	sortD(runExit)
	fmt.Printf("## Chick spawn (real Docker engine, offline image, %d spawns one at a time)\n\n", spawns)
	fmt.Printf("| | p50 | p95 |\n|---|---|---|\n")
	fmt.Printf("| `spawn_chick` to the chick's first event rendered (isolated: no network but loopback, through the gate) | %s | %s |\n", pct(spawn, 50), pct(spawn, 95))
	fmt.Printf("| the same with `chicks.network: host` | %s | %s |\n", pct(hostSpawn, 50), pct(hostSpawn, 95))
	fmt.Printf("| `docker run --rm %s --version`: to its first output | %s | %s |\n", benchImage, pct(runFirst, 50), pct(runFirst, 95))
	fmt.Printf("| `docker run --rm %s --version`: to exit | %s | %s |\n\n", benchImage, pct(runExit, 50), pct(runExit, 95))
	fmt.Printf("Ratio (p50): %.2fx `docker run --rm` to exit, %.2fx to first output. Goal: under 1.5x.\n",
		float64(pct(spawn, 50))/float64(pct(runExit, 50)), float64(pct(spawn, 50))/float64(pct(runFirst, 50)))
	fmt.Printf("Isolation costs %.2fx the host-network spawn at p50 (a host's gate is started once, by its first isolated spawn or at start, not per chick).\n", float64(pct(spawn, 50))/float64(pct(hostSpawn, 50)))
	fmt.Printf("The spawn includes creating the hardened container, copying the channel's files in, starting it, the chick's re-exec, dialling Mother over TLS, joining, its first model call through the broker (answered at once), and rendering.\n\n")

	// Overhead: a chick's tool_start event (its own timestamp, taken in the
	// container on the same clock) to the line on the terminal adapter.
	from := out.len()
	fmt.Fprintln(d.stdin, "please run overhead")
	out.wait(from, "overhead finished", 5*time.Minute)
	rendered := map[string]time.Time{}
	for _, l := range out.snapshot()[from:] {
		if _, label, ok := strings.Cut(l.text, "→ ev-"); ok {
			rendered["ev-"+label] = l.at
		}
	}
	var lat []time.Duration
	for _, ev := range storedEvents(filepath.Join(data, "chicks"), "overhead") {
		if ev.Type == "tool_start" {
			if at, ok := rendered[ev.Label]; ok {
				lat = append(lat, at.Sub(ev.Time))
			}
		}
	}
	sortD(lat)
	summary.renderP50, summary.renderP99, summary.haveRender = pct(lat, 50), pct(lat, 99), len(lat) > 0
	fmt.Printf("## Overhead: a chick's event to the adapter's render (terminal adapter, model answering instantly)\n\n")
	fmt.Printf("%d tool_start events (of %d): p50 %s, p99 %s. The path: the chick's outbox, the Session stream, the nest, the event stored and fsynced in events.jsonl, the observer, the channel's view, the terminal.\n\n", len(lat), events, pct(lat, 50), pct(lat, 99))

	// Relay: 10 chicks at once, each streaming turns of tool calls, in the
	// isolated daemon and in the host-network one (the gate's cost).
	const n = 10
	perChick := batch * turns
	hostRelay := relay(hd, hout, filepath.Join(tmp, "chicks-host"), n, perChick)
	hstop()
	iso := relay(d, out, data, n, perChick)
	fmt.Printf("## Relay throughput: %d chicks at once through Mother to the terminal adapter\n\n", n)
	fmt.Printf("| | isolated (through the gate) | `network: host` |\n|---|---|---|\n")
	fmt.Printf("| events stored by Mother (all types, fsynced) | %d | %d |\n", iso.stored, hostRelay.stored)
	fmt.Printf("| tool calls asked for / stored / rendered | %d / %d / %d | %d / %d / %d |\n", n*perChick, iso.tools, iso.rendered, n*perChick, hostRelay.tools, hostRelay.rendered)
	fmt.Printf("| lost | %d | %d |\n", iso.lost, hostRelay.lost)
	fmt.Printf("| window (first event rendered to last chick's result) | %s | %s |\n", iso.window.Round(time.Millisecond), hostRelay.window.Round(time.Millisecond))
	fmt.Printf("| events per second | %.0f | %.0f |\n", iso.perSecond(), hostRelay.perSecond())
	fmt.Printf("| Mother's CPU over the window (utime+stime from /proc/PID/stat) | %.2f s = %.0f%% of one core | %.2f s = %.0f%% of one core |\n\n",
		iso.cpu, 100*iso.cpu/iso.wall.Seconds(), hostRelay.cpu, 100*hostRelay.cpu/hostRelay.wall.Seconds())
	fmt.Printf("| fsyncs (all of Mother's files) over the run | %.0f = %.3f per stored event (%s) | %.0f = %.3f per stored event |\n", iso.fsyncs, iso.fsyncs/float64(iso.stored), iso.fsyncKinds, hostRelay.fsyncs, hostRelay.fsyncs/float64(hostRelay.stored))
	fmt.Printf("| Mother's CPU per stored event | %.0f µs | %.0f µs |\n\n", 1e6*iso.cpu/float64(iso.stored), 1e6*hostRelay.cpu/float64(hostRelay.stored))
	if iso.fsyncs > 0 {
		fmt.Printf("At 10 ms per fsync (an SD card), the isolated relay's fsyncs alone would allow %.0f events per second.\n", float64(iso.stored)/(iso.fsyncs*0.010))
	}
	summary.haveRelay, summary.relayPerSecond, summary.relayEvents, summary.relayCPU = true, iso.perSecond(), iso.stored, iso.cpu
	summary.relayCPUPerEvent = iso.cpu / float64(iso.stored)
	summary.haveFsyncPerEvents = iso.fsyncs > 0
	summary.fsyncsPerEvent, summary.relayFsyncKinds = iso.fsyncs/float64(iso.stored), iso.fsyncKinds
	fmt.Printf("Isolated relay: %.2fx the host-network events per second.\n", iso.perSecond()/hostRelay.perSecond())
	fmt.Printf("Each chick ran %d turns of %d tool calls (reads of a small file) with the model answering at once: every model call also went through Mother's broker. Events per second counts every event Mother stored (message start/end, tool start/end, run end).\n\n", turns, batch)
}

// dockerRun times `docker run --rm IMAGE --version`: to its first output
// and to exit.
func dockerRun() (first, exit time.Duration) {
	cmd := exec.Command("docker", "run", "--rm", "--network", "none", benchImage, "--version")
	out, err := cmd.StdoutPipe()
	check(err)
	start := time.Now()
	check(cmd.Start())
	r := bufio.NewReader(out)
	if _, err := r.ReadByte(); err == nil {
		first = time.Since(start)
	}
	r.WriteTo(&bytes.Buffer{})
	check(cmd.Wait())
	return first, time.Since(start)
}

type benchEvent struct {
	Type  string    `json:"type"`
	Time  time.Time `json:"time"`
	Label string    `json:"label"`
}

// storedEvents reads the events Mother stored for the chick whose goal is
// goal (<data>/chicks/<id>/events.jsonl).
func storedEvents(dir, goal string) []benchEvent {
	b, err := os.ReadFile(filepath.Join(dir, "chicks.jsonl"))
	check(err)
	id := ""
	for _, line := range strings.Split(string(b), "\n") {
		var r struct{ ID, Goal string }
		if json.Unmarshal([]byte(line), &r) == nil && r.Goal == goal {
			id = r.ID
		}
	}
	if id == "" {
		check(fmt.Errorf("no chick with goal %q", goal))
	}
	f, err := os.Open(filepath.Join(dir, id, "events.jsonl"))
	check(err)
	defer f.Close()
	var out []benchEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var se struct {
			Event benchEvent `json:"event"`
		}
		check(json.Unmarshal(sc.Bytes(), &se))
		out = append(out, se.Event)
	}
	return out
}

// removeInstance force-removes the containers of the Mother instance
// under dir, should any be left.
func removeInstance(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "instance"))
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ids, _ := exec.CommandContext(ctx, "docker", "ps", "-aq", "--filter", "label=mother.instance="+strings.TrimSpace(string(b))).Output()
	if f := strings.Fields(string(ids)); len(f) > 0 {
		exec.CommandContext(ctx, "docker", append([]string{"rm", "-f"}, f...)...).Run()
	}
}

func sortD(d []time.Duration) { sort.Slice(d, func(i, j int) bool { return d[i] < d[j] }) }

// relayStats is one relay run.
type relayStats struct {
	stored, tools, rendered, lost int
	window, wall                  time.Duration
	cpu                           float64 // Mother's CPU seconds over the run
	fsyncs                        float64 // Mother's fsyncs over the run
	fsyncKinds                    string
}

func (r relayStats) perSecond() float64 { return float64(r.stored) / r.window.Seconds() }

// relay runs n relay chicks at once in the daemon d (data: its data dir)
// and measures what Mother stored and rendered of their events.
func relay(d *daemon, out *lineLog, data string, n, perChick int) relayStats {
	var goals []string
	for c := range n {
		goals = append(goals, fmt.Sprintf("relay-%d", c))
	}
	from := out.len()
	f0 := d.fsyncs()
	fmt.Fprintln(d.stdin, "please run "+strings.Join(goals, " "))
	first, _ := out.wait(from, "→ relay-", 5*time.Minute)
	cpu0, t0 := cpuTicks(d.cmd.Process.Pid), first.at
	last := first
	for _, g := range goals {
		l, _ := out.wait(from, g+" finished", 10*time.Minute)
		if l.at.After(last.at) {
			last = l
		}
	}
	cpu1, t1 := cpuTicks(d.cmd.Process.Pid), time.Now()
	var r relayStats
	if f1 := d.fsyncs(); len(f1) > 0 {
		r.fsyncs, r.fsyncKinds = fsyncDelta(f0, f1)
	}
	for _, g := range goals {
		rendered := 0
		for _, l := range out.snapshot()[from:] {
			if strings.Contains(l.text, "→ "+g+"-") {
				rendered++
			}
		}
		evs := storedEvents(filepath.Join(data, "chicks"), g)
		for _, ev := range evs {
			if ev.Type == "tool_start" {
				r.tools++
			}
		}
		r.rendered += rendered
		r.stored += len(evs)
		r.lost += perChick - rendered
	}
	r.window, r.wall = last.at.Sub(t0), t1.Sub(t0)
	r.cpu = float64(cpu1-cpu0) / clockTicks
	return r
}
