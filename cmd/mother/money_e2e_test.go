package main

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/anthropic/anthropictest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// ledgerLine is what the money tests read of a usage ledger line.
type ledgerLine struct {
	Kind    string `json:"kind"`
	Chick   string `json:"chick"`
	Channel string `json:"channel"`
	Event   string `json:"event"`
	Model   string `json:"model"`
	Cost    int64  `json:"costMicroUSD"`
	RCost   int64  `json:"rcostMicroUSD"`
	Scope   string `json:"scope"`
	Level   int    `json:"level"`
	// Report marks the charge of what Mother's model read about an
	// ended chick (issue 42), a settlement of the chick's.
	Report bool `json:"report"`
	// In and Out are a call's tokens; ReserveIn and ReserveOut what a
	// reservation (kind "reserve") held.
	In         int64 `json:"in"`
	Out        int64 `json:"out"`
	ReserveIn  int64 `json:"rin"`
	ReserveOut int64 `json:"rout"`
}

// ledgerKind is what a ledger line counts as: its kind, or "report".
func (l ledgerLine) ledgerKind() string {
	if l.Report {
		return "report"
	}
	return l.Kind
}

// ledgerLines reads the ledger as it is now, while Mother may be writing
// it: a line that does not parse (one being written) is left out.
func ledgerLines(data string) []ledgerLine {
	files, _ := filepath.Glob(filepath.Join(data, "chicks", "usage", "*.jsonl"))
	var out []ledgerLine
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(b), "\n") {
			var l ledgerLine
			if json.Unmarshal([]byte(line), &l) == nil {
				out = append(out, l)
			}
		}
	}
	return out
}

func readLedger(t *testing.T, data string) []ledgerLine {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(data, "chicks", "usage", "*.jsonl"))
	var out []ledgerLine
	for _, f := range files {
		for _, line := range readLines(t, f) {
			var l ledgerLine
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatalf("ledger line %q: %v", line, err)
			}
			out = append(out, l)
		}
	}
	return out
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, _ := json.MarshalIndent(v, "", "  ")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestMotherDailyCapRefusesBeforeTheCall: Mother's model on Anthropic
// (priced by the default list price), her own daily cap a cent. Her
// first call would reserve far more (the prompt's bytes at $3 per million
// and 8,192 output tokens at $15): it is refused before anything is sent,
// the channel hears why and when it resets, the admins hear once that the
// cap stopped her, and the fake sees no request, then or after a restart.
func TestMotherDailyCapRefusesBeforeTheCall(t *testing.T) {
	t.Parallel()
	fake := anthropictest.New(anthropictest.Turn{Text: "Hello from Claude."})
	defer fake.Close()
	data := t.TempDir()
	writeJSON(t, filepath.Join(data, "config.json"), map[string]any{
		"model":     map[string]any{"provider": "anthropic", "id": "claude-sonnet-4-5"},
		"providers": map[string]any{"anthropic": map[string]any{"apiKey": anthropictest.APIKey, "baseURL": fake.URL}},
		"budgets":   map[string]any{"mother": map[string]any{"dailyUSD": 0.01}},
	})
	r := runMother(t, "hi\n", nil, "--cli", data)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		"Mother's own calls spent $0.00 of $0.01 today (budgets.mother.dailyUSD); the next call needs at least $0.",
		"For the admins: Spend cap reached: My own model use has used $0.00 of its $0.01 for today (budgets.mother.dailyUSD)",
		"my own model calls in every channel are stopped until it resets at 00:00",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Fatalf("the fake saw %d requests; the refused call was sent", n)
	}
	for _, l := range readLedger(t, data) {
		if l.Kind == "mother-reserve" || l.Kind == "mother" {
			t.Errorf("a refused call in the ledger: %+v", l)
		}
	}

	r = runMother(t, "hi again\n", nil, "--cli", data)
	if r.code != 0 || !strings.Contains(r.stdout, "(budgets.mother.dailyUSD); the next call needs") {
		t.Fatalf("after a restart: exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "Spend cap reached") {
		t.Errorf("the notice again after a restart:\n%s", r.stdout)
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("the fake saw %d requests after a restart", n)
	}
}

// TestPeriodicEventPausedAtItsCap: Mother on Anthropic's claude-sonnet-4-5
// (default list price $3/$15 per million), an output limit of 40,000
// tokens, and a periodic event with a daily cap of $0.18. Its run's first
// call fits (a prompt under 40 kB costs at most $0.12, and its output
// limit is lowered to what is left), calls a tool and costs $0.165 (5,000
// tokens in, 10,000 out); the second needs at least its prompt (the
// first's 5,000 tokens and what was added: about $0.016; the API's count
// of it, 5,000 and the margin, about $0.015) and 256 tokens of answer,
// which no longer fit, so it is refused before it is sent. The
// event is paused until the cap resets, the channel told so in the run's
// answer, and the pause is kept on disk. (The event runs at start because
// an accepted marker says a run of it was cut off, as after a crash: a
// periodic event's next minute would make the test wait.)
func TestPeriodicEventPausedAtItsCap(t *testing.T) {
	t.Parallel()
	fake := anthropictest.NewFunc(func(r anthropictest.Request) anthropictest.Turn {
		for _, m := range r.Messages {
			for _, b := range m.Content {
				if b.Type == "tool_result" {
					return anthropictest.Turn{Text: "[SILENT] nothing new", InputTokens: 5000, OutputTokens: 10}
				}
			}
		}
		return anthropictest.Turn{Calls: []anthropictest.Call{{Name: "list_events", Args: map[string]any{}}}, InputTokens: 5000, OutputTokens: 10000}
	})
	defer fake.Close()
	// The API counts a prompt as it charges it: the second call, short of
	// room, asks for the count, which says 5,000 tokens too.
	fake.SetCounter(func(anthropictest.Request) anthropictest.Count { return anthropictest.Count{InputTokens: 5000} })
	data := t.TempDir()
	writeJSON(t, filepath.Join(data, "config.json"), map[string]any{
		"model":     map[string]any{"provider": "anthropic", "id": "claude-sonnet-4-5", "maxOutputTokens": 40000},
		"providers": map[string]any{"anthropic": map[string]any{"apiKey": anthropictest.APIKey, "baseURL": fake.URL}},
		"budgets":   map[string]any{"mother": map[string]any{"eventDailyUSD": 0.18}},
	})
	writeJSON(t, filepath.Join(data, "workspace", "events", "check.json"), map[string]any{
		"type": "periodic", "channelId": "local", "text": "Check the inbox.", "schedule": "0 3 * * *", "timezone": "UTC",
	})
	writeJSON(t, filepath.Join(data, "state", "events", "accepted", "check.json"), map[string]any{"due": time.Now().Add(-time.Minute)})

	p := startChickMother(t, data, []string{"MOTHER_GRPC_LISTEN=127.0.0.1:0"})
	p.waitOut(t, "I paused event check.json until ", time.Minute)
	p.stdin.Close()
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, p.errs())
	}
	out := p.out()
	for _, want := range []string{"budgets.mother.eventDailyUSD", "event check.json spent $0.17 of $0.18 today", "It runs again then by itself."} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the fake saw %d requests, want the first call only", len(reqs))
	}
	if b := len(reqs[0].SystemText()); b > 40000 {
		t.Fatalf("the prompt is %d bytes: the test's arithmetic assumes it is well under 50 kB", b)
	}
	var spent int64
	for _, l := range readLedger(t, data) {
		if l.Kind == "mother" {
			if l.Event != "check.json" || l.Channel != "cli/local" || l.Model != "claude-sonnet-4-5" {
				t.Errorf("settlement %+v", l)
			}
			spent += l.Cost
		}
	}
	if spent != 5000*3+10000*15 {
		t.Errorf("the ledger says the event spent %d micro-dollars, want 165000", spent)
	}
	kept, err := os.ReadFile(filepath.Join(data, "state", "events", "health", "check.json"))
	if err != nil || !strings.Contains(string(kept), `"paused":true`) || !strings.Contains(string(kept), `"until":"`) {
		t.Fatalf("the pause is not kept: %s, %v", kept, err)
	}
	if !strings.Contains(p.errs(), "periodic event paused") {
		t.Errorf("the log does not say it:\n%s", p.errs())
	}
}

// TestSpendWarningsOnceEach: Mother on a local model priced by the owner
// (prices "ollama/*": output at $10 per million, the electricity of the
// answers), an output limit of 1,000 tokens (a cent a call, reserved and
// spent: every answer is 1,000 tokens), and a cap of five cents on her
// own calls in the channel. The fourth answer brings it to 80%: one
// warning. The fifth spends it all; the sixth and seventh are refused
// before they are sent: one "reached". After a restart the spend is
// replayed from the ledger: the eighth is refused too, and neither notice
// comes again.
func TestSpendWarningsOnceEach(t *testing.T) {
	t.Parallel()
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		return ollamatest.Turn{Text: "answer to " + r.LastUser(), PromptTokens: 50, OutputTokens: 1000}
	})
	defer fake.Close()
	data := t.TempDir()
	writeJSON(t, filepath.Join(data, "config.json"), map[string]any{
		"model":    map[string]any{"maxOutputTokens": 1000},
		"prices":   map[string]any{"ollama/*": map[string]any{"inputPerMTok": 0, "outputPerMTok": 10}},
		"budgets":  map[string]any{"mother": map[string]any{"channelDailyUSD": 0.05}},
		"dispatch": map[string]any{"queueSize": 10},
	})
	env := []string{"MOTHER_OLLAMA_URL=" + fake.URL, "MOTHER_MODEL_ID=tiny"}
	r := runMother(t, "m1\nm2\nm3\nm4\nm5\nm6\nm7\n", env, "--cli", data)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	warn := "Spend warning: My own model use in this channel has used 80% of its daily cap ($0.04 of $0.05, budgets.mother.channelDailyUSD)."
	reached := "Spend cap reached: My own model use in this channel has used $0.05 of its $0.05 for today (budgets.mother.channelDailyUSD)"
	if n := strings.Count(r.stdout, warn); n != 1 {
		t.Errorf("%d warnings at 80%%, want 1:\n%s", n, r.stdout)
	}
	if n := strings.Count(r.stdout, reached); n != 1 {
		t.Errorf("%d notices at the cap, want 1:\n%s", n, r.stdout)
	}
	if n := strings.Count(r.stdout, "answer to "); n != 5 {
		t.Errorf("%d answers, want 5:\n%s", n, r.stdout)
	}
	if n := strings.Count(r.stdout, "Mother's own calls in channel cli/local spent $0.05 of $0.05 today"); n != 2 {
		t.Errorf("%d refusals, want 2:\n%s", n, r.stdout)
	}
	if n := len(fake.Requests()); n != 5 {
		t.Fatalf("the fake saw %d requests, want 5", n)
	}
	var spent int64
	for _, l := range readLedger(t, data) {
		spent += l.Cost
	}
	if spent != 50000 {
		t.Errorf("the ledger holds %d micro-dollars, want 50000", spent)
	}

	r = runMother(t, "m8\n", env, "--cli", data)
	if r.code != 0 || !strings.Contains(r.stdout, "(budgets.mother.channelDailyUSD); the next call needs") {
		t.Fatalf("after a restart: exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "Spend ") {
		t.Errorf("a notice again after a restart:\n%s", r.stdout)
	}
	if n := len(fake.Requests()); n != 5 {
		t.Errorf("the fake saw %d requests after a restart, want still 5", n)
	}
}

// TestChickAndMotherShareAChannelsMoneyCap: a channel's money cap of three
// cents (budgets.channelDailyUSD), a cent a call for Mother and her chick
// alike (output at $10 per million, 1,000-token answers). Mother's two
// calls (spawn_chick, then her words) and the chick's first spend it;
// the chick's second call is refused before it is sent and the chick ends
// on the channel's cap; Mother's next message is refused too. The channel
// heard the 80% warning and the stop once each.
func TestChickAndMotherShareAChannelsMoneyCap(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	data, _ := chickData(t, api, map[string]any{
		"prices":  map[string]any{"ollama/*": map[string]any{"inputPerMTok": 0, "outputPerMTok": 10}},
		"budgets": map[string]any{"channelDailyUSD": 0.03},
		"model":   map[string]any{"maxOutputTokens": 1000},
	})
	b, _ := os.ReadFile(filepath.Join(data, "config.json"))
	var cfg map[string]any
	json.Unmarshal(b, &cfg)
	tier := cfg["chicks"].(map[string]any)["tiers"].(map[string]any)["local"].(map[string]any)
	tier["maxOutputTokens"] = 1000
	writeConfig(t, data, cfg)
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if r.Model == motherModel {
			if !hasToolResult(r) {
				t := motherTurn("Count the files.")
				t.OutputTokens = 1000
				return t
			}
			return ollamatest.Turn{Text: "A chick is on it.", OutputTokens: 1000}
		}
		return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "bash", Args: map[string]any{"label": "count", "command": "ls | wc -l"}}}, PromptTokens: 100, OutputTokens: 1000}
	})
	defer fake.Close()
	p := startChickMother(t, data, chickEnv(fake))
	io.WriteString(p.stdin, "count the files\n")
	p.waitOut(t, "budgets.channelDailyUSD", 3*time.Minute)
	p.waitOut(t, "Spend cap reached: This channel has used $0.03 of its $0.03 for today (budgets.channelDailyUSD)", time.Minute)
	waitRunningGone(t, data, 2*time.Minute)
	io.WriteString(p.stdin, "and now?\n")
	p.waitOut(t, "Channel cli/local spent $0.03 of $0.03 today (budgets.channelDailyUSD)", time.Minute)
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, p.errs())
	}
	out := p.out()
	if n := strings.Count(out, "Spend warning: This channel has used "); n != 1 {
		t.Errorf("%d warnings at 80%%, want 1:\n%s", n, out)
	}
	if n := strings.Count(out, "Spend cap reached"); n != 1 {
		t.Errorf("%d notices at the cap, want 1:\n%s", n, out)
	}
	mother, chick := 0, 0
	for _, r := range fake.Requests() {
		if r.Model == motherModel {
			mother++
		} else {
			chick++
		}
	}
	if mother != 2 || chick != 1 {
		t.Errorf("the fake saw %d calls of Mother's and %d of the chick's, want 2 and 1", mother, chick)
	}
	var own, chicks int64
	for _, l := range readLedger(t, data) {
		switch l.Kind {
		case "mother":
			own += l.Cost
		case "":
			chicks += l.Cost
		}
	}
	if own != 20000 || chicks != 10000 {
		t.Errorf("ledger: Mother spent %d, the chick %d micro-dollars; want 20000 and 10000", own, chicks)
	}
}

// waitRunningGone waits until momctl lists no running chick.
func waitRunningGone(t *testing.T, data string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		out, code := momctl(t, data, "chicks", "ls")
		if code == 0 && !strings.Contains(out, "running") && !strings.Contains(out, "starting") && !strings.Contains(out, "queued") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a chick still runs after %s:\n%s", d, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestUsageAndSpendChartFromAKnownLedger: a ledger written by hand for
// three of the last fourteen days (and one older day, out of range), the
// real Mother on it: momctl usage sums it by day, tier and model with the
// right totals and costs, and the status page's spend chart, parsed as
// XML, has one bar segment per day and series with those costs, drawn to
// scale.
func TestUsageAndSpendChartFromAKnownLedger(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	listen := freePort(t)
	writeConfig(t, data, map[string]any{
		"metrics": map[string]any{"listen": listen},
		"grpc":    map[string]any{"listen": freePort(t)},
		"chicks":  map[string]any{"tiers": map[string]any{"claude": map[string]any{"provider": "ollama", "model": "stand-in"}, "local": map[string]any{"provider": "ollama", "model": "qwen3:14b"}}},
	})
	now := time.Now()
	day := func(back int) string { return now.AddDate(0, 0, -back).Format("2006-01-02") }
	ledger := map[int][]string{
		0: {
			`{"ts":"` + now.Format(time.RFC3339) + `","call":"a","chick":"c-1","channel":"cli/local","tier":"claude","provider":"anthropic","model":"claude-sonnet-4-5","in":100000,"out":10000,"costMicroUSD":450000}`,
			`{"ts":"` + now.Format(time.RFC3339) + `","kind":"mother","call":"b","chick":"","channel":"cli/local","tier":"","provider":"anthropic","model":"claude-haiku-4-5","in":50000,"out":2000,"costMicroUSD":60000}`,
			`{"ts":"` + now.Format(time.RFC3339) + `","kind":"warned","chick":"","channel":"","tier":"","model":"","in":0,"out":0,"scope":"tier","name":"claude","unit":"usd","level":80}`,
		},
		3: {
			`{"ts":"` + now.AddDate(0, 0, -3).Format(time.RFC3339) + `","call":"c","chick":"c-2","channel":"cli/local","tier":"claude","provider":"anthropic","model":"claude-sonnet-4-5","in":200000,"out":20000,"costMicroUSD":900000}`,
			`{"ts":"` + now.AddDate(0, 0, -3).Format(time.RFC3339) + `","call":"d","chick":"c-3","channel":"cli/local","tier":"local","provider":"ollama","model":"qwen3:14b","in":7000,"out":3000}`,
		},
		13: {
			`{"ts":"` + now.AddDate(0, 0, -13).Format(time.RFC3339) + `","kind":"mother","call":"e","chick":"","channel":"cli/local","tier":"","event":"check.json","provider":"anthropic","model":"claude-haiku-4-5","in":10000,"out":1000,"costMicroUSD":15000}`,
		},
		20: {
			`{"ts":"` + now.AddDate(0, 0, -20).Format(time.RFC3339) + `","call":"f","chick":"c-0","channel":"cli/local","tier":"claude","provider":"anthropic","model":"claude-sonnet-4-5","in":1,"out":1,"costMicroUSD":99000000}`,
		},
	}
	for back, lines := range ledger {
		path := filepath.Join(data, "chicks", "usage", day(back)+".jsonl")
		os.MkdirAll(filepath.Dir(path), 0o700)
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := startMotherBinary(t, motherBin, data, []string{"MOTHER_OLLAMA_URL=" + deadURL(t)})
	base := "http://" + listen
	waitHTTP(t, base+"/healthz", 30*time.Second)

	out, code := momctl(t, data, "usage", "--days", "14", "--by", "tier", "--json")
	if code != 0 {
		t.Fatalf("momctl usage: exit %d\n%s", code, out)
	}
	var u struct {
		From, To string
		Rows     []struct {
			Key          string
			Calls        int64
			InputTokens  int64
			OutputTokens int64
			CostMicroUSD int64
		}
		Total struct {
			Calls        int64
			CostMicroUSD int64
		}
	}
	if err := json.Unmarshal([]byte(out), &u); err != nil {
		t.Fatalf("momctl usage --json: %v\n%s", err, out)
	}
	if u.From != day(13) || u.To != day(0) || u.Total.Calls != 5 || u.Total.CostMicroUSD != 1_425_000 || len(u.Rows) != 3 ||
		u.Rows[0].Key != "claude" || u.Rows[0].Calls != 2 || u.Rows[0].CostMicroUSD != 1_350_000 ||
		u.Rows[1].Key != "(Mother's own)" || u.Rows[1].CostMicroUSD != 75_000 || u.Rows[1].InputTokens != 60000 ||
		u.Rows[2].Key != "local" || u.Rows[2].CostMicroUSD != 0 || u.Rows[2].OutputTokens != 3000 {
		t.Errorf("momctl usage --by tier:\n%s", out)
	}
	out, code = momctl(t, data, "usage", "--days", "7", "--by", "model")
	for _, want := range []string{
		"Usage " + day(6) + " to " + day(0) + ", by model",
		"anthropic/claude-sonnet-4-5", "$1.35", "anthropic/claude-haiku-4-5", "$0.06", "ollama/qwen3:14b", "$0.00",
		"TOTAL", "$1.41",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("momctl usage --by model lacks %q (exit %d):\n%s", want, code, out)
		}
	}

	resp, err := http.Get(base + "/status/spend.svg")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "image/svg+xml" {
		t.Fatalf("/status/spend.svg: %d %s", resp.StatusCode, ct)
	}
	type bar struct {
		day, series string
		micro       int64
		height      float64
	}
	var (
		bars []bar
		top  float64
	)
	dec := xml.NewDecoder(resp.Body)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		a := map[string]string{}
		for _, at := range se.Attr {
			a[at.Name.Local] = at.Value
		}
		switch {
		case se.Name.Local == "svg":
			top, _ = strconv.ParseFloat(a["data-top-usd"], 64)
		case se.Name.Local == "rect" && a["data-day"] != "":
			micro, _ := strconv.ParseInt(a["data-micro-usd"], 10, 64)
			h, _ := strconv.ParseFloat(a["height"], 64)
			bars = append(bars, bar{a["data-day"], a["data-series"], micro, h})
		}
	}
	want := []bar{
		{day(13), "Mother's own", 15000, 0},
		{day(3), "claude", 900000, 0},
		{day(0), "Mother's own", 60000, 0},
		{day(0), "claude", 450000, 0},
	}
	if len(bars) != len(want) || top != 1 {
		t.Fatalf("chart: axis top $%g, bars %+v; want $1 and %+v", top, bars, want)
	}
	for i, w := range want {
		b := bars[i]
		if b.day != w.day || b.series != w.series || b.micro != w.micro {
			t.Errorf("bar %d = %+v, want %+v", i, b, w)
		}
		// Drawn to scale: the tallest day ($0.90) on a $1 axis.
		if ratio := b.height / bars[1].height; math.Abs(ratio-float64(b.micro)/900000) > 0.01 {
			t.Errorf("bar %d is %.3f of the $0.90 one, want %.3f", i, ratio, float64(b.micro)/900000)
		}
	}
	p.stdin.Close()
	p.wait(t, time.Minute)
}
