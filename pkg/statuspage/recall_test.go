package statuspage

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
)

// TestRecallStatusShown: the history index's catch-up progress, then
// what it holds, shows on /status and in status.json; without recall the
// section is absent.
func TestRecallStatusShown(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	p := New(Options{Version: "v1", StartedAt: start, Clock: clock.NewFake(start)})
	var caught atomic.Bool
	p.Watch(Sources{Recall: func() Recall {
		if caught.Load() {
			return Recall{Channels: 3, Done: 3, Added: 12, Docs: 4000, Embedded: 40, EmbedModel: "ollama/nomic-embed-text"}
		}
		return Recall{CatchingUp: true, Channels: 3, Done: 1, Added: 2500}
	}})
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	html, _ := get(t, srv.URL+"/status")
	if want := `<span class="state">catching up</span>: 1 of 3 channels, 2500 documents added; full text alone.`; !strings.Contains(html, want) {
		t.Errorf("/status lacks %q:\n%s", want, html)
	}
	caught.Store(true)
	html, _ = get(t, srv.URL+"/status")
	if want := `<span class="state">caught up</span>: 4000 documents at start, 12 added since; 40 embedded with <code>ollama/nomic-embed-text</code>.`; !strings.Contains(html, want) {
		t.Errorf("/status lacks %q:\n%s", want, html)
	}
	js, _ := get(t, srv.URL+"/status.json")
	var snap Snapshot
	if err := json.Unmarshal([]byte(js), &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Recall == nil || snap.Recall.Docs != 4000 || snap.Recall.CatchingUp {
		t.Errorf("status.json recall: %+v", snap.Recall)
	}
	off := New(Options{Version: "v1", StartedAt: start, Clock: clock.NewFake(start)})
	off.Watch(Sources{})
	srv2 := httptest.NewServer(off.Handler())
	t.Cleanup(srv2.Close)
	if html, _ := get(t, srv2.URL+"/status"); strings.Contains(html, `id="recall"`) {
		t.Errorf("/status without recall shows the section")
	}
}
