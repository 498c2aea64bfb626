package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/mother-chat/mother/internal/testenv"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/metrics"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/statuspage"
)

const (
	metricsToken = "metrics-token-SECRET3-0123456789"
	mcpSecret    = "notes-env-SECRET4"
)

// chromium finds Debian's Chromium (bash .ci/ensure-tools installs it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Unavailable(t, "no Chromium to drive the status page (bash .ci/ensure-tools installs Debian's chromium)")
	return ""
}

// browser is a headless Chromium that sends the metrics token with every
// request. When the test fails it saves a screenshot and the page's HTML
// in $MOTHER_TEST_ARTIFACTS (default: a new directory under the system's
// temporary directory, kept), and says where.
func browser(t *testing.T, token string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		if t.Failed() {
			saveArtifacts(t, ctx)
		}
		cancel()
		cancelAlloc()
	})
	// Every request of this tab, the page's own fetches included, carries
	// the token.
	headers := func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return chromedp.Void{}, err
		}
		_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": "Bearer " + token}})
		return chromedp.Void{}, err
	}
	if err := chromedp.Do(ctx, headers); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

func saveArtifacts(t *testing.T, ctx context.Context) {
	dir := os.Getenv("MOTHER_TEST_ARTIFACTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "mother-test-artifacts-"); err != nil {
			t.Logf("no artifacts: %v", err)
			return
		}
	}
	os.MkdirAll(dir, 0o755)
	name := regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "_")
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Logf("no screenshot: %v", err)
	}
	html, _ := chromedp.Run(sctx, chromedp.OuterHTML(chromedp.CSS("html")))
	shot, page := filepath.Join(dir, name+".png"), filepath.Join(dir, name+".html")
	os.WriteFile(shot, png, 0o644)
	os.WriteFile(page, []byte(html), 0o644)
	t.Logf("status page at the failure: %s and %s", shot, page)
}

// dom is the whole document as the browser has it now.
func dom(t *testing.T, ctx context.Context) string {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	html, err := chromedp.Run(rctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil {
		t.Fatalf("read the page: %v", err)
	}
	return html
}

// waitDOM waits until the page, as the browser has it (never reloaded),
// satisfies ok.
func waitDOM(t *testing.T, ctx context.Context, what string, d time.Duration, ok func(html string) bool) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		html := dom(t, ctx)
		if ok(html) {
			return html
		}
		if time.Now().After(deadline) {
			t.Fatalf("the status page never showed %s; it shows:\n%s", what, html)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func noSecrets(t *testing.T, where, s string) {
	t.Helper()
	for _, sec := range []string{secretKey, secretBot, metricsToken, mcpSecret} {
		if strings.Contains(s, sec) {
			t.Errorf("%s carries the secret %q", where, sec)
		}
	}
}

// momctlStream runs the real momctl in the background and collects its
// output line by line.
type momctlStream struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	done  chan error
}

func startMomctl(t *testing.T, data string, args ...string) *momctlStream {
	t.Helper()
	s := &momctlStream{done: make(chan error, 1)}
	s.cmd = exec.Command(buildMomctl(t), append([]string{"--socket", filepath.Join(data, "mother.sock")}, args...)...)
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stderr = s.cmd.Stdout
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.mu.Lock()
			s.lines = append(s.lines, sc.Text())
			s.mu.Unlock()
		}
		s.done <- s.cmd.Wait()
	}()
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			s.cmd.Process.Kill()
		}
	})
	return s
}

func (s *momctlStream) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

func (s *momctlStream) wait(t *testing.T, d time.Duration) string {
	t.Helper()
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("momctl %s: %v\n%s", strings.Join(s.cmd.Args[1:], " "), err, s.text())
		}
	case <-time.After(d):
		t.Fatalf("momctl %s did not end; it printed:\n%s", strings.Join(s.cmd.Args[1:], " "), s.text())
	}
	noRace(t, "momctl", s.text())
	return s.text()
}

// TestStatusPageFollowsAChick: the real mother serves the status page
// on her metrics listener, behind the token; a headless Chromium loads it
// before any chick exists and, without a reload, sees a real chick appear
// (running, with its last event) and disappear when it has finished. The
// page and its JSON carry none of the configuration's secrets. Meanwhile
// the real momctl tails the chick's events as they happen and watches the
// chicks table.
func TestStatusPageFollowsAChick(t *testing.T) {
	t.Parallel()
	ctx := browser(t, metricsToken)
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	listen := freePort(t)
	data, _ := chickData(t, api, map[string]any{
		"metrics":   map[string]any{"listen": listen, "token": metricsToken},
		"providers": map[string]any{"anthropic": map[string]any{"apiKey": secretKey}},
		"mcpServers": map[string]any{"notes": map[string]any{"command": notesBinary(t), "args": []string{"--file", filepath.Join(t.TempDir(), "notes.json")},
			"env": map[string]any{"NOTES_KEY": mcpSecret}}},
	})
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	defer free()
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		switch r.Model {
		case motherModel:
			if !hasToolResult(r) {
				return motherTurn("Say hello from the shell, then wait.")
			}
			return ollamatest.Turn{Text: "A chick is on it."}
		case chickModel:
			if len(toolResults(r)) == 0 {
				return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "bash", Args: map[string]any{"label": "saying hello", "command": "echo hello-from-the-chick"}}}}
			}
			<-release
			return ollamatest.Turn{Text: "All done.", PromptTokens: 50, OutputTokens: 7}
		}
		return ollamatest.Turn{Status: 404, Error: "unknown model " + r.Model}
	})
	defer fake.Close()

	p := startChickMother(t, data, chickEnv(fake))
	base := "http://" + listen
	waitHTTP(t, base+"/healthz", 30*time.Second)
	// The listener needs the token.
	for _, h := range []string{"", "Bearer wrong-token-0123456789", "Basic " + "Zm9vOmJhcg=="} {
		req, _ := http.NewRequest(http.MethodGet, base+"/status", nil)
		if h != "" {
			req.Header.Set("Authorization", h)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET /status with %q: %s, want 401", h, resp.Status)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.SetBasicAuth("prometheus", metricsToken)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /metrics with basic auth: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(rctx, chromedp.Navigate(base+"/status"), chromedp.WaitVisible(chromedp.CSS("#chicks"))); err != nil {
		t.Fatalf("load the status page: %v", err)
	}
	first := waitDOM(t, ctx, "the adapter, the Docker host, the tool server and no chick", time.Minute, func(h string) bool {
		return strings.Contains(h, `data-adapter="cli"`) && strings.Contains(h, `data-host="local" class="state-up"`) &&
			strings.Contains(h, `data-tools="notes" class="state-running"`) && strings.Contains(h, "No chicks alive.")
	})
	noSecrets(t, "the status page", first)

	io.WriteString(p.stdin, "please say hello\n")
	chickRow := regexp.MustCompile(`<tr data-chick="(c-[0-9a-f]+)" class="state-running"><td><code>c-[0-9a-f]+</code></td><td class="state">running</td><td>cli/local</td><td>local</td><td>local</td><td class="num">[\d,]+</td><td>\d+[smh]\S*</td><td>([^<]+)`)
	running := waitDOM(t, ctx, "the chick running, after its tool call", 3*time.Minute, func(h string) bool {
		m := chickRow.FindStringSubmatch(h)
		return m != nil && (strings.Contains(m[2], "tool bash") || strings.Contains(m[2], "waiting for its model") || strings.Contains(m[2], "message"))
	})
	id := chickRow.FindStringSubmatch(running)[1]
	if !strings.Contains(running, "1 alive, 0 queued") || !regexp.MustCompile(`data-host="local" class="state-up">.*?1/\d+`).MatchString(running) {
		t.Errorf("the page does not count the chick on its host:\n%s", running)
	}
	noSecrets(t, "the status page with a chick", running)

	// The real momctl, while the chick runs: its events as they happen,
	// and the chicks table three times.
	tail := startMomctl(t, data, "chicks", "tail", id)
	tailJSON := startMomctl(t, data, "chicks", "tail", "--json", id)
	watch := startMomctl(t, data, "chicks", "watch", "--count", "3", "--interval", "300ms")
	watchJSON := startMomctl(t, data, "chicks", "watch", "--json", "--count", "2", "--interval", "300ms")
	frames := watch.wait(t, time.Minute)
	if n := strings.Count(frames, "Every 300ms: momctl chicks ls"); n != 3 || strings.Count(frames, id) != 3 || !strings.Contains(frames, "HOST") {
		t.Errorf("momctl chicks watch --count 3 printed %d frames:\n%s", n, frames)
	}
	jf := strings.Split(strings.TrimSpace(watchJSON.wait(t, time.Minute)), "\n")
	for _, l := range jf {
		var list []lsChick
		if err := json.Unmarshal([]byte(l), &list); err != nil || len(list) != 1 || list[0].ID != id || list[0].State != "running" {
			t.Errorf("momctl chicks watch --json line %q: %v", l, err)
		}
	}
	if len(jf) != 2 {
		t.Errorf("momctl chicks watch --json --count 2 printed %d lines", len(jf))
	}
	waitForWithin(t, "momctl chicks tail to print the tool call", time.Minute, func() bool { return strings.Contains(tail.text(), "tool_start") })
	if ids, code := momctl(t, data, "chicks", "ls", "-q"); code != 0 || strings.TrimSpace(ids) != id {
		t.Errorf("momctl chicks ls -q = %q (exit %d), want %s", ids, code, id)
	}

	free()
	p.waitOut(t, "All done.", 2*time.Minute)
	gone := waitDOM(t, ctx, "the chick gone", 2*time.Minute, func(h string) bool {
		return !strings.Contains(h, `data-chick="`+id+`"`) && strings.Contains(h, "No chicks alive.")
	})
	noSecrets(t, "the status page after the chick", gone)
	if !regexp.MustCompile(`tier local today</td><td class="used"><span class="amount">[1-9][\d,]* tokens, no cap</span>`).MatchString(gone) {
		t.Errorf("the page does not show the tokens the chick used today:\n%s", gone)
	}
	// It is now among the recent chicks, done, with its tokens.
	recentRow := regexp.MustCompile(`<tr data-recent-chick="` + id + `" class="state-done"><td><code>` + id + `</code></td><td class="state">done</td><td>cli/local</td><td>local</td><td>local</td><td class="outcome"><span class="reason">done</span></td><td class="num">[1-9][\d,]*</td>`)
	if !recentRow.MatchString(gone) {
		t.Errorf("the page does not list the chick under recent chicks, done:\n%s", gone)
	}

	events := tail.wait(t, time.Minute)
	for _, re := range []string{`#1\s+\S+\s`, `tool_start\s+bash: saying hello`, `tool_end\s+bash ok in \S+: hello-from-the-chick`, `message_end\s+All done\.`, `run_end\s+done`, `chick ` + id + ` done: `} {
		if !regexp.MustCompile(re).MatchString(events) {
			t.Errorf("momctl chicks tail does not match %s:\n%s", re, events)
		}
	}
	if strings.Contains(events, "message_delta") {
		t.Errorf("momctl chicks tail printed deltas without --deltas:\n%s", events)
	}
	lines := strings.Split(strings.TrimSpace(tailJSON.wait(t, time.Minute)), "\n")
	var seqs []uint64
	for _, l := range lines[:len(lines)-1] {
		var ev struct {
			Seq   uint64 `json:"seq"`
			Event struct {
				Type string `json:"type"`
			} `json:"event"`
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Event.Type == "" {
			t.Errorf("momctl chicks tail --json line %q: %v", l, err)
		}
		seqs = append(seqs, ev.Seq)
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Errorf("momctl chicks tail --json sequence numbers %v, want 1, 2, ... without gaps", seqs)
			break
		}
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, `"ended":`) || !strings.Contains(last, id) {
		t.Errorf("momctl chicks tail --json last line %q, want the chick as it ended", last)
	}
	// A chick that ended: its stored events, then its end, at once.
	again, code := momctl(t, data, "chicks", "tail", id)
	if code != 0 || again != events+"\n" {
		t.Errorf("momctl chicks tail of the ended chick (exit %d):\n%s\nwant what the live tail printed:\n%s", code, again, events)
	}
	if out, code := momctl(t, data, "chicks", "tail", "c-nothere"); code != 1 || !strings.Contains(out, `no chick "c-nothere"`) {
		t.Errorf("momctl chicks tail of an unknown chick: exit %d, %q", code, out)
	}

	// /status.json, fetched by the browser with the token: the same facts,
	// no secret.
	if err := chromedp.Do(rctx, chromedp.Navigate(base+"/status.json")); err != nil {
		t.Fatalf("load /status.json: %v", err)
	}
	js, err := chromedp.Run(rctx, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatalf("load /status.json: %v", err)
	}
	noSecrets(t, "/status.json", js)
	var snap struct {
		Chicks       []any `json:"chicks"`
		RecentChicks []struct {
			ID     string `json:"id"`
			State  string `json:"state"`
			Tokens int64  `json:"tokens"`
		} `json:"recentChicks"`
		ToolServers []struct {
			Name  string   `json:"name"`
			Tools []string `json:"tools"`
		} `json:"toolServers"`
		Hosts []struct {
			Name string `json:"name"`
			Up   bool   `json:"up"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(js), &snap); err != nil || len(snap.Chicks) != 0 || len(snap.Hosts) != 1 || !snap.Hosts[0].Up ||
		len(snap.ToolServers) != 1 || len(snap.ToolServers[0].Tools) == 0 ||
		len(snap.RecentChicks) != 1 || snap.RecentChicks[0].ID != id || snap.RecentChicks[0].State != "done" || snap.RecentChicks[0].Tokens == 0 {
		t.Errorf("/status.json (%v):\n%s", err, js)
	}
	p.stdin.Close()
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, p.errs())
	}
	noSecrets(t, "Mother's log", p.errs())
}

// TestStatusPageShowsAFailedChick: a chick whose tier's model the model
// server does not have fails at its first call. It is gone from the
// chicks alive, and the real mother's status page and status.json list it
// under the recent chicks: failed, with the error, its channel, tier and
// host. (A chick whose image is missing is no longer accepted at all:
// TestChickRefusedWhileImageMissing.)
func TestStatusPageShowsAFailedChick(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	listen := freePort(t)
	data, _ := chickData(t, api, map[string]any{"metrics": map[string]any{"listen": listen, "token": metricsToken}})
	var spawned sync.Once
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if r.Model != motherModel {
			return ollamatest.Turn{Status: 404, Error: "unknown model " + r.Model}
		}
		turn := ollamatest.Turn{Text: "A chick is on it."}
		if !hasToolResult(r) {
			spawned.Do(func() { turn = motherTurn("Count the files.") })
		}
		return turn
	})
	defer fake.Close()
	p := startChickMother(t, data, chickEnv(fake))
	base := "http://" + listen
	waitHTTP(t, base+"/healthz", 30*time.Second)
	fetch := func(path string) string {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+metricsToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s\n%s", path, resp.Status, body)
		}
		return string(body)
	}
	if page := fetch("/status"); !strings.Contains(page, "No chick has ended yet.") {
		t.Errorf("before any chick, the page lists recent ones:\n%s", page)
	}

	io.WriteString(p.stdin, "please count the files\n")
	var snap statuspage.Snapshot
	waitForWithin(t, "a chick under recent chicks in status.json", 2*time.Minute, func() bool {
		snap = statuspage.Snapshot{}
		return json.Unmarshal([]byte(fetch("/status.json")), &snap) == nil && len(snap.RecentChicks) > 0
	})
	c := snap.RecentChicks[0]
	if len(snap.RecentChicks) != 1 || len(snap.Chicks) != 0 || c.State != "failed" || c.Reason != "error" || c.Channel != "cli/local" || c.Tier != "local" || c.Host != "local" ||
		!strings.Contains(c.Outcome, `model "`+chickModel+`" not found`) ||
		c.EndedAt.IsZero() || c.EndedAt.Before(c.CreatedAt) {
		t.Errorf("status.json: chicks %+v, recent chicks %+v", snap.Chicks, snap.RecentChicks)
	}
	page := fetch("/status")
	row := regexp.MustCompile(`<tr data-recent-chick="` + c.ID + `" class="state-failed"><td><code>` + c.ID + `</code></td><td class="state">failed</td><td>cli/local</td><td>local</td><td>local</td>` +
		`<td class="outcome"><span class="reason">` + regexp.QuoteMeta(c.Reason) + `</span> [^<]*model &#34;` + chickModel + `&#34; not found`)
	if !row.MatchString(page) || !strings.Contains(page, "No chicks alive.") {
		t.Errorf("the status page does not list the failed chick under recent chicks:\n%s", page)
	}
	noSecrets(t, "the status page", page)
	p.waitOut(t, c.ID, time.Minute) // its end is told in the channel too
	p.stdin.Close()
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, p.errs())
	}
}

func waitHTTP(t *testing.T, url string, d time.Duration) {
	t.Helper()
	waitForWithin(t, "the metrics listener at "+url, d, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
}

func waitForWithin(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestModelServerDownIsVisible: with Mother's model server down, /healthz
// says degraded (503, with the reason) and the status page shows the
// server down, before any message finds out.
func TestModelServerDownIsVisible(t *testing.T) {
	t.Parallel()
	dead := deadURL(t)
	data := t.TempDir()
	listen := freePort(t)
	writeConfig(t, data, map[string]any{
		"metrics": map[string]any{"listen": listen},
		"grpc":    map[string]any{"listen": freePort(t)},
	})
	p := startMotherBinary(t, motherBin, data, []string{"MOTHER_OLLAMA_URL=" + dead})
	base := "http://" + listen
	var h metrics.Health
	waitForWithin(t, "/healthz degraded", 30*time.Second, func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		h = metrics.Health{}
		json.NewDecoder(resp.Body).Decode(&h)
		return resp.StatusCode == http.StatusServiceUnavailable && h.Status == "degraded"
	})
	if !strings.Contains(h.Reason, "Mother's model server does not answer") || !slices.Contains(h.ModelServersDown, "ollama") {
		t.Errorf("/healthz: %+v", h)
	}
	resp, err := http.Get(base + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	var snap statuspage.Snapshot
	json.NewDecoder(resp.Body).Decode(&snap)
	resp.Body.Close()
	if len(snap.ModelServers) != 1 || snap.ModelServers[0].Name != "ollama" || snap.ModelServers[0].State != "down" || !strings.Contains(snap.ModelServers[0].For, "mother") {
		t.Errorf("status.json model servers: %+v", snap.ModelServers)
	}
	p.stdin.Close()
	p.wait(t, time.Minute)
}
