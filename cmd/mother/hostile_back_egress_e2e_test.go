package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// TestHostileBackEgress: what a chick sends back through its gate and its
// access requests is bounded, and an approval tells the truth (issue 42,
// items 5 and 7; docs/isolation.md, "what a chick sends back").
func TestHostileBackEgress(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	buildAttack(t)
	plainMother(t)
	runHostileRows(t, api,
		hostileRow{"RefusedRequests", egressRefusedRequests},
		hostileRow{"AccessFlood", egressAccessFlood},
		hostileRow{"LoopbackApproval", egressLoopbackApproval},
	)
}

// egressLogCap is chicks.egress.logMaxBytes as the rows leave it: the
// default.
const egressLogCap = 1 << 20

// egressRefusedWindow is how long the chick keeps asking its proxy for a
// destination it may not reach (the issue measured 60 s).
const egressRefusedWindow = 20 * time.Second

// egressCPU is the CPU time process pid has used so far (user and
// system), from /proc/<pid>/stat.
func egressCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The fields after the command (in parentheses, which may hold
	// spaces): utime and stime are the 14th and 15th of the line.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	if len(f) < 13 {
		return -1
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// egressCounted reads a chick's egress.jsonl: its size, and how many
// connections it accounts for by outcome, logged one by one or counted
// in a summary line past the cap.
func egressCounted(t *testing.T, data string) (size int64, counts map[string]int64) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(data, "chicks", "c-*", "egress.jsonl"))
	if len(files) != 1 {
		t.Fatalf("%d egress logs, want 1: %v", len(files), files)
	}
	f, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	counts = map[string]int64{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e struct {
			Outcome string           `json:"outcome"`
			Counts  map[string]int64 `json:"counts"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		if e.Counts != nil {
			for k, n := range e.Counts {
				counts[k] += n
			}
			continue
		}
		counts[e.Outcome]++
	}
	return fi.Size(), counts
}

// egressRefusedRequests: a chick asks its proxy for a destination it may
// not reach, from 4 connections at once, for 20 s. Its egress.jsonl stays
// within chicks.egress.logMaxBytes (1 MiB by default) and still accounts
// for every refusal (counted past the cap); Mother's CPU per refused
// request is about half what it was. The control: the attack's own count of 403s, the
// same number the log accounts for.
func egressRefusedRequests(t *testing.T, api *client.Client) {
	h := newHostileModel(api)
	h.row("refusals", attackCall("refuse", "refusals", fmt.Sprintf("-to refused.test:443 -conc 4 -for %s", egressRefusedWindow)))
	var mu sync.Mutex
	var pid int
	var cpu0 time.Duration
	h.onTurn["refusals"] = func(_ leaked, done int) {
		mu.Lock()
		defer mu.Unlock()
		if done == 0 && pid != 0 {
			cpu0 = egressCPU(pid)
		}
	}
	fake := ollamatest.NewFunc(h.turn)
	defer fake.Close()
	p, data := egressMother(t, api, h, fake)
	mu.Lock()
	pid = p.cmd.Process.Pid
	mu.Unlock()
	io.WriteString(p.stdin, "refusals please\n")
	p.waitOut(t, "Done: ", 3*time.Minute)
	cpu1 := egressCPU(pid)
	out := doneOf(p.out(), "EGRESS ")
	refused := intField(out, "refused")
	if refused <= 0 {
		t.Fatalf("the attack made no refused request:\n%s\n%s", out, tail(p.errs(), 3000))
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("exit %d\n%s", code, tail(p.errs(), 3000))
	}
	mu.Lock()
	used := cpu1 - cpu0
	mu.Unlock()
	size, counts := egressCounted(t, data)
	perRequest := used / time.Duration(refused)
	t.Logf("%d refused requests in %s: egress.jsonl %d bytes, accounts for %v; Mother's CPU %s (%s a request)",
		refused, egressRefusedWindow, size, counts, used, perRequest)
	if size > egressLogCap {
		t.Errorf("egress.jsonl grew to %d bytes in %s (%d refused requests), want at most chicks.egress.logMaxBytes (%d)", size, egressRefusedWindow, refused, egressLogCap)
	}
	// Every refusal the gate reported is accounted for; the gate may drop
	// a few reports when its queue is full, never more than a hundredth.
	if got := counts["refused"]; got < int64(refused)*99/100 || got > int64(refused) {
		t.Errorf("egress.jsonl accounts for %d refused connections, the chick counted %d", got, refused)
	}
	// On 1b46f1f this row measured 388µs of Mother's CPU a refused
	// request (two gRPC calls, the log opened, written and closed for
	// each); now one call, nothing written past the cap: about 180µs, most
	// of it gRPC's own cost of a call.
	if perRequest > 250*time.Microsecond {
		t.Errorf("Mother used %s of CPU for %d refused requests: %s a request, want at most 250µs", used, refused, perRequest)
	}
}

// egressAccessFlood: a chick sends 100 request_access calls at once, each
// for another destination. At most chicks.egress.maxPendingPerChick of
// them are put to the admins (one post each, and one when it lapses);
// the others are told at once, plainly, that too many are pending.
func egressAccessFlood(t *testing.T, api *client.Client) {
	h := newHostileModel(api)
	h.row("accessflood", attackCall("ask", "accessflood", "-n 100 -to flood.test"))
	fake := ollamatest.NewFunc(h.turn)
	defer fake.Close()
	p, _ := hostileMother(t, api, h, fake, nil, map[string]any{"egress": map[string]any{"requestTimeout": "8s"}})
	io.WriteString(p.stdin, "accessflood please\n")
	p.waitOut(t, "Done: ", 3*time.Minute)
	out := doneOf(p.out(), "ACCESSFLOOD")
	line := regexp.MustCompile(`ACCESSFLOOD [^\n]*`).FindString(out)
	asked := strings.Count(p.out(), "asks to reach")
	lapsed := strings.Count(p.out(), "asked to reach")
	t.Logf("%s; posts: %d requests, %d lapsed", line, asked, lapsed)
	if line == "" {
		t.Fatalf("the attack did not finish:\n%s\n%s", out, tail(p.errs(), 3000))
	}
	const perChick = 3 // chicks.egress.maxPendingPerChick's default
	if asked+lapsed > 2*perChick {
		t.Errorf("100 request_access calls of one chick: %d channel posts (%d requests, %d lapsed), want at most %d", asked+lapsed, asked, lapsed, 2*perChick)
	}
	if q := intField(line, "quick"); q < 100-perChick {
		t.Errorf("%d of 100 request_access calls were answered at once, want at least %d: %s", q, 100-perChick, line)
	}
	if !strings.Contains(line, "pending") {
		t.Errorf("the calls past the cap were not told plainly why: %s", line)
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("exit %d\n%s", code, tail(p.errs(), 3000))
	}
}

// egressLoopbackForms are loopback in the 9 forms the issue tried, each
// of which the gate refuses: plain, IPv6, IPv4-mapped, IPv4-compatible,
// IPv4-translated, NAT64, 6to4, Teredo and ISATAP.
var egressLoopbackForms = []string{
	"127.0.0.1:8080",
	"[::1]:8080",
	"[::ffff:127.0.0.1]:8080",
	"[::127.0.0.1]:8080",
	"[::ffff:0:127.0.0.1]:8080",
	"[64:ff9b::127.0.0.1]:8080",
	"[2002:7f00:1::]:8080",
	"[2001:0:7f00:1::]:8080",
	"[2001:db8::5efe:127.0.0.1]:8080",
}

// egressLoopbackApproval: a chick asks, with its request_access tool, for
// loopback in 9 forms, then for a name (the control). The admin allows
// whatever is put to them. Each loopback form is refused, and the chick
// is told so, never that it "is now reachable"; the name is granted, with
// the honest rider that the gate still refuses private addresses.
func egressLoopbackApproval(t *testing.T, api *client.Client) {
	h := newHostileModel(api)
	var steps []step
	for i, d := range append(egressClone(egressLoopbackForms), "ok.test:443") {
		call := ollamatest.Call{Name: "request_access", Args: map[string]any{"label": fmt.Sprintf("ask %d", i), "destination": d, "reason": "the goal needs it"}}
		steps = append(steps, func(leaked) ollamatest.Call { return call })
	}
	h.row("loopback", steps...)
	fake := ollamatest.NewFunc(h.turn)
	defer fake.Close()
	p, _ := hostileMother(t, api, h, fake, nil, map[string]any{"egress": map[string]any{"requestTimeout": "60s"}})
	io.WriteString(p.stdin, "loopback please\n")
	// The admin allows every request put to them, as it comes.
	asked := regexp.MustCompile("asks to reach `([^`]+)`")
	answered := 0
	deadline := time.Now().Add(4 * time.Minute)
	for !strings.Contains(p.out(), "Done: ") {
		if time.Now().After(deadline) {
			t.Fatalf("the chick did not finish:\n%s\n%s", p.out(), tail(p.errs(), 3000))
		}
		ms := asked.FindAllStringSubmatch(p.out(), -1)
		ids := regexp.MustCompile("`allow ([^ `]+)").FindAllStringSubmatch(p.out(), -1)
		for ; answered < len(ms) && answered < len(ids); answered++ {
			io.WriteString(p.stdin, "allow "+ids[answered][1]+" "+ms[answered][1]+"\n")
		}
		time.Sleep(100 * time.Millisecond)
	}
	all := p.out()
	out := all[strings.LastIndex(all, "Done: ")+len("Done: "):]
	results := strings.Split(out, " || ")
	if len(results) != len(egressLoopbackForms)+1 {
		t.Fatalf("%d tool results, want %d:\n%s", len(results), len(egressLoopbackForms)+1, out)
	}
	told := 0
	for i, d := range egressLoopbackForms {
		r := results[i]
		if strings.Contains(r, "reachable") || !strings.Contains(strings.ToLower(r), "refused") {
			told++
			t.Errorf("request_access %s: the chick was told %q, want refused", d, r)
		}
	}
	t.Logf("%d of %d loopback forms: the chick was told it is reachable (or not told it is refused); %d put to the admin", told, len(egressLoopbackForms), answered)
	ctl := results[len(results)-1]
	if !strings.Contains(ctl, "approved") {
		t.Errorf("the control: ok.test:443, allowed by the admin: the chick was told %q, want approved", ctl)
	}
	if strings.Contains(ctl, "reachable") || !strings.Contains(ctl, "still refuses") {
		t.Errorf("ok.test:443, allowed by the admin: the chick was told %q, want allowed, with the gate's refusal of private addresses said", ctl)
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("exit %d\n%s", code, tail(p.errs(), 3000))
	}
}

// egressClone copies a list of strings (so appending does not share it).
func egressClone(s []string) []string { return append([]string(nil), s...) }

// egressMother is hostileMother with no extra settings and the mother
// binary as it ships (plainMother: the race detector's cost would be
// counted in her CPU), her CPU profiled to $MOTHER_CPUPROFILE when it is
// set (to find where the time goes: go tool pprof).
func egressMother(t *testing.T, api *client.Client, h *hostileModel, fake *ollamatest.Server) (*chickProc, string) {
	t.Helper()
	prof := os.Getenv("MOTHER_CPUPROFILE")
	if prof == "" {
		return hostileMotherBin(t, plainMother(t), api, h, fake, nil, nil)
	}
	data, _ := chickData(t, api, nil)
	removeGateVolumes(t, api, data)
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
	return startMotherBinary(t, plainMother(t), data, append(chickEnv(fake), "MOTHER_CPUPROFILE="+prof)), data
}
