package hatchery_test

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/config"

	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/docker"
	"github.com/mother-chat/mother/pkg/hatchery/docker/enginetest"
)

// egressRecorder is a subscriber that also hears the gate's reports.
type egressRecorder struct {
	hatchery.NopObserver
	mu  sync.Mutex
	got []hatchery.Egress
	ids []string
}

func (r *egressRecorder) ChickEgress(c hatchery.Info, e hatchery.Egress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, e)
	r.ids = append(r.ids, c.ID)
}

var _ hatchery.EgressObserver = (*egressRecorder)(nil)

// TestRecordEgress: a running chick's gate reports are logged in its
// directory, reach the subscribers that listen for them, and add up to
// what it sent (the byte cap's ledger after a restart); an ended chick
// records nothing.
func TestRecordEgress(t *testing.T) {
	t.Parallel()
	e := enginetest.New(t)
	e.On(http.MethodPost, "/containers/create", enginetest.JSON(201, map[string]any{"Id": "k1"}))
	e.On(http.MethodPost, "/containers/{}/wait", enginetest.Pending())
	e.On(http.MethodPost, "/containers/{}/start", enginetest.Answer{Status: 204})
	c, err := client.NewClientWithOpts(client.WithHost(e.Host), client.WithAPIVersionNegotiation())
	must(t, err)
	dir := t.TempDir()
	// The ledger is the hatchery's, whatever carries the reports: no
	// gate is started on the fake engine (network bridge).
	cfg := testConfig("mother-chick:fake")
	cfg.Chicks.Network = config.NetworkBridge
	h, err := hatchery.New(hatchery.Options{
		Config: cfg, Dir: dir, Logger: testLogger(t), ProbeInterval: time.Hour,
		Hosts: []hatchery.Host{{Name: "fake", Runtime: docker.New(c), Capacity: 2, MotherAddress: "127.0.0.1:1"}},
	})
	must(t, err)
	t.Cleanup(func() { h.Close() })
	rec := &egressRecorder{}
	h.Subscribe(rec)
	in, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "x"})
	must(t, err)
	deadline := time.Now().Add(time.Minute)
	for h.State(in.ID) != hatchery.StateRunning {
		if time.Now().After(deadline) {
			t.Fatalf("chick is %s, want running", h.State(in.ID))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n, err := h.EgressSent(in.ID); err != nil || n != 0 {
		t.Fatalf("EgressSent before any connection = %d, %v", n, err)
	}
	reports := []hatchery.Egress{
		{Host: "pypi.org", Port: 443, Outcome: hatchery.EgressAllowed, Address: "151.101.0.223", BytesOut: 1200, BytesIn: 90000, Duration: time.Second},
		{Host: "github.com", Port: 443, Outcome: hatchery.EgressRefused, Reason: "not allowed for this chick"},
		{Host: "files.pythonhosted.org", Port: 443, Outcome: hatchery.EgressCapped, BytesOut: 300},
	}
	for _, r := range reports {
		got, err := h.RecordEgress(in.ID, r)
		must(t, err)
		if got.ID != in.ID || got.Channel != "cli/local" {
			t.Errorf("RecordEgress returned %+v", got.Record)
		}
	}
	rec.mu.Lock()
	if len(rec.got) != 3 || rec.got[1].Host != "github.com" || rec.ids[0] != in.ID || rec.got[0].Time.IsZero() {
		t.Errorf("observer heard %+v", rec.got)
	}
	rec.mu.Unlock()
	if n, err := h.EgressSent(in.ID); err != nil || n != 1500 {
		t.Errorf("EgressSent = %d, %v; want 1500", n, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, in.ID, "egress.jsonl"))
	must(t, err)
	if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) != 3 || !strings.Contains(lines[1], `"outcome":"refused"`) {
		t.Errorf("egress.jsonl:\n%s", b)
	}
	if _, err := h.RecordEgress("c-nope", reports[0]); !errors.Is(err, hatchery.ErrUnknownChick) {
		t.Errorf("unknown chick: %v", err)
	}
	if _, err := h.EgressSent("../x"); err == nil {
		t.Error("EgressSent took a path")
	}
}

func TestRecordEgressOfAnEndedChick(t *testing.T) {
	t.Parallel()
	e := enginetest.New(t)
	e.On(http.MethodPost, "/containers/create", enginetest.Error(500, "disk full"))
	h, rec := fakeHatchery(t, e, 30*time.Second)
	in, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "x"})
	must(t, err)
	waitEnded(t, rec)
	if _, err := h.RecordEgress(in.ID, hatchery.Egress{Host: "pypi.org", Port: 443, Outcome: hatchery.EgressAllowed}); !errors.Is(err, hatchery.ErrChickEnded) {
		t.Errorf("ended chick: %v, want ErrChickEnded", err)
	}
}
