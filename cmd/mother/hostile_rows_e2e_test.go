package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// The rows of the hostile suite (TestHostile, hostile_e2e_test.go), one
// function each: what the program tries, and the positive control.

// hostileMemory: the program searches every process it can see for the
// chick's nest token and gate key and finds neither; the control: the
// same search finds a marker in a child of its own, and the chick still
// joined and answered with its token.
func hostileMemory(t *testing.T, api *client.Client) {
	h := newHostileModel(api)
	h.row("memory", func(l leaked) ollamatest.Call {
		// In base64, so the command line of the shell that runs the
		// program does not hold them as they are.
		enc := base64.StdEncoding.EncodeToString
		return bashCall("scan", fmt.Sprintf("./scratch/attack memscan -find %s,%s 2>&1", enc([]byte(l.Token)), enc([]byte(l.Key))))
	})
	fake := ollamatest.NewFunc(h.turn)
	defer fake.Close()
	p, _ := hostileMother(t, api, h, fake, nil, nil)
	io.WriteString(p.stdin, "memory scan\n")
	p.waitOut(t, "Done: ", 2*time.Minute)
	out := doneOf(p.out(), "SCANNED")
	if out == "" {
		t.Fatalf("the scan did not run:\n%s\n%s", p.out(), p.errs())
	}
	t.Logf("memscan: %s", strings.Join(regexp.MustCompile(`(?m)^(PROC|DENIED|FOUND|PTRACE|SCANNED|CONTROL) [^\n]*`).FindAllString(out, -1), "; "))
	if !strings.Contains(out, "CONTROL found") {
		t.Errorf("the control: the scan did not find the marker in its own child, so it proves nothing:\n%s", out)
	}
	if n := intField(out, "SCANNED processes"); n < 2 {
		t.Errorf("the scan saw %d processes besides itself, want the agent and its own child at least:\n%s", n, out)
	}
	if m := regexp.MustCompile(`FOUND secret\d pid=\d+ src=\S+`).FindAllString(out, -1); len(m) > 0 {
		t.Errorf("a tool's program found the chick's credentials (secret0 the nest token, secret1 the gate key): %v", m)
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("exit %d\n%s", code, p.errs())
	}
}

// ledgerTokens adds up the tokens the broker's ledger recorded for chick
// id (every *.jsonl under the data dir whose lines are ledger entries).
func ledgerTokens(t *testing.T, data, id string) int64 {
	t.Helper()
	var total int64
	for _, e := range ledgerLines(data) {
		if e.Chick == id {
			total += e.In + e.Out
		}
	}
	return total
}

// reportTokens adds up what the broker's ledger charged chick id ("":
// every chick) for the reports Mother's model read about it (issue 42:
// entries marked report, broker.ChargeReport): it counts in the chick's
// tier, channel and person on top of its own calls.
func reportTokens(t *testing.T, data, id string) int64 {
	t.Helper()
	var total int64
	for _, e := range ledgerLines(data) {
		if e.Report && (id == "" || e.Chick == id) {
			total += e.In
		}
	}
	return total
}

// hostileBudget: with the chick's token, 30 concurrent Generate calls
// against budgets.chickTokens (hostileChickTokens, hostileCallTokens
// each); the ledger records at most the budget and calls were refused
// with a budget error; the control: a call on its own is answered. In another chick, a
// max_output_tokens of 2^30 reaches the model server as a num_predict no
// higher than the tier's maximum, and a smaller one passes lowered.
func hostileBudget(t *testing.T, api *client.Client) {
	h := newHostileModel(api)
	h.row("race", attackCall("race", "race", "-n 30 -max 24 -system HOSTILE-RACE"))
	h.row("clamp", attackCall("huge", "generate", "-max 1073741824 -system HOSTILE-HUGE"), attackCall("small", "generate", "-max 100 -system HOSTILE-SMALL"))
	fake := ollamatest.NewFunc(h.turn)
	defer fake.Close()
	chicks := map[string]any{}
	for k, v := range hostileBudgetChicks {
		chicks[k] = v
	}
	p, data := hostileMother(t, api, h, fake, map[string]any{"budgets": map[string]any{"chickTokens": hostileChickTokens}}, chicks)
	io.WriteString(p.stdin, "race the budget\n")
	io.WriteString(p.stdin, "clamp the output\n")
	p.waitCount(t, "(chick c-", 2, 2*time.Minute)
	t.Logf("the channel:\n%s", tail(p.out(), 3000))
	race := doneOf(p.out(), "RACE ")
	used := ledgerTokens(t, data, h.leak("race").ID)
	sent := len(h.numPredict("HOSTILE-RACE"))
	t.Logf("race: %s; %d of 31 calls reached the model; ledger %d tokens for %s",
		strings.Join(regexp.MustCompile(`(CONTROL|RACE|RACEERR) [^\n]*`).FindAllString(race, -1), "; "), sent, used, h.leak("race").ID)
	// The control: the call on its own was answered and recorded (the
	// program's output is gone if the chick was stopped).
	if (race != "" && !strings.Contains(race, "CONTROL answered")) || sent < 1 || used < hostileCallTokens {
		t.Errorf("the control: a single call within the budget was not answered (%d calls reached the model, %d tokens recorded):\n%s", sent, used, race)
	}
	if used > hostileChickTokens {
		t.Errorf("30 concurrent calls: the ledger holds %d tokens of chick %s, over its budget of %d", used, h.leak("race").ID, hostileChickTokens)
	}
	if sent >= 31 || !(regexp.MustCompile(`RACEERR \d+ [^\n]*budget`).MatchString(race) || strings.Contains(p.out(), "a budget ran out")) {
		t.Errorf("no call was refused with a budget error (%d of 31 calls reached the model):\n%s", sent, p.out())
	}
	huge, small := h.numPredict("HOSTILE-HUGE"), h.numPredict("HOSTILE-SMALL")
	t.Logf("num_predict received: for 2^30 %v, for 100 %v (tier maximum %d)", huge, small, hostileTierMaxOutput)
	if len(huge) != 1 || huge[0] < 1 || huge[0] > float64(hostileTierMaxOutput) {
		t.Errorf("max_output_tokens 2^30 reached the model server as num_predict %v, want one call of at most the tier's %d", huge, hostileTierMaxOutput)
	}
	if len(small) != 1 || small[0] != 100 {
		t.Errorf("max_output_tokens 100 reached the model server as num_predict %v, want 100 (a chick may lower its limit)", small)
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("exit %d\n%s", code, p.errs())
	}
}

// eventsBytes is the size of chick id's events.jsonl, and whether every
// line of it parses.
func eventsFile(data, id string) (int64, bool) {
	b, err := os.ReadFile(filepath.Join(data, "chicks", id, "events.jsonl"))
	if err != nil {
		return -1, false
	}
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if line != "" && !json.Valid([]byte(line)) {
			return int64(len(b)), false
		}
	}
	return int64(len(b)), true
}

// floodRSSBound is how far Mother's RSS may rise under the floods: two
// of the big flood's 16 MiB messages and 4 MiB besides. gRPC reads a whole
// message before the nest's codec sees its size (limitCodec), so one is
// always held, and the next is being read while the last one's buffers
// wait for the collector: the bound is what one chick can hold, never what
// it sends (40 of them, 640 MiB, held 489 MB before the cap). 20 MB (one
// message) failed a CI run at +21 MB.
const floodRSSBound = 2*16<<20 + 4<<20

// hostileFlood: with a chick's token, a Session of 16 MiB ToolEnd events
// (one chick) and a fast stream of small ones (another): each chick is
// stopped with a reason starting "flooding:" that the channel shows, its
// events.jsonl grows by at most the cap and still parses, and Mother's
// RSS stays within floodRSSBound of its level before. The control: the chick's
// own events before the flood were stored and shown.
func hostileFlood(t *testing.T, api *client.Client) {
	h := newHostileModel(api)
	h.row("bigflood", plainCall("before-big", "echo BEFORE-FLOOD-BIG"), attackCall("flood", "flood", "-size 16777216 -count 40 -for 25s"))
	h.row("fastflood", plainCall("before-fast", "echo BEFORE-FLOOD-FAST"), attackCall("flood", "flood", "-size 64 -count 2000000 -for 25s"))
	var mu sync.Mutex
	sizes := map[string]int64{}
	stored := map[string]bool{}
	var p *chickProc
	var data string
	// Mother's RSS before the first flood, then its highest until the
	// end of the row.
	rss := newRSSPeak(50 * time.Millisecond)
	for _, row := range []string{"bigflood", "fastflood"} {
		marker := "BEFORE-FLOOD-" + strings.ToUpper(strings.TrimSuffix(row, "flood"))
		h.onTurn[row] = func(l leaked, done int) {
			if done != 1 { // the control ran; the flood is next
				return
			}
			// The control's events stream on their own: wait (a while)
			// until its result is stored, then take the size the flood
			// starts from.
			path := filepath.Join(data, "chicks", l.ID, "events.jsonl")
			found := false
			for deadline := time.Now().Add(20 * time.Second); !found && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				b, _ := os.ReadFile(path)
				found = strings.Contains(string(b), marker)
			}
			rss.start(p.cmd.Process.Pid)
			n, _ := eventsFile(data, l.ID)
			mu.Lock()
			sizes[row], stored[row] = n, found
			mu.Unlock()
		}
	}
	fake := ollamatest.NewFunc(h.turn)
	defer fake.Close()
	// chickData's heartbeat (500ms): the watchdog follows the gaps it
	// measures between a chick's messages and does not count its own late
	// checks, so 16 MiB events crossing the gate on a loaded machine are
	// not taken for a hang before the flooding is seen.
	chicks := map[string]any{}
	for k, v := range hostileFloodChicks {
		chicks[k] = v
	}
	p, data = hostileMotherBin(t, plainMother(t), api, h, fake, nil, chicks)
	io.WriteString(p.stdin, "bigflood events\n")
	io.WriteString(p.stdin, "fastflood events\n")
	p.waitCount(t, "(chick c-", 2, 2*time.Minute)
	baseline, peak := rss.end()
	out := p.out()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("Mother's RSS: %d MB before the floods, %d MB at most during", baseline>>20, peak>>20)
	if peak-baseline > floodRSSBound {
		t.Errorf("Mother's RSS went from %d MB to %d MB under the floods, want within %d MB", baseline>>20, peak>>20, floodRSSBound>>20)
	}
	for _, row := range []string{"bigflood", "fastflood"} {
		l := h.leak(row)
		after, parses := eventsFile(data, l.ID)
		before := sizes[row]
		t.Logf("%s (%s): events.jsonl %d bytes before the flood, %d after; %s", row, l.ID, before, after, regexp.MustCompile(`FLOOD [^\n]*`).FindString(doneOf(out, "BEFORE-FLOOD-"+strings.ToUpper(strings.TrimSuffix(row, "flood")))))
		if !stored[row] || !strings.Contains(out, "["+"chick "+l.ID+"] → before-") {
			t.Errorf("%s: the control: the chick's own events before the flood were not stored (%v) and shown", row, stored[row])
		}
		if after-before > hostileEventsCap {
			t.Errorf("%s: events.jsonl grew by %d bytes under the flood, want at most the cap %d", row, after-before, hostileEventsCap)
		}
		if !parses {
			t.Errorf("%s: events.jsonl does not parse after the flood", row)
		}
		if !regexp.MustCompile(`Chick ` + l.ID + ` was stopped for sending too much: `).MatchString(out) {
			t.Errorf("%s: the channel does not show chick %s stopped with a reason starting \"flooding:\":\n%s", row, l.ID, tail(out, 3000))
		}
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("exit %d\n%s", code, tail(p.errs(), 3000))
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// hostileGateStorm: chick A opens 2,000 connections to the gate's
// nest.sock while chick B works through ten model turns; the gate is not
// OOM-killed or restarted, B finishes every turn, and the refusal is
// reported. The control: A's own first connections were served (a TLS
// handshake with Mother through the gate).
func hostileGateStorm(t *testing.T, api *client.Client) {
	h := newHostileModel(api)
	h.row("storm", attackCall("storm", "storm", "-n 2000 -for 20s"))
	var ticks []step
	for i := 1; i <= 10; i++ {
		ticks = append(ticks, plainCall(fmt.Sprintf("tick %d", i), fmt.Sprintf("sleep 1.5; echo TICK-%d", i)))
	}
	h.row("steady", ticks...)
	var started sync.Once
	stormGo := make(chan struct{})
	h.onTurn["steady"] = func(_ leaked, done int) {
		if done == 2 {
			started.Do(func() { close(stormGo) })
		}
	}
	fake := ollamatest.NewFunc(h.turn)
	defer fake.Close()
	p, data := hostileMother(t, api, h, fake, nil, hostileGateChicks)
	io.WriteString(p.stdin, "steady work\n")
	select {
	case <-stormGo:
	case <-time.After(2 * time.Minute):
		t.Fatalf("chick B never got going:\n%s\n%s", p.out(), p.errs())
	}
	gs := gates(t, api, data)
	if len(gs) != 1 {
		t.Fatalf("%d gates, want 1", len(gs))
	}
	before, err := api.ContainerInspect(context.Background(), gs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(p.stdin, "storm the gate\n")
	p.waitCount(t, "Done: ", 2, 3*time.Minute)
	out := p.out()
	storm, steady := doneOf(out, "STORM "), doneOf(out, "TICK-1")
	t.Logf("storm: %s", strings.Join(regexp.MustCompile(`(?m)^(CONTROL|STORM|AFTER) [^\n]*`).FindAllString(storm, -1), "; "))
	if !strings.Contains(storm, "CONTROL handshake=ok") {
		t.Errorf("the control: chick A's own first connection was not served:\n%s", storm)
	}
	for i := 1; i <= 10; i++ {
		if !strings.Contains(steady, fmt.Sprintf("TICK-%d", i)) {
			t.Errorf("chick B did not finish its turn %d during the storm:\n%s", i, steady)
		}
	}
	after, err := api.ContainerInspect(context.Background(), gs[0].ID)
	if err != nil {
		t.Fatalf("the gate is gone after the storm: %v", err)
	}
	if after.State.OOMKilled || after.RestartCount != before.RestartCount || after.State.StartedAt != before.State.StartedAt || !after.State.Running {
		t.Errorf("the gate under the storm: OOM-killed %v, restarts %d then %d, started %s then %s, running %v",
			after.State.OOMKilled, before.RestartCount, after.RestartCount, before.State.StartedAt, after.State.StartedAt, after.State.Running)
	}
	if strings.Contains(p.errs(), "gate exited; starting it again") {
		t.Errorf("Mother restarted the gate during the storm")
	}
	refused := intField(storm, "closed-by-gate") > 0 || intField(storm, "failed") > 0
	if !refused {
		t.Errorf("the gate refused none of 2,000 connections from one chick:\n%s", storm)
	}
	if !hostileStormReported(p.out(), p.errs(), gateLogs(api, gs[0].ID)) {
		t.Errorf("the refusal was not reported (channel, Mother's log or the gate's):\n%s", tail(p.errs(), 2000))
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("exit %d\n%s", code, tail(p.errs(), 3000))
	}
}

// gateLogs is what the gate container logged.
func gateLogs(api *client.Client, id string) string {
	rc, err := api.ContainerLogs(context.Background(), id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return ""
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 4<<20))
	return string(b)
}

// hostileEgress: a name the operator listed resolves to a private
// address listed with a port (the test's web container, which also
// listens on 9090): that port is reachable through the proxy (the
// control), the other port is refused; listed names that resolve to
// IPv4-mapped IPv6 forms of that private address (at the port not
// listed) and of loopback are refused; a chick's
// request_access for a wildcard is refused without being posted.
func hostileEgress(t *testing.T, api *client.Client) {
	o := makeOutside(t, api)
	ip := o.run(t, "twoports", `(while true; do echo HELLO-OTHER-PORT | nc -l -p 9090; done) & mkdir -p /tmp/www && echo HELLO-WEB > /tmp/www/hello.txt && exec httpd -f -p 8080 -h /tmp/www`)
	crlf := `\r\n`
	h := newHostileModel(api)
	h.row("egress",
		plainCall("ports",
			proxyRequest("listed-port", "GET http://port.test:8080/hello.txt HTTP/1.0"+crlf+crlf)+
				proxyRequest("other-port", "CONNECT port.test:9090 HTTP/1.1"+crlf+crlf)+
				proxyRequest("mapped", "CONNECT mapped.test:9090 HTTP/1.1"+crlf+crlf)+
				proxyRequest("mapped-loopback", "CONNECT loopmapped.test:8080 HTTP/1.1"+crlf+crlf)),
		attackCall("wildcard", "access", "-dest '*.example.com'"),
	)
	fake := ollamatest.NewFunc(h.turn)
	defer fake.Close()
	p, _ := hostileMother(t, api, h, fake, nil, map[string]any{"egress": map[string]any{
		"allow":          []string{ip + ":8080", "port.test", "mapped.test", "loopmapped.test"},
		"hosts":          map[string]any{"port.test": ip, "mapped.test": "::ffff:" + ip, "loopmapped.test": "::ffff:127.0.0.1"},
		"requestTimeout": "8s",
	}})
	io.WriteString(p.stdin, "egress ports\n")
	p.waitOut(t, "Done: ", 2*time.Minute)
	out := doneOf(p.out(), "listed-port")
	if a := answerOf(out, "listed-port"); !strings.Contains(a, "HELLO-WEB") {
		t.Errorf("the control: the listed address's listed port was not reached: %q", a)
	}
	if a := answerOf(out, "other-port"); strings.Contains(a, "HELLO-OTHER-PORT") || !strings.Contains(a, "403") {
		t.Errorf("another port of the listed address %s: the proxy answered %q, want a 403", ip, a)
	}
	// The mapped forms: of the listed address at a port not listed, and
	// of loopback.
	for name, addr := range map[string]string{"mapped": "[::ffff:" + ip + "]:9090", "mapped-loopback": "[::ffff:127.0.0.1]:8080"} {
		if a := answerOf(out, name); strings.Contains(a, "HELLO") || !strings.Contains(a, "403") {
			t.Errorf("%s: a listed name resolving to %s: the proxy answered %q, want a 403", name, addr, a)
		}
	}
	wild := regexp.MustCompile(`ACCESS \*\.example\.com [^\n]*`).FindString(out)
	if wild == "" || strings.Contains(wild, "granted=true") {
		t.Errorf("a wildcard request_access: %q, want refused", wild)
	}
	if strings.Contains(p.out(), "asks to reach") {
		t.Errorf("a chick's wildcard request was put to the admins:\n%s", p.out())
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("exit %d\n%s", code, tail(p.errs(), 3000))
	}
}

// hostileApprovals: a chick asks for one destination and the admin types
// the bare `allow <id>` its post shows: approved (the control). Then it
// asks for two at once and the admin types the same: neither is
// approved and the reply lists both; `allow <id> <destination>` then
// approves exactly that one.
func hostileApprovals(t *testing.T, api *client.Client) {
	h := newHostileModel(api)
	h.row("approvals",
		attackCall("one", "access", "-dest one.test:443"),
		attackCall("two", "access", "-dest two.test:443 -dest three.test:443"),
	)
	fake := ollamatest.NewFunc(h.turn)
	defer fake.Close()
	p, _ := hostileMother(t, api, h, fake, nil, map[string]any{"egress": map[string]any{"requestTimeout": "25s"}})
	io.WriteString(p.stdin, "approvals please\n")
	id := accessID(t, p, 1)
	io.WriteString(p.stdin, "allow "+id+"\n")
	accessID(t, p, 3)
	mark := len(p.out())
	io.WriteString(p.stdin, "allow "+id+"\n")
	// Mother's answer to the bare allow, then the precise one.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.out()[mark:], "three.test") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	reply := p.out()[mark:]
	io.WriteString(p.stdin, "allow "+id+" three.test:443\n")
	p.waitOut(t, "Done: ", 2*time.Minute)
	out := doneOf(p.out(), "ACCESS one.test")
	if !regexp.MustCompile(`ACCESS one\.test:443 granted=true`).MatchString(out) {
		t.Errorf("the control: with one request pending, a bare allow did not approve it:\n%s", out)
	}
	if !strings.Contains(reply, "two.test:443") || !strings.Contains(reply, "three.test:443") {
		t.Errorf("the reply to a bare allow with two pending does not list both:\n%s", reply)
	}
	if regexp.MustCompile(`ACCESS two\.test:443 granted=true`).MatchString(out) {
		t.Errorf("with two pending, the bare allow (or the one naming three.test) approved two.test:\n%s", out)
	}
	if !regexp.MustCompile(`ACCESS three\.test:443 granted=true`).MatchString(out) {
		t.Errorf("allow %s three.test:443 did not approve three.test:\n%s", id, out)
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("exit %d\n%s", code, tail(p.errs(), 3000))
	}
}

// hostileDisk: with chicks.resources.workspaceBytes 64 MiB, a chick
// writes 1 GiB into /workspace: the write fails (ENOSPC) or the chick is
// stopped, and what its container holds on the engine's disk is at most
// the limit and some slack. The control: 16 MiB, under the limit, is
// written.
func hostileDisk(t *testing.T, api *client.Client) {
	h := newHostileModel(api)
	h.row("disk",
		plainCall("write", "dd if=/dev/zero of=/workspace/small bs=1M count=16 2>/dev/null && echo SMALL-OK; "+
			"dd if=/dev/zero of=/workspace/big bs=1M count=1024 2>/tmp/dd.err; echo \"BIG-EXIT $? $(tail -n 1 /tmp/dd.err)\"; ls -l /workspace/big | awk '{print \"BIG-SIZE\", $5}'"),
		plainCall("measured", "echo measured"),
	)
	var mu sync.Mutex
	var onDisk int64 = -1
	var where string
	var measureErr error
	h.onTurn["disk"] = func(l leaked, done int) {
		if done == 1 {
			n, w, err := hostBytes(api, l.Container)
			mu.Lock()
			onDisk, where, measureErr = n, w, err
			mu.Unlock()
		}
	}
	fake := ollamatest.NewFunc(h.turn)
	defer fake.Close()
	res := map[string]any{"memory": "256m", "cpus": 1, "pids": 128, "tmpfs": "32m"}
	for k, v := range hostileDiskResources {
		res[k] = v
	}
	p, _ := hostileMother(t, api, h, fake, nil, map[string]any{"resources": res})
	io.WriteString(p.stdin, "disk fill\n")
	p.waitOut(t, "Done: ", 2*time.Minute)
	out := p.out()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("disk: %s; %s; on the engine's disk %d bytes (%s)", regexp.MustCompile(`BIG-EXIT [^\n]*`).FindString(out), regexp.MustCompile(`BIG-SIZE [^\n]*`).FindString(out), onDisk, where)
	if !strings.Contains(out, "SMALL-OK") {
		t.Errorf("the control: 16 MiB under the limit was not written:\n%s", tail(out, 2000))
	}
	stopped := strings.Contains(out, "stopped") && strings.Contains(out, "workspace")
	if strings.Contains(out, "BIG-EXIT 0 ") && !stopped {
		t.Errorf("1 GiB was written into /workspace with a limit of %d bytes:\n%s", hostileWorkspace, tail(out, 2000))
	}
	if measureErr != nil {
		t.Errorf("measure the chick's disk: %v", measureErr)
	}
	if onDisk > hostileWorkspace+16<<20 {
		t.Errorf("the chick's container holds %d bytes on the engine's disk (%s), want at most the limit %d and 16 MiB", onDisk, where, hostileWorkspace)
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("exit %d\n%s", code, tail(p.errs(), 3000))
	}
}

// rssPeak samples a process's RSS from its first start until end: the
// RSS at the start, then the highest seen.
type rssPeak struct {
	every      time.Duration
	once       sync.Once
	stop, done chan struct{}
	mu         sync.Mutex
	base, peak int64
}

func newRSSPeak(every time.Duration) *rssPeak {
	return &rssPeak{every: every, stop: make(chan struct{}), done: make(chan struct{})}
}

// start takes the base and samples pid until end; only the first call
// counts.
func (s *rssPeak) start(pid int) {
	s.once.Do(func() {
		s.base = vmRSS(pid)
		go func() {
			defer close(s.done)
			for {
				r := vmRSS(pid)
				s.mu.Lock()
				s.peak = max(s.peak, r)
				s.mu.Unlock()
				select {
				case <-s.stop:
					return
				case <-time.After(s.every):
				}
			}
		}()
	})
}

// end stops the sampling (once started) and says the base and the peak.
func (s *rssPeak) end() (base, peak int64) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.base, s.peak
}
