package metrics_test

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/events"
	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/metrics"
	"github.com/mother-chat/mother/pkg/metrics/metricstest"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/mother"
)

const dashboardFile = "../../deploy/grafana/mother-dashboard.json"

// dashboardExprs are the PromQL expressions of every panel of the
// Grafana dashboard, and the dashboard's template queries.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: no title, uid or panels", dashboardFile)
	}
	var out []string
	for _, p := range d.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		out = append(out, v.Definition)
	}
	return out
}

// allFamilies scrapes a Metrics whose every hook has been called once and
// whose gauges have something to report: every family Mother exports.
func allFamilies(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	mx := metrics.New(metrics.Options{Version: "v1"})
	st := &state{
		depths:  map[string]int{"discord": 1},
		reports: []chat.AdapterReport{{Name: "discord", Type: "discord", Status: chat.AdapterStatus{State: chat.ConnConnected}}},
		chicks:  []hatchery.Info{{Record: hatchery.Record{State: hatchery.StateRunning}}},
		hosts:   []hatchery.HostStatus{{Name: "p40", Up: true, Running: 1, Capacity: 6}},
		budgets: []broker.Budget{{Kind: "tier", Name: "claude", Used: 700, Limit: 1000, UsedMicroUSD: 420_000, LimitMicroUSD: 5_000_000}},
	}
	mx.Watch(st, st, st)
	mx.MessageIn("discord")
	mx.MessageOut("discord")
	mx.RunEnded("discord", mother.KindMessage, "done", time.Second, model.Usage{InputTokens: 1})
	mx.ChickSpawned(hatchery.Record{Tier: "claude"})
	mx.ChickJoined(hatchery.Record{Tier: "claude", Host: "p40"}, time.Second)
	mx.ChickFinished(hatchery.Record{Tier: "claude", Reason: hatchery.ReasonDone}, time.Minute)
	mx.ModelCall(broker.Caller{Tier: "claude"}, model.Usage{InputTokens: 10, OutputTokens: 1}, 45, nil)
	mx.ModelCall(broker.Caller{Kind: broker.CallerMother, Channel: "discord/1"}, model.Usage{InputTokens: 10, OutputTokens: 1}, 45, nil)
	mx.EventFired(events.Periodic, false)
	mx.GateConnection("pypi.org:443", "allowed", "claude", 10, 20)
	// The fsync counts are the process's: one fsync makes the family
	// appear whatever else this test binary has run.
	if err := fsync.Dir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mx.Handler())
	defer srv.Close()
	return metricstest.Get(t, srv.URL+"/metrics").Families
}

// TestGrafanaDashboard: the dashboard in deploy/grafana queries only
// metrics Mother exports (by their real names), and shows every one of
// Mother's own (mother_*).
func TestGrafanaDashboard(t *testing.T) {
	t.Parallel()
	fams := allFamilies(t)
	exprs := dashboardExprs(t)
	used := map[string]bool{}
	name := regexp.MustCompile(`\b(mother|process|go)_[a-z0-9_]+\b`)
	for _, e := range exprs {
		for _, n := range name.FindAllString(e, -1) {
			used[n] = true
			base := n
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(n, suf); ok && fams[b] != nil && fams[b].GetType() == dto.MetricType_HISTOGRAM {
					base = b
				}
			}
			if fams[base] == nil {
				t.Errorf("the dashboard queries %s, which Mother does not export (in %s)", n, e)
			}
			used[base] = true
		}
	}
	var missing []string
	for n := range fams {
		if strings.HasPrefix(n, metrics.Namespace+"_") && !used[n] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the dashboard shows none of %v", missing)
	}
}
