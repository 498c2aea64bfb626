package statuspage

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/model"
)

// The page as a browser parses it: these tests look at elements and
// their attributes, not at how the template happens to lay them out.

func parsePage(t *testing.T, body string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse the page: %v", err)
	}
	return doc
}

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

// find returns the elements under n for which ok holds, in document order.
func find(n *html.Node, ok func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for c := range n.Descendants() {
		if c.Type == html.ElementNode && ok(c) {
			out = append(out, c)
		}
	}
	return out
}

func byAttr(key string) func(*html.Node) bool {
	return func(n *html.Node) bool { _, ok := attr(n, key); return ok }
}

func byTag(tag string) func(*html.Node) bool {
	return func(n *html.Node) bool { return n.Data == tag }
}

// text is n's text as a reader sees it, its white space collapsed.
func text(n *html.Node) string {
	var b strings.Builder
	for c := range n.Descendants() {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

func cells(row *html.Node) []string {
	var out []string
	for _, td := range find(row, byTag("td")) {
		out = append(out, text(td))
	}
	return out
}

func section(t *testing.T, doc *html.Node, id string) *html.Node {
	t.Helper()
	s := find(doc, func(n *html.Node) bool { v, _ := attr(n, "id"); return n.Data == "section" && v == id })
	if len(s) != 1 {
		t.Fatalf("the page has %d sections with id %q, want 1", len(s), id)
	}
	return s[0]
}

// history is a page over 60 ended chicks (and one alive): ended i
// minutes after the start, so the newest is the last made; every third
// never got a slot (killed in the queue).
func history(t *testing.T) (*Page, *httptest.Server, time.Time) {
	t.Helper()
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start.Add(2 * time.Hour))
	p := New(Options{Version: "v1", StartedAt: start, Secrets: []string{secret}, Clock: clk})
	list := []hatchery.Info{{Record: hatchery.Record{ID: "c-alive", Tier: "local", State: hatchery.StateRunning, CreatedAt: start}, Channel: "cli/local"}}
	// Out of order, as the hatchery's list (by creation) would have them
	// when chicks end in another order than they began.
	for _, i := range []int{7, 59, 0, 33, 12, 58, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32,
		34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57} {
		created := start.Add(time.Duration(i) * time.Minute)
		r := hatchery.Record{ID: fmt.Sprintf("c-%08d", i), Tier: "local", Host: "p40", CreatedAt: created, EndedAt: created.Add(90 * time.Second),
			StartedAt: created.Add(30 * time.Second), State: hatchery.StateDone, Reason: hatchery.ReasonDone, Outcome: "done", Goal: "goal " + strconv.Itoa(i)}
		switch i % 3 {
		case 1:
			r.State, r.Reason, r.Outcome = hatchery.StateFailed, hatchery.ReasonNoStart,
				"could not start: create chick container: the image mother-chick:x is not on Docker host p40:\n  build it with `make image` there (key "+secret+")"
		case 2:
			r.State, r.Reason, r.Outcome, r.StartedAt, r.Host = hatchery.StateKilled, hatchery.ReasonKilled, "killed by the operator", time.Time{}, ""
		}
		list = append(list, hatchery.Info{Record: r, Channel: "slack-acme/C" + strconv.Itoa(i), Usage: model.Usage{InputTokens: int64(1000 * i), OutputTokens: 7}})
	}
	p.Watch(Sources{Chicks: chicks{list: list}})
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	return p, srv, start
}

// TestRecentChicks: the last 50 chicks that ended, newest first, each
// with how and why it ended, its tokens and how long it took, on the page
// and in status.json; the chick alive is not among them, and the outcome
// is scrubbed of secrets and kept on one line.
func TestRecentChicks(t *testing.T) {
	t.Parallel()
	_, srv, start := history(t)

	js, _ := get(t, srv.URL+"/status.json")
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(js), &raw); err != nil {
		t.Fatal(err)
	}
	var recent []RecentChick
	if err := json.Unmarshal(raw["recentChicks"], &recent); err != nil {
		t.Fatalf("status.json recentChicks: %v\n%s", err, js)
	}
	if len(recent) != RecentChicks {
		t.Fatalf("status.json has %d recent chicks, want %d", len(recent), RecentChicks)
	}
	for k, c := range recent {
		if want := fmt.Sprintf("c-%08d", 59-k); c.ID != want {
			t.Fatalf("recentChicks[%d] = %s, want %s (newest first, the oldest ten left out)", k, c.ID, want)
		}
	}
	if strings.Contains(js, secret) || strings.Contains(js, "goal ") {
		t.Errorf("status.json shows a secret or a goal:\n%s", js)
	}
	created := func(i int) time.Time { return start.Add(time.Duration(i) * time.Minute) }
	started := func(i int) *time.Time { t := created(i).Add(30 * time.Second); return &t }
	const noStart = "could not start: create chick container: the image mother-chick:x is not on Docker host p40: build it with `make image` there (key [redacted])"
	for k, w := range []RecentChick{
		// i = 59: killed in the queue: from its creation to its end.
		{ID: "c-00000059", Channel: "slack-acme/C59", Tier: "local", State: "killed", Reason: "killed", Outcome: "killed by the operator",
			Tokens: 59007, CreatedAt: created(59), EndedAt: created(59).Add(90 * time.Second), DurationSeconds: 90},
		// i = 58: its container did not start; its outcome on one line,
		// scrubbed.
		{ID: "c-00000058", Channel: "slack-acme/C58", Tier: "local", Host: "p40", State: "failed", Reason: "no_start", Outcome: noStart,
			Tokens: 58007, CreatedAt: created(58), StartedAt: started(58), EndedAt: created(58).Add(90 * time.Second), DurationSeconds: 60},
		// i = 57: done, from its slot to its end.
		{ID: "c-00000057", Channel: "slack-acme/C57", Tier: "local", Host: "p40", State: "done", Reason: "done", Outcome: "done",
			Tokens: 57007, CreatedAt: created(57), StartedAt: started(57), EndedAt: created(57).Add(90 * time.Second), DurationSeconds: 60},
	} {
		gotJSON, _ := json.Marshal(recent[k])
		wantJSON, _ := json.Marshal(w)
		if string(gotJSON) != string(wantJSON) {
			t.Errorf("recentChicks[%d] =\n%s\nwant\n%s", k, gotJSON, wantJSON)
		}
	}

	page, _ := get(t, srv.URL+"/status")
	doc := parsePage(t, page)
	sec := section(t, doc, "recent")
	if h := find(sec, byTag("h2")); len(h) != 1 || text(h[0]) != "Recent chicks 50 shown, newest first (at most 50)" {
		t.Errorf("the section's heading reads %q", text(h[0]))
	}
	rows := find(sec, byAttr("data-recent-chick"))
	if len(rows) != RecentChicks {
		t.Fatalf("the page lists %d recent chicks, want %d", len(rows), RecentChicks)
	}
	for k, row := range rows {
		if id, _ := attr(row, "data-recent-chick"); id != recent[k].ID {
			t.Fatalf("row %d is %s, want %s", k, id, recent[k].ID)
		}
	}
	for k, wantCells := range [][]string{
		{"c-00000059", "killed", "slack-acme/C59", "local", "-", "killed killed by the operator", "59,007", "1m30s", "2026-03-01 10:00:30 UTC (59m30s ago)"},
		{"c-00000058", "failed", "slack-acme/C58", "local", "p40", "no_start " + noStart, "58,007", "1m00s", "2026-03-01 09:59:30 UTC (1h00m ago)"},
		{"c-00000057", "done", "slack-acme/C57", "local", "p40", "done", "57,007", "1m00s", "2026-03-01 09:58:30 UTC (1h01m ago)"},
	} {
		if got := cells(rows[k]); strings.Join(got, " | ") != strings.Join(wantCells, " | ") {
			t.Errorf("recent row %d:\n got %q\nwant %q", k, got, wantCells)
		}
	}
	if class, _ := attr(rows[1], "class"); class != "state-failed" {
		t.Errorf("the failed chick's row has class %q, want state-failed", class)
	}
	if find(sec, func(n *html.Node) bool { v, _ := attr(n, "data-recent-chick"); return v == "c-alive" }) != nil {
		t.Error("the chick alive is listed as ended")
	}
	if live := find(section(t, doc, "chicks"), byAttr("data-chick")); len(live) != 1 {
		t.Errorf("the live chicks section lists %d chicks, want the one alive", len(live))
	}
	if strings.Contains(page, secret) || strings.Contains(page, "goal ") {
		t.Error("the page shows a secret or a goal")
	}
}

// TestNoRecentChicks: before any chick ended the section says so, and
// status.json has an empty list (not null).
func TestNoRecentChicks(t *testing.T) {
	t.Parallel()
	_, srv, _ := fixture(t)
	page, _ := get(t, srv.URL+"/status")
	if got := text(section(t, parsePage(t, page), "recent")); got != "Recent chicks No chick has ended yet." {
		t.Errorf("recent chicks section = %q", got)
	}
	js, _ := get(t, srv.URL+"/status.json")
	if !strings.Contains(js, `"recentChicks": []`) {
		t.Errorf("status.json lacks an empty recentChicks:\n%s", js)
	}
}

// meterRegion is the region of a <meter> its value falls in, as the HTML
// standard has a browser colour it (4.10.14): "optimum", "suboptimal" or
// "even-less-good".
func meterRegion(t *testing.T, m *html.Node) string {
	t.Helper()
	num := func(key string, def float64) float64 {
		v, ok := attr(m, key)
		if !ok {
			return def
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("meter %s=%q: %v", key, v, err)
		}
		return f
	}
	lo, hi := num("min", 0), num("max", 1)
	value := min(max(num("value", 0), lo), hi)
	low := min(max(num("low", lo), lo), hi)
	high := min(max(num("high", hi), low), hi)
	optimum := min(max(num("optimum", (lo+hi)/2), lo), hi)
	switch {
	case optimum < low:
		if value <= low {
			return "optimum"
		}
		if value <= high {
			return "suboptimal"
		}
		return "even-less-good"
	case optimum > high:
		if value >= high {
			return "optimum"
		}
		if value >= low {
			return "suboptimal"
		}
		return "even-less-good"
	}
	if value >= low && value <= high {
		return "optimum"
	}
	return "suboptimal"
}

// TestBudgetBars: each budget with a cap is a bar (a <meter>, drawn
// without script or inline style) with its numbers written out; it turns
// to the warning colour at 80% of the cap and to the full colour at 100%,
// and the row's class says the same. A budget without a cap has no bar.
func TestBudgetBars(t *testing.T) {
	t.Parallel()
	tests := []struct {
		used, limit int64
		text        string
		level       string
		region      string
		percent     int64
	}{
		{0, 500_000, "0 of 500,000 tokens (0%)", "ok", "optimum", 0},
		{120_400, 500_000, "120,400 of 500,000 tokens (24%)", "ok", "optimum", 24},
		{399_999, 500_000, "399,999 of 500,000 tokens (79%)", "ok", "optimum", 79},
		{400_000, 500_000, "400,000 of 500,000 tokens (80%)", "warn", "suboptimal", 80},
		{499_999, 500_000, "499,999 of 500,000 tokens (99%)", "warn", "suboptimal", 99},
		{500_000, 500_000, "500,000 of 500,000 tokens (100%)", "full", "even-less-good", 100},
		{612_000, 500_000, "612,000 of 500,000 tokens (122%)", "full", "even-less-good", 122},
		// A cap that 80% of is not a whole count: 6 of 7 is 85%, 5 is 71%.
		{5, 7, "5 of 7 tokens (71%)", "ok", "optimum", 71},
		{6, 7, "6 of 7 tokens (85%)", "warn", "suboptimal", 85},
		{20_000_000, 20_000_000, "20,000,000 of 20,000,000 tokens (100%)", "full", "even-less-good", 100},
		{16_000_000, 20_000_000, "16,000,000 of 20,000,000 tokens (80%)", "warn", "suboptimal", 80},
		{1_234_567, 0, "1,234,567 tokens, no cap", "none", "", 0},
	}
	var bs budgets
	for i, tt := range tests {
		bs = append(bs, broker.Budget{Scope: fmt.Sprintf("budget %d", i), Used: tt.used, Limit: tt.limit})
	}
	p := New(Options{Clock: clock.NewFake(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))})
	p.Watch(Sources{Budgets: bs})
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)

	page, _ := get(t, srv.URL+"/status")
	doc := parsePage(t, page)
	rows := find(section(t, doc, "budgets"), byAttr("data-budget"))
	if len(rows) != len(tests) {
		t.Fatalf("the page shows %d budgets, want %d", len(rows), len(tests))
	}
	for i, tt := range tests {
		row := rows[i]
		if class, _ := attr(row, "class"); class != "budget-"+tt.level {
			t.Errorf("%d of %d: row class %q, want budget-%s", tt.used, tt.limit, class, tt.level)
		}
		amount := find(row, func(n *html.Node) bool { v, _ := attr(n, "class"); return v == "amount" })
		if len(amount) != 1 || text(amount[0]) != tt.text {
			t.Errorf("%d of %d: the numbers read %q, want %q", tt.used, tt.limit, text(row), tt.text)
		}
		meters := find(row, byTag("meter"))
		if tt.limit == 0 {
			if len(meters) != 0 {
				t.Errorf("a budget without a cap has a bar")
			}
			continue
		}
		if len(meters) != 1 {
			t.Fatalf("%d of %d: %d bars, want 1", tt.used, tt.limit, len(meters))
		}
		if got := meterRegion(t, meters[0]); got != tt.region {
			t.Errorf("%d of %d: the bar is in its %s region, want %s", tt.used, tt.limit, got, tt.region)
		}
		if max, _ := attr(meters[0], "max"); max != strconv.FormatInt(tt.limit, 10) {
			t.Errorf("%d of %d: the bar's max is %q", tt.used, tt.limit, max)
		}
	}
	// Drawn with no script and no inline style: the page's
	// Content-Security-Policy would refuse a style attribute.
	if styled := find(doc, byAttr("style")); len(styled) != 0 {
		t.Errorf("%d elements carry a style attribute (refused by the page's CSP)", len(styled))
	}
	for _, s := range find(doc, byTag("script")) {
		if src, _ := attr(s, "src"); src != "status.js" {
			t.Errorf("a script other than status.js: %s", text(s))
		}
	}

	js, _ := get(t, srv.URL+"/status.json")
	var snap Snapshot
	if err := json.Unmarshal([]byte(js), &snap); err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		b := snap.Budgets[i]
		if b.Used != tt.used || b.Limit != tt.limit || b.Percent != tt.percent {
			t.Errorf("status.json budget %d = %+v, want used %d, limit %d, percent %d", i, b, tt.used, tt.limit, tt.percent)
		}
	}
}
