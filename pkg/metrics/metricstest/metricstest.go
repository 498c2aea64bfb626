// Package metricstest scrapes a Prometheus endpoint in tests and reads
// values by metric name and labels.
package metricstest

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape is one scrape's metric families.
type Scrape struct {
	Families map[string]*dto.MetricFamily
	Raw      string
}

// Get scrapes url (…/metrics) and parses the text format.
func Get(t testing.TB, url string) Scrape {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %d %v\n%s", url, resp.StatusCode, err, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("scrape %s: not the Prometheus text format: %v\n%s", url, err, b)
	}
	return Scrape{Families: fams, Raw: string(b)}
}

// Value returns the value of the series name{labels} (labels as "k", "v"
// pairs, all of which must match; others are ignored): a counter's or
// gauge's value, a histogram's sample count. ok is false when there is no
// such series.
func (s Scrape) Value(name string, labels ...string) (v float64, ok bool) {
	f := s.Families[name]
	if f == nil {
		return 0, false
	}
	sum, found := 0.0, false
	for _, m := range f.Metric {
		if !match(m, labels) {
			continue
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum, found
}

// HistogramSum returns a histogram's sum of observations.
func (s Scrape) HistogramSum(name string, labels ...string) float64 {
	f := s.Families[name]
	if f == nil {
		return 0
	}
	sum := 0.0
	for _, m := range f.Metric {
		if match(m, labels) && m.Histogram != nil {
			sum += m.Histogram.GetSampleSum()
		}
	}
	return sum
}

// Series lists a family's series as name{k="v",...} value, for messages.
func (s Scrape) Series(name string) string {
	f := s.Families[name]
	if f == nil {
		return name + ": absent"
	}
	var lines []string
	for _, m := range f.Metric {
		var ls []string
		for _, l := range m.Label {
			ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
		}
		v, _ := Scrape{Families: map[string]*dto.MetricFamily{name: {Metric: []*dto.Metric{m}}}}.Value(name)
		lines = append(lines, fmt.Sprintf("%s{%s} %g", name, strings.Join(ls, ","), v))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func match(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		ok := false
		for _, l := range m.Label {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
