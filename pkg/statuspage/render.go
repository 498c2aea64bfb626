package statuspage

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/broker"
)

//go:embed static
var static embed.FS

//go:embed page.html.tmpl
var pageText string

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"age":       func(now time.Time, t time.Time) string { return Age(now.Sub(t)) },
	"secs":      func(n int64) string { return Age(time.Duration(n) * time.Second) },
	"clock":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"iso":       func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"took":      took,
	"recentMax": func() int { return RecentChicks },
	"join":      strings.Join,
	"num":       Thousands,
}).Parse(pageText))

// Thousands writes n with thousands separators: 20,000,000.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Age formats a duration the way momctl does: 42s, 3m05s, 2h10m, 3d.
func Age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// Handler serves the page, its live part, its JSON, its script and its
// style sheet, under /status.
func (p *Page) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) { p.render(w, "page") })
	mux.HandleFunc("GET /status/spend.svg", func(w http.ResponseWriter, r *http.Request) {
		svg, err := p.spendChart()
		if err != nil {
			http.Error(w, "the spend chart: "+err.Error(), http.StatusInternalServerError)
			return
		}
		p.write(w, "image/svg+xml", svg)
	})
	mux.HandleFunc("GET /status/live", func(w http.ResponseWriter, r *http.Request) { p.render(w, "live") })
	mux.HandleFunc("GET /status.json", func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		if err := enc.Encode(p.Snapshot()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		p.write(w, "application/json", buf.Bytes())
	})
	sub, _ := fs.Sub(static, "static")
	files := http.FileServerFS(sub)
	for _, name := range []string{"/status.js", "/status.css"} {
		mux.Handle("GET "+name, files)
	}
	return mux
}

// pageData is what the whole page shows: the snapshot (its live part)
// and the spend chart, drawn once per page load (not at every refresh of
// the live part: it reads 14 days of ledger).
type pageData struct {
	Snapshot
	// Chart is the spend chart's SVG; ChartError why there is none.
	Chart      template.HTML
	ChartError string
}

// spendChart draws the last ChartDays days' spend (none without a
// source).
func (p *Page) spendChart() ([]byte, error) {
	p.mu.Lock()
	src := p.src.Spend
	p.mu.Unlock()
	var days []broker.DaySpend
	if src != nil {
		var err error
		if days, err = src.DailySpend(ChartDays); err != nil {
			return nil, err
		}
	}
	return SpendChart(days), nil
}

func (p *Page) render(w http.ResponseWriter, name string) {
	var buf bytes.Buffer
	var data any = p.Snapshot()
	if name == "page" {
		pd := pageData{Snapshot: data.(Snapshot)}
		if svg, err := p.spendChart(); err != nil {
			pd.ChartError = err.Error()
		} else {
			// Drawn here from numbers and escaped names only.
			pd.Chart = template.HTML(svg)
		}
		data = pd
	}
	if err := page.ExecuteTemplate(&buf, name, data); err != nil {
		http.Error(w, "render the status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	p.write(w, "text/html; charset=utf-8", buf.Bytes())
}

// write sends body, scrubbed once more, with headers that keep it out of
// caches and frames and allow only the page's own script and style.
func (p *Page) write(w http.ResponseWriter, contentType string, body []byte) {
	p.mu.Lock()
	scrub := p.scrub
	p.mu.Unlock()
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	_, _ = w.Write([]byte(scrub.Replace(string(body))))
}
