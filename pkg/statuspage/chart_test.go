package statuspage

import (
	"encoding/xml"
	"io"
	"math"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/clock"
)

// svgRect is a bar segment of the chart as XML reads it.
type svgRect struct {
	X, Y, Width, Height float64
	Day, Series         string
	Micro               int64
	Title               string
}

// svgChart is what a parsed chart holds.
type svgChart struct {
	TopUSD float64
	Title  string
	Bars   []svgRect
	Legend []string
	Days   []string
}

// parseChart reads an SVG chart the way any XML reader would, and fails
// the test when it is not well-formed.
func parseChart(t *testing.T, r io.Reader) svgChart {
	t.Helper()
	dec := xml.NewDecoder(r)
	var (
		out   svgChart
		stack []string
		cur   *svgRect
		text  strings.Builder
	)
	attr := func(se xml.StartElement, name string) string {
		for _, a := range se.Attr {
			if a.Name.Local == name {
				return a.Value
			}
		}
		return ""
	}
	num := func(s string) float64 {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("not a number: %q", s)
		}
		return f
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			stack = append(stack, el.Name.Local)
			text.Reset()
			switch {
			case el.Name.Local == "svg":
				if el.Name.Space != "http://www.w3.org/2000/svg" {
					t.Errorf("svg namespace %q", el.Name.Space)
				}
				out.TopUSD = num(attr(el, "data-top-usd"))
			case el.Name.Local == "rect" && attr(el, "data-day") != "":
				micro, _ := strconv.ParseInt(attr(el, "data-micro-usd"), 10, 64)
				out.Bars = append(out.Bars, svgRect{X: num(attr(el, "x")), Y: num(attr(el, "y")), Width: num(attr(el, "width")), Height: num(attr(el, "height")),
					Day: attr(el, "data-day"), Series: attr(el, "data-series"), Micro: micro})
				cur = &out.Bars[len(out.Bars)-1]
			case el.Name.Local == "g" && attr(el, "class") == "legend":
				out.Legend = append(out.Legend, attr(el, "data-series"))
			}
		case xml.CharData:
			text.Write(el)
		case xml.EndElement:
			switch {
			case el.Name.Local == "title" && len(stack) >= 2 && stack[len(stack)-2] == "rect" && cur != nil:
				cur.Title = text.String()
			case el.Name.Local == "title" && len(stack) == 2:
				out.Title = text.String()
			case el.Name.Local == "text" && len(stack) >= 1:
				if s := text.String(); len(s) == len("01-02") && s[2] == '-' {
					out.Days = append(out.Days, s)
				}
			case el.Name.Local == "rect":
				cur = nil
			}
			stack = stack[:len(stack)-1]
		}
	}
	return out
}

func TestSpendChartIsDrawnToScale(t *testing.T) {
	t.Parallel()
	days := []broker.DaySpend{
		{Day: "2026-11-25", Tiers: map[string]int64{"claude": 1_200_000, "local": 0}, Mother: 300_000},
		{Day: "2026-11-26", Tiers: map[string]int64{}},
		{Day: "2026-11-27", Tiers: map[string]int64{"claude": 400_000, "big<&>": 2_000_000}, Mother: 1_000_000},
	}
	c := parseChart(t, strings.NewReader(string(SpendChart(days))))
	// The tallest day is $3.40: the axis tops at $5.
	if c.TopUSD != 5 {
		t.Errorf("axis top $%g, want $5", c.TopUSD)
	}
	if want := []string{MotherSeries, "big<&>", "claude"}; strings.Join(c.Legend, "|") != strings.Join(want, "|") {
		t.Errorf("legend %q, want %q (a tier that spent nothing has none)", c.Legend, want)
	}
	if strings.Join(c.Days, " ") != "11-25 11-26 11-27" {
		t.Errorf("days %q", c.Days)
	}
	if !strings.Contains(c.Title, "last 3 days") || !strings.Contains(c.Title, "$4.90 in all") {
		t.Errorf("title %q", c.Title)
	}
	type seg struct {
		series string
		micro  int64
	}
	want := map[string][]seg{
		"2026-11-25": {{MotherSeries, 300_000}, {"claude", 1_200_000}},
		"2026-11-27": {{MotherSeries, 1_000_000}, {"big<&>", 2_000_000}, {"claude", 400_000}},
	}
	byDay := map[string][]svgRect{}
	for _, r := range c.Bars {
		byDay[r.Day] = append(byDay[r.Day], r)
	}
	if len(byDay) != 2 {
		t.Fatalf("bars on days %v, want 2 days (an empty day has none)", byDay)
	}
	const plotH = chartH - plotTop - plotBottom
	baseline := float64(chartH - plotBottom)
	for day, segs := range want {
		got := byDay[day]
		if len(got) != len(segs) {
			t.Fatalf("%s: %d segments, want %d", day, len(got), len(segs))
		}
		// Mother's own at the bottom, each segment standing on the one
		// below, each as tall as its cost on the axis.
		bottom := baseline
		for i, s := range segs {
			r := got[i]
			if r.Series != s.series || r.Micro != s.micro {
				t.Errorf("%s segment %d: %s %d, want %s %d", day, i, r.Series, r.Micro, s.series, s.micro)
			}
			if wantH := float64(s.micro) / 1e6 / c.TopUSD * plotH; math.Abs(r.Height-wantH) > 0.02 {
				t.Errorf("%s %s: height %.2f, want %.2f", day, s.series, r.Height, wantH)
			}
			if math.Abs(r.Y+r.Height-bottom) > 0.02 {
				t.Errorf("%s %s: ends at %.2f, the one below starts at %.2f", day, s.series, r.Y+r.Height, bottom)
			}
			if !strings.HasPrefix(r.Title, day+" "+s.series+": $") {
				t.Errorf("title %q", r.Title)
			}
			bottom = r.Y
		}
	}
	sort.Slice(c.Bars, func(i, j int) bool { return c.Bars[i].X < c.Bars[j].X })
	if c.Bars[0].Day != "2026-11-25" || c.Bars[len(c.Bars)-1].Day != "2026-11-27" {
		t.Error("the days are not left to right, oldest first")
	}

	// Nothing spent: a chart with its axis and no bars.
	empty := parseChart(t, strings.NewReader(string(SpendChart([]broker.DaySpend{{Day: "2026-11-27", Tiers: map[string]int64{}}}))))
	if len(empty.Bars) != 0 || empty.TopUSD <= 0 || len(empty.Legend) != 1 {
		t.Errorf("empty chart %+v", empty)
	}
}

type spendSource []broker.DaySpend

func (s spendSource) DailySpend(days int) ([]broker.DaySpend, error) {
	if days != ChartDays {
		return nil, io.ErrUnexpectedEOF
	}
	return s, nil
}

func TestSpendChartIsServed(t *testing.T) {
	t.Parallel()
	p := New(Options{Version: "v1", Clock: clock.NewFake(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))})
	p.Watch(Sources{Spend: spendSource{{Day: "2026-11-27", Tiers: map[string]int64{"claude": 420_000}, Mother: 80_000}}})
	srv := httptest.NewServer(p.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/status/spend.svg")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "image/svg+xml" {
		t.Errorf("content type %q", ct)
	}
	if c := parseChart(t, resp.Body); len(c.Bars) != 2 || c.TopUSD != 0.5 {
		t.Errorf("served chart %+v", c)
	}
	page, err := srv.Client().Get(srv.URL + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer page.Body.Close()
	body, _ := io.ReadAll(page.Body)
	if !strings.Contains(string(body), `<section id="spend">`) || !strings.Contains(string(body), `data-series="claude" data-micro-usd="420000"`) {
		t.Errorf("the page does not show the chart:\n%s", body)
	}
}

// TestMoneyBudgetsAreShown: a budget with a money cap has a row in
// dollars beside its tokens; one capped in money only, with no token
// used, has the money row alone.
func TestMoneyBudgetsAreShown(t *testing.T) {
	t.Parallel()
	p := New(Options{Version: "v1", Clock: clock.NewFake(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))})
	p.Watch(Sources{Budgets: budgets{
		{Scope: "tier claude today", Kind: "tier", Name: "claude", Used: 1200, Limit: 10000, UsedMicroUSD: 850_000, LimitMicroUSD: 1_000_000},
		{Scope: "channel cli/local today", Kind: "channel", Name: "cli/local", LimitMicroUSD: 500_000},
	}})
	snap := p.Snapshot()
	want := []Budget{
		{Scope: "tier claude today", Unit: "tokens", Used: 1200, Limit: 10000, Percent: 12},
		{Scope: "tier claude today", Unit: "usd", Used: 850_000, Limit: 1_000_000, Percent: 85},
		{Scope: "channel cli/local today", Unit: "usd", Used: 0, Limit: 500_000, Percent: 0},
	}
	if len(snap.Budgets) != len(want) {
		t.Fatalf("budgets %+v", snap.Budgets)
	}
	for i, w := range want {
		if snap.Budgets[i] != w {
			t.Errorf("budget %d = %+v, want %+v", i, snap.Budgets[i], w)
		}
	}
	srv := httptest.NewServer(p.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/status/live")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, s := range []string{`data-budget="tier claude today usd" class="budget-warn"`, `$0.85 of $1.00 (85%)`, `1,200 of 10,000 tokens (12%)`, `$0.00 of $0.50 (0%)`} {
		if !strings.Contains(string(body), s) {
			t.Errorf("the page lacks %q:\n%s", s, body)
		}
	}
}
