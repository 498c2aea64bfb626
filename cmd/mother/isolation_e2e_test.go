package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// The isolation tests run real chicks under the default configuration
// (chicks.network "isolated") and look at the world from inside them the
// way a prompt-injected model would, with bash. Everything they try to
// reach is the test's own (outside_test.go); every probe that must fail
// from a chick succeeds from a container on the host's network.

// scriptedChick is a chick model that runs, for the goal it was given, a
// list of tool calls one after the other, then answers "Done: " with the
// results joined by " || ". Mother's model delegates every message as the
// goal, verbatim.
type scriptedChick struct {
	mu    sync.Mutex
	calls map[string][]ollamatest.Call // by the goal's first word
}

func (s *scriptedChick) set(word string, calls ...ollamatest.Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls == nil {
		s.calls = map[string][]ollamatest.Call{}
	}
	s.calls[word] = calls
}

func bashCall(label, command string) ollamatest.Call {
	return ollamatest.Call{Name: "bash", Args: map[string]any{"label": label, "command": command}}
}

func (s *scriptedChick) fake() *ollamatest.Server {
	return ollamatest.NewFunc(s.turn)
}

// toolNames lists the tools a model request offers.
func toolNames(r ollamatest.Request) []string {
	var names []string
	for _, raw := range r.Tools {
		var tool struct {
			Function struct{ Name string } `json:"function"`
		}
		if json.Unmarshal(raw, &tool) == nil {
			names = append(names, tool.Function.Name)
		}
	}
	return names
}

// turn answers one model request.
func (s *scriptedChick) turn(r ollamatest.Request) ollamatest.Turn {
	switch r.Model {
	case motherModel:
		// Delegated once per message: the history holds earlier
		// messages' tool results too.
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "tool" {
			return ollamatest.Turn{Text: "Delegated."}
		}
		return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "spawn_chick", Args: map[string]any{"label": "delegating", "goal": r.LastUser()}}}}
	case chickModel:
		goal := ""
		for _, m := range r.Messages {
			if m.Role == "user" {
				goal = m.Content
				break
			}
		}
		s.mu.Lock()
		var calls []ollamatest.Call
		for word, c := range s.calls {
			if strings.Contains(goal, word) {
				calls = c
			}
		}
		s.mu.Unlock()
		res := toolResults(r)
		if len(res) < len(calls) {
			return ollamatest.Turn{Calls: []ollamatest.Call{calls[len(res)]}}
		}
		return ollamatest.Turn{Text: "Done: " + strings.Join(res, " || ")}
	}
	return ollamatest.Turn{Status: 404, Error: "unknown model " + r.Model}
}

// setEgress writes chicks.egress (and any other chicks settings) into the
// data dir's config.
func setChicks(t *testing.T, data string, settings map[string]any) {
	t.Helper()
	path := filepath.Join(data, "config.json")
	var cfg map[string]any
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	chicks := cfg["chicks"].(map[string]any)
	for k, v := range settings {
		if v == nil {
			delete(chicks, k)
		} else {
			chicks[k] = v
		}
	}
	b, _ = json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// gates lists the gate containers of the data dir's Mother.
func gates(t *testing.T, api *client.Client, data string) []container.Summary {
	t.Helper()
	return hatcherytest.Gates(t, api, hatcherytest.InstanceFile(filepath.Join(data, "chicks")))
}

// gateVolumes lists the gate volumes of the data dir's Mother.
func gateVolumes(t *testing.T, api *client.Client, data string) []string {
	t.Helper()
	inst := hatcherytest.InstanceFile(filepath.Join(data, "chicks"))
	vs, err := api.VolumeList(context.Background(), volume.ListOptions{Filters: filters.NewArgs(filters.Arg("name", "mother-gate-"+inst))})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range vs.Volumes {
		names = append(names, v.Name)
	}
	return names
}

// removeGateVolumes removes, at cleanup, the gate volumes the data dir's
// Mother leaves behind (its containers go with RemoveOnCleanup).
func removeGateVolumes(t *testing.T, api *client.Client, data string) {
	t.Cleanup(func() {
		inst := hatcherytest.InstanceFile(filepath.Join(data, "chicks"))
		if inst == "" {
			return
		}
		for _, c := range hatcherytest.Containers(t, api, "mother.instance", inst) {
			api.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
		}
		api.VolumeRemove(context.Background(), "mother-gate-"+inst, true)
		api.VolumeRemove(context.Background(), "mother-gate-"+inst+"-hosts", true)
	})
}

// isolationWorld is where the isolation tests on the local engine start:
// the engine, the test image, the outside world and a data directory
// whose gate volume goes at cleanup.
func isolationWorld(t *testing.T) (api *client.Client, o *outside, data, listen string) {
	t.Helper()
	api = hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	o = makeOutside(t, api)
	data, listen = chickData(t, api, nil)
	removeGateVolumes(t, api, data)
	return api, o, data, listen
}

// waitCount waits until stdout holds n copies of s.
func (p *chickProc) waitCount(t *testing.T, s string, n int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for strings.Count(p.out(), s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("stdout shows %q %d times, want %d; stdout:\n%s\nstderr:\n%s", s, strings.Count(p.out(), s), n, p.out(), p.errs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// probeNames are the probes of probeScript: each must fail from an
// isolated chick and succeed from the host's network.
var probeNames = []string{"host-loopback", "host-bridge", "neighbour", "mother-nest", "dns"}

// checkProbesFailed checks a chick's output of probeScript(listen): every
// probe ran and failed, its only network interface is loopback, and the
// same probes succeed from a container on the host's network (the
// positive control, without which a failed probe proves nothing).
func (o *outside) checkProbesFailed(t *testing.T, out, listen string) {
	t.Helper()
	got := probes(out)
	for _, name := range probeNames {
		ok, ran := got[name]
		switch {
		case !ran:
			t.Errorf("probe %s did not run in the chick:\n%s", name, out)
		case ok:
			t.Errorf("an isolated chick reached %s", name)
		}
	}
	if m := regexp.MustCompile(`INTERFACES ([^\n]*)`).FindStringSubmatch(out); m == nil || strings.TrimSpace(m[1]) != "lo" {
		t.Errorf("the chick's network interfaces: %q, want only lo", m)
	}
	// Its networking is disabled in the engine (runc made its namespace),
	// so its /etc/hosts is the gate volume's, and localhost resolves.
	if m := regexp.MustCompile(`HOSTSFROM ([^\n]*)`).FindStringSubmatch(out); m == nil || !regexp.MustCompile(`/mother-gate-m-[0-9a-f]+-hosts/_data/hosts \S+$`).MatchString(m[1]) {
		t.Errorf("the chick's /etc/hosts (mount root, type): %q, want the file of the gate's hosts volume", m)
	}
	if !strings.Contains(out, "LOCALHOST HELLO") {
		t.Errorf("localhost did not reach the chick's own loopback:\n%s", out)
	}
	control := probes(o.onHostNetwork(t, o.probeScript(listen)))
	for _, name := range probeNames {
		if !control[name] {
			t.Errorf("probe %s failed from the host's network too: it proves nothing", name)
		}
	}
}

// TestIsolatedChickReachesOnlyMother: under the default configuration a
// real chick joins Mother, runs, streams and returns its result, yet from
// inside it no connection reaches a listener on the Docker host's
// loopback, on the host's bridge address, a neighbouring container or
// Mother's own nest port, and the test's DNS server cannot be asked; it
// has no network interface but its loopback and no IPv6 address but
// loopback's. Every one of these probes succeeds from a container on the
// host's network.
func TestIsolatedChickReachesOnlyMother(t *testing.T) {
	t.Parallel()
	api, o, data, listen := isolationWorld(t)
	script := o.probeScript(listen)
	var s scriptedChick
	s.set("probe", bashCall("probe", script))
	fake := s.fake()
	defer fake.Close()
	p := startChickMother(t, data, chickEnv(fake))
	io.WriteString(p.stdin, "probe the network\n")
	p.waitOut(t, "Done: ", 3*time.Minute)
	out := p.out()
	o.checkProbesFailed(t, out, listen)
	if m := regexp.MustCompile(`INET6 (\d+)`).FindStringSubmatch(out); m == nil || (m[1] != "0" && m[1] != "1") {
		t.Errorf("the chick's IPv6 addresses: %q, want at most loopback's", m)
	}
	if gs := gates(t, api, data); len(gs) != 1 {
		t.Errorf("%d gates, want 1", len(gs))
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.errs())
	}
}

// proxyRequest is a shell line that sends one raw request to the chick's
// proxy (127.0.0.1:3128, its forwarder to the gate) and prints the first
// bytes of the answer between markers.
func proxyRequest(name, request string) string {
	return fmt.Sprintf("echo '<<%s'; (printf '%s'; sleep 2) | nc 127.0.0.1 3128 | head -c 400; echo; echo '%s>>'\n", name, request, name)
}

// answerOf cuts one proxyRequest's answer out of the output.
func answerOf(out, name string) string {
	_, rest, ok := strings.Cut(out, "<<"+name)
	if !ok {
		return ""
	}
	ans, _, _ := strings.Cut(rest, name+">>")
	return ans
}

// TestIsolatedChickEgressAllowlist: the gate's proxy reaches a listed
// address (a web server container of the test's), refuses a name not
// listed with the message the channel sees, and refuses listed names that
// resolve to loopback or link-local addresses; the refusal shows in the
// chick's progress.
//
// A listed address keeps its port: the operator lists the host's
// loopback at one port of a second listener of the test's (paired), and
// names at any port that resolve to it (by chicks.egress.hosts, the
// mapped form among them) reach that port and no other; a name resolving
// to the IPv4-compatible form of loopback is refused as loopback.
func TestIsolatedChickEgressAllowlist(t *testing.T) {
	t.Parallel()
	_, o, data, _ := isolationWorld(t)
	_, loopPort, _ := net.SplitHostPort(o.Loopback)
	_, pairPort, _ := net.SplitHostPort(hello(t, "127.0.0.1:0"))
	setChicks(t, data, map[string]any{"egress": map[string]any{
		"allow": []string{o.Web, "loop.test", "meta.test", "127.0.0.1:" + pairPort, "pair.test:" + pairPort, "any.test", "mapped.test", "compat.test"},
		"hosts": map[string]string{"loop.test": "127.0.0.1", "meta.test": "169.254.169.254", "web.test": o.WebIP,
			"pair.test": "127.0.0.1", "any.test": "127.0.0.1", "mapped.test": "::ffff:127.0.0.1", "compat.test": "::127.0.0.1"},
	}})
	crlf := `\r\n`
	connect := func(name, dest string) string {
		return proxyRequest(name, "CONNECT "+dest+" HTTP/1.1"+crlf+crlf)
	}
	script := proxyRequest("listed", "GET http://"+o.Web+"/hello.txt HTTP/1.0"+crlf+"Host: "+o.Web+crlf+crlf) +
		proxyRequest("unlisted", "CONNECT other.test:443 HTTP/1.1"+crlf+"Host: other.test:443"+crlf+crlf) +
		proxyRequest("unlisted-name", "GET http://web.test:8080/hello.txt HTTP/1.0"+crlf+crlf) +
		proxyRequest("loopback", "CONNECT loop.test:"+loopPort+" HTTP/1.1"+crlf+crlf) +
		proxyRequest("link-local", "CONNECT meta.test:80 HTTP/1.1"+crlf+crlf) +
		connect("pair-listed", "pair.test:"+pairPort) +
		connect("pair-any-name", "any.test:"+pairPort) +
		connect("pair-mapped", "mapped.test:"+pairPort) +
		connect("pair-other-port", "any.test:"+loopPort) +
		connect("pair-mapped-other-port", "mapped.test:"+loopPort) +
		connect("pair-compat", "compat.test:"+pairPort)
	var s scriptedChick
	s.set("fetch", bashCall("fetch", script))
	fake := s.fake()
	defer fake.Close()
	p := startChickMother(t, data, chickEnv(fake))
	io.WriteString(p.stdin, "fetch things\n")
	p.waitOut(t, "Done: ", 3*time.Minute)
	out := p.out()
	if a := answerOf(out, "listed"); !strings.Contains(a, "HELLO-WEB") {
		t.Errorf("the listed web server was not reached: %q", a)
	}
	// The listed address at its port, under each name that resolves to it.
	for _, name := range []string{"pair-listed", "pair-any-name", "pair-mapped"} {
		if a := answerOf(out, name); !strings.Contains(a, "200 Connection established") || !strings.Contains(a, "HELLO") {
			t.Errorf("%s: the listed address at its port was not reached: %q", name, a)
		}
	}
	for name, want := range map[string]string{
		"unlisted":               "blocked: other.test:443 (not allowed for this chick)",
		"unlisted-name":          "blocked: web.test:8080 (not allowed for this chick)",
		"loopback":               "blocked: loop.test:" + loopPort + " (resolves to",
		"link-local":             "blocked: meta.test:80 (resolves to",
		"pair-other-port":        "blocked: any.test:" + loopPort + " (resolves to a loopback address 127.0.0.1)",
		"pair-mapped-other-port": "blocked: mapped.test:" + loopPort + " (resolves to a loopback address 127.0.0.1)",
		"pair-compat":            "blocked: compat.test:" + pairPort + " (resolves to a loopback address 127.0.0.1 in ::7f00:1)",
	} {
		a := answerOf(out, name)
		if !strings.Contains(a, "403") || !strings.Contains(a, want) {
			t.Errorf("%s: the proxy answered %q, want a 403 with %q", name, a, want)
		}
	}
	// The channel saw the refusal as the chick's progress.
	if !strings.Contains(out, "✗ egress: blocked: other.test:443 (not allowed for this chick)") {
		t.Errorf("the refusal is not in the channel:\n%s", out)
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.errs())
	}
	// Every connection is in the chick's egress record.
	recs, _ := filepath.Glob(filepath.Join(data, "chicks", "c-*", "egress.jsonl"))
	var lines int
	for _, r := range recs {
		b, _ := os.ReadFile(r)
		lines += strings.Count(string(b), "\n")
	}
	if lines < 11 {
		t.Errorf("%d connections recorded in egress.jsonl, want 11", lines)
	}
}

// accessID finds the chick id of the n-th access request posted.
func accessID(t *testing.T, p *chickProc, n int) string {
	t.Helper()
	p.waitCount(t, "asks to reach", n, 2*time.Minute)
	ms := regexp.MustCompile("`allow ([^`]+)`").FindAllStringSubmatch(p.out(), -1)
	if len(ms) < n {
		t.Fatalf("no answer id in the request:\n%s", p.out())
	}
	return ms[n-1][1]
}

// TestRequestAccessInChat: a chick asks for a destination with
// request_access; an admin (the terminal's operator) approves it once (the
// chick then reaches it through the proxy), refuses it (it stays
// blocked), lets it time out (the chick is told), and approves it for the
// channel, which survives a restart of Mother: the next chick reaches it
// without asking.
func TestRequestAccessInChat(t *testing.T) {
	t.Parallel()
	_, o, data, _ := isolationWorld(t)
	// web.test resolves to the web server's private address, which the
	// operator listed exactly; the name itself is not allowed.
	setChicks(t, data, map[string]any{"egress": map[string]any{
		"allow":          []string{o.WebIP},
		"hosts":          map[string]string{"web.test": o.WebIP},
		"requestTimeout": "6s",
	}})
	crlf := `\r\n`
	get := bashCall("get", proxyRequest("get", "GET http://web.test:8080/hello.txt HTTP/1.0"+crlf+crlf))
	ask := ollamatest.Call{Name: "request_access", Args: map[string]any{"label": "ask", "destination": "web.test:8080", "reason": "fetch the hello file"}}
	var s scriptedChick
	for _, w := range []string{"once", "refused", "unanswered", "always"} {
		s.set(w, ask, get)
	}
	s.set("again", get)
	fake := s.fake()
	defer fake.Close()

	p := startChickMother(t, data, chickEnv(fake))
	step := func(n int, goal, answer string) string {
		t.Helper()
		io.WriteString(p.stdin, goal+"\n")
		id := accessID(t, p, n)
		if answer != "" {
			io.WriteString(p.stdin, answer+" "+id+"\n")
		}
		p.waitCount(t, "Done: ", n, 3*time.Minute)
		outs := strings.Split(p.out(), "Done: ")
		return outs[n]
	}
	if r := step(1, "fetch once", "allow"); !strings.Contains(r, "HELLO-WEB") {
		t.Errorf("approved once, the chick did not reach web.test: %s", r)
	}
	if r := step(2, "fetch refused", "deny"); strings.Contains(r, "HELLO-WEB") || !strings.Contains(answerOf(r, "get"), "not allowed for this chick") {
		t.Errorf("refused, the chick still reached web.test (or was not told): %s", r)
	}
	if r := step(3, "fetch unanswered", ""); !strings.Contains(r, "no admin answered") || strings.Contains(r, "HELLO-WEB") {
		t.Errorf("unanswered, the chick was not told of the timeout: %s", r)
	}
	if r := step(4, "fetch always", "always"); !strings.Contains(r, "HELLO-WEB") {
		t.Errorf("approved for the channel, the chick did not reach web.test: %s", r)
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.errs())
	}
	// Every request and answer is in the channel's log.
	var requests int
	for _, m := range readLog(t, data) {
		if strings.Contains(m.Text, "asks to reach") {
			requests++
		}
	}
	if requests != 4 {
		t.Errorf("%d access requests in log.jsonl, want 4", requests)
	}

	// Restarted, the channel's approval holds: no question asked.
	p2 := startChickMother(t, data, chickEnv(fake))
	io.WriteString(p2.stdin, "fetch again\n")
	p2.waitOut(t, "Done: ", 3*time.Minute)
	if r := p2.out(); !strings.Contains(r, "HELLO-WEB") || strings.Contains(r, "asks to reach") {
		t.Errorf("after a restart the channel's approval did not hold: %s", r)
	}
	p2.stdin.Close()
	p2.wait(t, 2*time.Minute)
}

// TestGateKilledMidRun: the gate is killed while a chick works; Mother
// starts it again, the chick reconnects to her through it, and its events
// and result arrive.
func TestGateKilledMidRun(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	data, _ := chickData(t, api, nil)
	removeGateVolumes(t, api, data)
	var s scriptedChick
	s.set("slow", bashCall("before", "echo before-kill"), bashCall("wait", "sleep 8; echo slept"), bashCall("after", "echo after-kill"))
	fake := s.fake()
	defer fake.Close()
	p := startChickMother(t, data, chickEnv(fake))
	io.WriteString(p.stdin, "slow work\n")
	p.waitOut(t, "→ wait", 2*time.Minute)
	gs := gates(t, api, data)
	if len(gs) != 1 {
		t.Fatalf("%d gates, want 1", len(gs))
	}
	if err := api.ContainerKill(context.Background(), gs[0].ID, "KILL"); err != nil {
		t.Fatal(err)
	}
	p.waitOut(t, "Done: ", 3*time.Minute)
	if out := p.out(); !strings.Contains(out, "slept") || !strings.Contains(out, "after-kill") {
		t.Errorf("the chick's work across the gate's death is incomplete:\n%s", out)
	}
	if !strings.Contains(p.errs(), "gate exited; starting it again") {
		t.Errorf("Mother did not log the gate's restart:\n%s", p.errs())
	}
	gs = gates(t, api, data)
	if len(gs) != 1 || gs[0].State != "running" {
		t.Errorf("after the kill: %d gates (%+v), want 1 running", len(gs), gs)
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.errs())
	}
}

// TestGatesReconciled: Mother SIGKILLed while a chick works and started
// again keeps the same gate (none duplicated) and the chick finishes;
// when the configuration no longer isolates chicks, the gate and its
// volume are removed.
func TestGatesReconciled(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	data, _ := chickData(t, api, nil)
	removeGateVolumes(t, api, data)
	var s scriptedChick
	s.set("slow", bashCall("wait", "sleep 6; echo slept"))
	fake := s.fake()
	defer fake.Close()
	a := startChickMother(t, data, chickEnv(fake))
	io.WriteString(a.stdin, "slow work\n")
	a.waitOut(t, "→ wait", 2*time.Minute)
	before := gates(t, api, data)
	if len(before) != 1 {
		t.Fatalf("%d gates, want 1", len(before))
	}
	a.cmd.Process.Signal(syscall.SIGKILL)
	a.wait(t, time.Minute)

	b := startChickMother(t, data, chickEnv(fake))
	b.waitOut(t, "Done: ", 3*time.Minute)
	after := gates(t, api, data)
	if len(after) != 1 || after[0].ID != before[0].ID {
		t.Errorf("after a restart: gates %v, want the same one (%s)", after, before[0].ID)
	}
	b.stdin.Close()
	if code := b.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d\n%s", code, b.errs())
	}
	// A clean stop with no chick left takes the gate and its volume.
	if gs := gates(t, api, data); len(gs) != 0 {
		t.Errorf("%d gates left after a clean stop with no chick", len(gs))
	}
	if vs := gateVolumes(t, api, data); len(vs) != 0 {
		t.Errorf("gate volumes left after a clean stop with no chick: %v", vs)
	}

	// A killed Mother leaves hers: the next start finds it, and with no
	// isolated chick configured any more, removes it.
	k := startChickMother(t, data, chickEnv(fake))
	deadline := time.Now().Add(2 * time.Minute)
	for len(gates(t, api, data)) != 1 || len(gateVolumes(t, api, data)) != 2 { // the gate's and the hosts file's
		if time.Now().After(deadline) {
			t.Fatalf("no gate made at start: %v\n%s", gates(t, api, data), k.errs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	k.cmd.Process.Signal(syscall.SIGKILL)
	k.wait(t, time.Minute)

	setChicks(t, data, map[string]any{"network": "bridge"})
	c := startChickMother(t, data, chickEnv(fake))
	c.stdin.Close()
	if code := c.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d\n%s", code, c.errs())
	}
	if gs := gates(t, api, data); len(gs) != 0 {
		t.Errorf("%d gates left when no chick is isolated", len(gs))
	}
	if vs := gateVolumes(t, api, data); len(vs) != 0 {
		t.Errorf("gate volumes left when no chick is isolated: %v", vs)
	}
}

// isolatedOnOneHost runs one isolated chick (the default network) on
// host, the only chicks.hosts entry of the data dir's config: the chick
// runs probeScript and fetches the listed web server through its proxy.
// Every probe fails (with the positive control), its only interface is
// loopback, the web server answers through that host's gate, and Mother
// exits 0. whileRunning, called with the Mother instance before she is
// stopped, checks where the gates are.
func isolatedOnOneHost(t *testing.T, o *outside, data, listen string, host map[string]any, whileRunning func(inst string)) {
	t.Helper()
	setChicks(t, data, map[string]any{
		"hosts":  []any{host},
		"egress": map[string]any{"allow": []string{o.Web}},
	})
	crlf := `\r\n`
	script := o.probeScript(listen) + proxyRequest("listed", "GET http://"+o.Web+"/hello.txt HTTP/1.0"+crlf+"Host: "+o.Web+crlf+crlf)
	var s scriptedChick
	s.set("probe", bashCall("probe", script))
	fake := s.fake()
	defer fake.Close()
	p := startChickMother(t, data, chickEnv(fake))
	io.WriteString(p.stdin, "probe the network\n")
	p.waitOut(t, "Done: ", 3*time.Minute)
	out := p.out()
	o.checkProbesFailed(t, out, listen)
	if a := answerOf(out, "listed"); !strings.Contains(a, "HELLO-WEB") {
		t.Errorf("the listed web server was not reached through %s's gate: %q", host["name"], a)
	}
	whileRunning(hatcherytest.InstanceFile(filepath.Join(data, "chicks")))
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.errs())
	}
}

// TestIsolatedChickOnSecondEngine: the same isolation on a second, real
// dockerd reached over TLS, the only host in config: its own gate starts
// there (none on the local engine); from inside its chick nothing of the
// outside world is reachable, not even Mother's nest port, while the chick
// joins Mother through that gate, reaches a listed web server through its
// proxy and returns its result.
func TestIsolatedChickOnSecondEngine(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	image := hatcherytest.BuildImage(t)
	eng := hatcherytest.SecondEngine(t, image)
	api2 := eng.Client()
	o := makeOutside(t, api)
	data, listen := chickData(t, api, nil)
	hatcherytest.RemoveOnCleanup(t, api2, func() string { return hatcherytest.InstanceFile(filepath.Join(data, "chicks")) })
	removeGateVolumes(t, api2, data)
	host := map[string]any{"name": "gpu2", "address": eng.Address, "tlsCA": eng.CA, "tlsCert": eng.Cert, "tlsKey": eng.Key, "capacity": 1}
	isolatedOnOneHost(t, o, data, listen, host, func(inst string) {
		if n := len(hatcherytest.Gates(t, api2, inst)); n != 1 {
			t.Errorf("%d gates on the second engine, want 1", n)
		}
		if n := len(hatcherytest.Gates(t, api, inst)); n != 0 {
			t.Errorf("%d gates on the local engine, which is not configured, want 0", n)
		}
	})
}

// TestIsolatedChickOverSSH: the same isolation on a Docker host reached
// over ssh (a real sshd on loopback, `docker system dial-stdio` on the far
// side), the only host in config. The far side is this machine's engine,
// so its one gate is there; the chick reaches nothing of the outside
// world, joins Mother through that gate and reaches a listed web server
// through its proxy.
func TestIsolatedChickOverSSH(t *testing.T) {
	t.Parallel()
	sshd := hatcherytest.SSHD(t)
	api, o, data, listen := isolationWorld(t)
	host := map[string]any{"name": "viassh", "address": sshd.Address(), "sshIdentityFile": sshd.ClientKey, "sshKnownHostsFile": sshd.KnownHosts, "capacity": 1}
	isolatedOnOneHost(t, o, data, listen, host, func(inst string) {
		gs := hatcherytest.Gates(t, api, inst)
		if len(gs) != 1 || gs[0].Labels["mother.gate.host"] != "viassh" {
			t.Errorf("gates on the engine behind ssh: %+v, want 1 for host viassh", gs)
		}
	})
}

// TestNetworkNoneReachesOnlyMother: with chicks.network "none" a chick
// still joins Mother through its host's gate and returns its result, but
// gets no proxy and no gate key, so nothing beyond Mother: no proxy
// settings, no forwarder on 127.0.0.1:3128 even for a destination
// chicks.egress allows (the gate's proxy socket wants a gate key, which
// it does not have: pkg/nest's gate tests), and no request_access tool.
func TestNetworkNoneReachesOnlyMother(t *testing.T) {
	t.Parallel()
	api, o, data, listen := isolationWorld(t)
	setChicks(t, data, map[string]any{"network": "none", "egress": map[string]any{"allow": []string{o.Web}}})
	crlf := `\r\n`
	script := o.probeScript(listen) +
		"echo \"PROXYENV $(env | grep -ci -e _proxy -e MOTHER_GATE)\"\n" +
		proxyRequest("forwarder", "GET http://"+o.Web+"/hello.txt HTTP/1.0"+crlf+crlf)
	var s scriptedChick
	s.set("probe", bashCall("probe", script))
	var tools []string
	var mu sync.Mutex
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if r.Model == chickModel {
			mu.Lock()
			tools = toolNames(r)
			mu.Unlock()
		}
		return s.turn(r)
	})
	defer fake.Close()
	p := startChickMother(t, data, chickEnv(fake))
	io.WriteString(p.stdin, "probe the network\n")
	p.waitOut(t, "Done: ", 3*time.Minute)
	out := p.out()
	o.checkProbesFailed(t, out, listen)
	if !strings.Contains(out, "PROXYENV 0") {
		t.Errorf("proxy or gate settings in the chick's environment:\n%s", out)
	}
	if a := answerOf(out, "forwarder"); strings.Contains(a, "HELLO-WEB") || strings.Contains(a, "HTTP/") {
		t.Errorf("something answers on 127.0.0.1:3128 in a chick of network none: %q", a)
	}
	mu.Lock()
	if slices.Contains(tools, "request_access") || len(tools) == 0 {
		t.Errorf("the chick's tools %v: want its tools without request_access", tools)
	}
	mu.Unlock()
	if n := len(gates(t, api, data)); n != 1 {
		t.Errorf("%d gates, want 1 (the chicks' way to Mother)", n)
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.errs())
	}
}
