// Command bench measures Mother and prints figures and ratios: resident
// memory, per-message overhead, store scale, start-up time, and the
// chicks: spawn latency against `docker run`, event-to-render overhead and
// relay throughput, and Mother's own relay ceiling (relaycap). It never
// asserts timings; it reports them.
//
//	go run ./bench [-only footprint,platforms,overhead,store,startup,chicks,relaycap] [-quick]
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/store"
)

func main() {
	only := flag.String("only", "", "comma-separated subset: size,footprint,platforms,overhead,store,startup,chicks,relaycap,recall")
	quick := flag.Bool("quick", false, "smaller sizes (for a smoke run)")
	baseline := flag.String("baseline", "", "a git revision (e.g. 14dc8ff) built and measured too, alternated with this tree, for the summary's ratios")
	runs := flag.Int("runs", 1, "how many times each binary is measured (alternated with the baseline's)")
	flag.Parse()
	want := func(name string) bool { return *only == "" || strings.Contains(","+*only+",", ","+name+",") }

	tmp, err := os.MkdirTemp("", "mother-bench-")
	check(err)
	defer os.RemoveAll(tmp)
	bin := buildMother(".", filepath.Join(tmp, "mother"))
	var baseBin, baseSrc string
	if *baseline != "" {
		baseSrc = filepath.Join(tmp, "baseline-src")
		check(os.MkdirAll(baseSrc, 0o700))
		// The baseline's source as committed, beside this tree (git
		// archive: nothing in this checkout changes).
		arch := exec.Command("sh", "-c", `git archive --format=tar "$0" | tar -x -C "$1"`, *baseline, baseSrc)
		arch.Stderr = os.Stderr
		check(arch.Run())
		baseBin = buildMother(baseSrc, filepath.Join(tmp, "mother-baseline"))
	}

	fmt.Printf("# Mother benchmarks (%s)\n\n", time.Now().Format("2006-01-02"))
	nth := 0
	recallDone := false
	measure := func(label, bin, src string) results {
		summary = results{fsyncsPerMessage: -1}
		// Each measurement on data directories of its own.
		nth++
		tmp := filepath.Join(tmp, fmt.Sprintf("m%d", nth))
		check(os.MkdirAll(tmp, 0o700))
		defer os.RemoveAll(tmp)
		if label != "" {
			fmt.Printf("# %s\n\n", label)
		}
		if want("size") {
			summary.arm64 = arm64Size(src, tmp)
		}
		if want("footprint") {
			footprint(bin, tmp, *quick)
		}
		if want("platforms") {
			platforms(bin, tmp, *quick)
		}
		if want("overhead") {
			overhead(bin, tmp, *quick)
		}
		if want("store") {
			storeScale(tmp, *quick)
		}
		if want("startup") {
			startup(bin, tmp, *quick)
		}
		if want("chicks") {
			chicks(bin, tmp, *quick)
		}
		if want("relaycap") {
			relaycap(bin, tmp, *quick)
		}
		// Recall is this tree's alone (a baseline may have none), and
		// measured once: its million messages take minutes.
		if want("recall") && src == "." && !recallDone {
			recallBench(bin, tmp, *quick)
			recallDone = true
		}
		return summary
	}
	if baseBin == "" && *runs <= 1 {
		measure("", bin, ".").print()
		return
	}
	var cur, base []results
	for i := range max(*runs, 1) {
		cur = append(cur, measure(fmt.Sprintf("Run %d: this tree", i+1), bin, "."))
		cur[len(cur)-1].print()
		if baseBin != "" {
			base = append(base, measure(fmt.Sprintf("Run %d: %s", i+1, *baseline), baseBin, baseSrc))
			base[len(base)-1].print()
		}
	}
	rev := *baseline
	if rev == "" {
		rev = "(no baseline)"
	}
	printCompare(rev, cur, base)
}

// buildMother builds src's cmd/mother to out as `make release` builds
// it: static and stripped.
func buildMother(src, out string) string {
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, "./cmd/mother")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stderr = os.Stderr
	check(build.Run())
	return out
}

// arm64Size builds src's cmd/mother for the Pi (GOARCH=arm64, static,
// stripped) and returns its size in bytes.
func arm64Size(src, tmp string) int64 {
	out := filepath.Join(tmp, "mother-arm64")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, "./cmd/mother")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH=arm64", "GOOS=linux")
	build.Stderr = os.Stderr
	check(build.Run())
	st, err := os.Stat(out)
	check(err)
	os.Remove(out)
	fmt.Printf("## Size\n\nstripped arm64 mother: %d bytes (%.1f MB)\n\n", st.Size(), float64(st.Size())/(1<<20))
	return st.Size()
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// daemon is a running `mother DATA` with a cli adapter fed through a pipe.
type daemon struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  *bufio.Reader
	ready   time.Duration
	metrics string // the /metrics URL
}

// startDaemon starts Mother as the systemd unit would (Type=notify) and
// waits for READY=1.
func startDaemon(bin, data, ollamaURL string) *daemon {
	return startDaemonWith(bin, data, []byte(`{"adapters": {"cli": {"type": "cli"}}}`), "MOTHER_OLLAMA_URL="+ollamaURL)
}

// startDaemonWith starts Mother on data with config.json cfg and extra
// environment, and waits for READY=1.
func startDaemonWith(bin, data string, cfg []byte, env ...string) *daemon {
	return startDaemonOpts(bin, data, cfg, false, env...)
}

// startDaemonOpts is startDaemonWith; withMetrics has the daemon serve its
// metrics on a free loopback port, for the fsync counts
// (mother_store_fsyncs_total). The footprint runs go without, as before.
func startDaemonOpts(bin, data string, cfg []byte, withMetrics bool, env ...string) *daemon {
	metricsAddr := ""
	if withMetrics {
		metricsAddr = freeAddr()
		var c map[string]any
		check(json.Unmarshal(cfg, &c))
		c["metrics"] = map[string]any{"listen": metricsAddr}
		cfg, _ = json.Marshal(c)
	}
	check(os.WriteFile(filepath.Join(data, "config.json"), cfg, 0o600))
	if dir := os.Getenv("BENCH_CPUPROFILE_DIR"); dir != "" {
		env = append(env, "MOTHER_CPUPROFILE="+filepath.Join(dir, filepath.Base(data)+".pprof"), "MOTHER_MEMPROFILE="+filepath.Join(dir, filepath.Base(data)+".mem"))
	}
	if dir := os.Getenv("BENCH_TRACE_DIR"); dir != "" {
		env = append(env, "MOTHER_TRACE="+filepath.Join(dir, filepath.Base(data)+".trace"))
	}
	sock := filepath.Join(data, "notify.sock")
	os.Remove(sock)
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	check(err)
	defer conn.Close()
	cmd := exec.Command(bin, data)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "NOTIFY_SOCKET=" + sock, "USER=bench", "MOTHER_GRPC_LISTEN=127.0.0.1:0"}, env...)
	stdin, err := cmd.StdinPipe()
	check(err)
	out, err := cmd.StdoutPipe()
	check(err)
	start := time.Now()
	check(cmd.Start())
	buf := make([]byte, 256)
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		n, err := conn.Read(buf)
		check(err)
		if strings.HasPrefix(string(buf[:n]), "READY=1") {
			break
		}
	}
	return &daemon{cmd: cmd, stdin: stdin, stdout: bufio.NewReader(out), ready: time.Since(start), metrics: "http://" + metricsAddr + "/metrics"}
}

// freeAddr is a loopback address with a port free right now.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer l.Close()
	return l.Addr().String()
}

// fsyncs reads the daemon's mother_store_fsyncs_total by kind (empty for
// a binary without the metric).
func (d *daemon) fsyncs() map[string]float64 {
	out := map[string]float64{}
	if d.metrics == "http://" {
		return out
	}
	resp, err := http.Get(d.metrics)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, `mother_store_fsyncs_total{kind="`)
		if !ok {
			continue
		}
		kind, val, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(val, 64)
		if err == nil {
			out[kind] = v
		}
	}
	return out
}

// fsyncDelta is what happened between two fsyncs() readings: the total
// and a "kind n, ..." breakdown.
func fsyncDelta(before, after map[string]float64) (float64, string) {
	var total float64
	var kinds []string
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			total += d
			kinds = append(kinds, fmt.Sprintf("%s %.0f", k, d))
		}
	}
	sort.Strings(kinds)
	return total, strings.Join(kinds, ", ")
}

func (d *daemon) stop() {
	d.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
	}
}

// mem is a process's memory in KiB: resident (RSS), its anonymous part
// (Mother's own heap, stacks and runtime) and the peak RSS (VmHWM). RSS
// minus anonymous is clean file-backed pages of the binary, mapped as code
// runs.
type mem struct{ rss, anon, peak int }

func memOf(pid int) mem {
	var m mem
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	check(err)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "Rss:" {
			m.rss, _ = strconv.Atoi(f[1])
		}
		if len(f) >= 2 && f[0] == "Anonymous:" {
			m.anon, _ = strconv.Atoi(f[1])
		}
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	check(err)
	for _, line := range strings.Split(string(st), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			m.peak, _ = strconv.Atoi(f[1])
		}
	}
	return m
}

// smapsBreakdown prints, with BENCH_SMAPS=1, where a process's RSS is:
// each mapping's resident KiB, by file (or [anon]) and permissions.
func smapsBreakdown(pid int, when string) {
	if os.Getenv("BENCH_SMAPS") == "" {
		return
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	check(err)
	rss := map[string]int{}
	var cur string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && len(f[1]) == 4:
			name := "[anon]"
			if len(f) >= 6 {
				name = filepath.Base(f[5])
			}
			cur = name + " " + f[1]
		case len(f) >= 2 && f[0] == "Rss:":
			n, _ := strconv.Atoi(f[1])
			rss[cur] += n
		}
	}
	keys := make([]string, 0, len(rss))
	for k := range rss {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return rss[keys[i]] > rss[keys[j]] })
	fmt.Fprintf(os.Stderr, "smaps %s:", when)
	for _, k := range keys {
		if rss[k] >= 256 {
			fmt.Fprintf(os.Stderr, " %s=%.1fMB", k, mb(rss[k]))
		}
	}
	fmt.Fprintln(os.Stderr)
}

// resetPeak starts a new peak RSS (VmHWM) for pid ("5" to clear_refs),
// so that the peak over a workload is not the start-up's.
func resetPeak(pid int) {
	check(os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0))
}

func (m mem) String() string {
	return fmt.Sprintf("%.1f MB | %.1f MB", mb(m.rss), mb(m.anon))
}

// ask writes one line and waits for the answer line.
func (d *daemon) ask(text string) string {
	_, err := fmt.Fprintln(d.stdin, text)
	check(err)
	line, err := d.stdout.ReadString('\n')
	check(err)
	return line
}

func footprint(bin, tmp string, quick bool) {
	fake := ollamatest.NewFunc(func(ollamatest.Request) ollamatest.Turn { return ollamatest.Turn{Text: "ok"} })
	defer fake.Close()
	fake.ForgetRequests()
	data := filepath.Join(tmp, "footprint")
	check(os.MkdirAll(data, 0o700))
	d := startDaemon(bin, data, fake.URL)
	defer d.stop()
	time.Sleep(3 * time.Second) // Mother trims 2 s after start-up
	idle := memOf(d.cmd.Process.Pid)
	smapsBreakdown(d.cmd.Process.Pid, "idle")
	// The start-up's peak (every package's initialisation touches the
	// binary's pages before the first idle trim) is its own row; the
	// peak over the messages starts here.
	resetPeak(d.cmd.Process.Pid)
	n := 1000
	if quick {
		n = 100
	}
	var after100 mem
	for i := range n {
		d.ask(fmt.Sprintf("message %d", i))
		if i == 99 {
			time.Sleep(time.Second)
			after100 = memOf(d.cmd.Process.Pid)
			smapsBreakdown(d.cmd.Process.Pid, "after 100")
		}
	}
	after := memOf(d.cmd.Process.Pid)
	smapsBreakdown(d.cmd.Process.Pid, "after all")
	summary.idle, summary.rss100, summary.peakTerminal, summary.peakStartup = idle.rss, after100.rss, after.peak, idle.peak
	time.Sleep(4 * time.Second) // Mother returns freed memory after 2 s idle
	idleAgain := memOf(d.cmd.Process.Pid)
	fmt.Printf("## Footprint (terminal adapter)\n\n")
	fmt.Printf("| state | RSS | of which anonymous |\n|---|---|---|\n")
	fmt.Printf("| idle after start (peak RSS during start-up %.1f MB) | %s |\n", mb(idle.peak), idle)
	fmt.Printf("| 1 s after the first 100 messages answered | %s |\n", after100)
	fmt.Printf("| right after %d messages answered (peak RSS over the messages %.1f MB) | %s |\n", n, mb(after.peak), after)
	fmt.Printf("| idle again, 4 s later | %s |\n\n", idleAgain)
	fmt.Printf("The peak RSS over the messages is counted from the first message (the high-water mark reset through /proc/PID/clear_refs); the start-up's peak, before her first idle trim, is shown on its own: initialising every linked package touches most of the binary's code and read-only data once.\n\n")
	fmt.Printf("Anonymous memory is Mother's own (heap, stacks, runtime); the rest of RSS is clean pages of her binary's code and read-only data that she has mapped. After 2 s without work she returns freed heap to the OS and unmaps her code pages (MADV_DONTNEED on the binary's read-only mappings); what she runs while idle faults back in. The TypeScript runtime sits around 160 MB idle before it connects to anything.\n\n")
}

func mb(kib int) float64 { return float64(kib) / 1024 }

// overhead measures, per message, the time from writing the line to
// Mother's stdin (adapter delivery) to the fake model having received the
// whole request (stamped before the fake decodes it, whose cost is the
// model server's): logging, queueing, context sync, prompt building and
// encoding the request. The fake keeps no requests, so its heap stays small.
func overhead(bin, tmp string, quick bool) {
	var mu sync.Mutex
	var got []time.Time
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		mu.Lock()
		got = append(got, r.Received)
		mu.Unlock()
		return ollamatest.Turn{Text: "ok"}
	})
	defer fake.Close()
	fake.ForgetRequests()
	data := filepath.Join(tmp, "overhead")
	check(os.MkdirAll(data, 0o700))
	d := startDaemonOpts(bin, data, []byte(`{"adapters": {"cli": {"type": "cli"}}}`), true, "MOTHER_OLLAMA_URL="+fake.URL)
	defer d.stop()
	n := 500
	if quick {
		n = 50
	}
	var lat []time.Duration
	d.ask("warm-up")
	f0 := d.fsyncs()
	for i := range n {
		sent := time.Now()
		d.ask(fmt.Sprintf("message %d", i))
		mu.Lock()
		lat = append(lat, got[len(got)-1].Sub(sent))
		mu.Unlock()
	}
	f1 := d.fsyncs()
	fs, kinds := fsyncDelta(f0, f1)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	summary.overheadP50, summary.overheadP99 = pct(lat, 50), pct(lat, 99)
	fmt.Printf("## Overhead per message (terminal adapter, model answering instantly)\n\n")
	fmt.Printf("delivery to first model request over %d messages: p50 %s, p99 %s\n\n", n, pct(lat, 50), pct(lat, 99))
	if len(f1) == 0 {
		fmt.Printf("fsyncs: not reported (this binary has no mother_store_fsyncs_total)\n\n")
		return
	}
	summary.fsyncsPerMessage, summary.fsyncKinds = fs/float64(n), kinds
	fmt.Printf("fsyncs: %.0f for %d answered messages, %.2f per message (%s); at 10 ms per fsync (an SD card) that is %.0f ms of fsync per message\n\n", fs, n, fs/float64(n), kinds, 10*fs/float64(n))
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := (len(d)*p + 99) / 100
	if i < 1 {
		i = 1
	}
	return d[i-1].Round(time.Microsecond)
}

// storeScale measures syncing one new message into the context for logs of
// different sizes: it should be flat.
func storeScale(tmp string, quick bool) {
	sizes := []int{1_000, 100_000, 1_000_000}
	if quick {
		sizes = []int{1_000, 100_000}
	}
	fmt.Printf("## Store scale: syncing one new message\n\n| messages in log | log size | sync of one new message (median of 200) | ratio to 1k |\n|---|---|---|---|\n")
	var base time.Duration
	for _, n := range sizes {
		dir := filepath.Join(tmp, fmt.Sprintf("store-%d", n))
		st, err := store.Open(dir, store.Options{})
		check(err)
		ch, err := st.Channel("bench", "C1")
		check(err)
		var buf bytes.Buffer
		for i := range n {
			line, _ := json.Marshal(chat.ChannelMessage{ID: strconv.Itoa(i), ChannelID: "C1", Timestamp: time.Unix(1_700_000_000+int64(i), 0), Sender: chat.Sender{ID: "U1", Username: "mario"}, Text: "a message of ordinary length, like most chat messages are"})
			buf.Write(append(line, '\n'))
		}
		check(ch.ReplaceLog(buf.Bytes()))
		size := buf.Len()
		buf = bytes.Buffer{} // the 1M log's 190 MB is garbage now; collect it before timing
		runtime.GC()
		cur := store.Cursor{Offset: int64(size), LastID: strconv.Itoa(n - 1)}
		const rounds = 200
		times := make([]time.Duration, 0, rounds)
		for i := range rounds {
			_, err := ch.AppendMessage(chat.ChannelMessage{ID: fmt.Sprint("new-", i), ChannelID: "C1", Timestamp: time.Now(), Sender: chat.Sender{ID: "U1", Username: "mario"}, Text: "new"})
			check(err)
			start := time.Now()
			got, next, err := ch.Pending(cur, 0, nil)
			times = append(times, time.Since(start))
			check(err)
			if len(got) != 1 {
				check(fmt.Errorf("sync returned %d messages", len(got)))
			}
			cur = next
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		per := pct(times, 50)
		if base == 0 {
			base = per
		}
		fmt.Printf("| %d | %.1f MB | %s | %.2fx |\n", n, float64(size)/(1<<20), per.Round(time.Microsecond), float64(per)/float64(base))
		st.Close()
		os.RemoveAll(dir)
	}
	fmt.Println()
}

// startup measures the time to READY with 1,000 channels on disk.
func startup(bin, tmp string, quick bool) {
	fake := ollamatest.New()
	defer fake.Close()
	fake.ForgetRequests()
	n := 1000
	if quick {
		n = 100
	}
	empty := filepath.Join(tmp, "startup-empty")
	check(os.MkdirAll(empty, 0o700))
	full := filepath.Join(tmp, "startup-full")
	st, err := store.Open(full, store.Options{})
	check(err)
	for i := range n {
		ch, err := st.Channel("bench", fmt.Sprintf("C%04d", i))
		check(err)
		for j := range 20 {
			_, err := ch.AppendMessage(chat.ChannelMessage{ID: strconv.Itoa(j), ChannelID: ch.ID, Timestamp: time.Now(), Sender: chat.Sender{ID: "U1", Username: "mario"}, Text: "hello"})
			check(err)
		}
	}
	st.Close()
	measure := func(data string) time.Duration {
		var best time.Duration
		for range 3 {
			d := startDaemon(bin, data, fake.URL)
			if best == 0 || d.ready < best {
				best = d.ready
			}
			d.stop()
		}
		return best
	}
	e, f := measure(empty), measure(full)
	// The same empty start with the only Docker host hanging: an engine
	// across the network that takes the connection and never answers.
	hung := filepath.Join(tmp, "startup-hung")
	check(os.MkdirAll(hung, 0o700))
	engine := hangingEngine(filepath.Join(tmp, "hung-engine.sock"))
	defer engine.Close()
	cfg := fmt.Appendf(nil, `{"adapters": {"cli": {"type": "cli"}}, "chicks": {"hosts": [{"name": "gpu", "address": "unix://%s"}]}}`, engine.Addr())
	var g time.Duration
	for range 3 {
		d := startDaemonWith(bin, hung, cfg, "MOTHER_OLLAMA_URL="+fake.URL)
		if g == 0 || d.ready < g {
			g = d.ready
		}
		d.stop()
	}
	summary.startupEmpty, summary.startupHung = e, g
	fmt.Printf("## Start-up (exec to READY=1, best of 3)\n\n| data directory | start-up |\n|---|---|\n| empty | %s |\n| %d channels x 20 messages | %s (%.2fx) |\n| empty, the Docker engine hanging | %s (%.2fx) |\n\n",
		e.Round(time.Millisecond), n, f.Round(time.Millisecond), float64(f)/float64(e), g.Round(time.Millisecond), float64(g)/float64(e))
}

// hangingEngine listens on a unix socket at path like a Docker engine
// that takes each connection and never answers.
func hangingEngine(path string) net.Listener {
	os.Remove(path)
	l, err := net.Listen("unix", path)
	check(err)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(io.Discard, c) // until Mother hangs up
			}()
		}
	}()
	return l
}
