package hatchery_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/docker"
	"github.com/mother-chat/mother/pkg/hatchery/docker/enginetest"
)

// TestRecordEgressCapped: past chicks.egress.logMaxBytes a chick's
// connections are counted, not logged: its egress.jsonl stays within the
// cap, and its lines (each connection, then the summaries) still account
// for every connection and every byte sent (the ledger after a restart);
// the observers still hear each.
func TestRecordEgressCapped(t *testing.T) {
	t.Parallel()
	e := enginetest.New(t)
	e.On(http.MethodPost, "/containers/create", enginetest.JSON(201, map[string]any{"Id": "k1"}))
	e.On(http.MethodPost, "/containers/{}/wait", enginetest.Pending())
	e.On(http.MethodPost, "/containers/{}/start", enginetest.Answer{Status: 204})
	c, err := client.NewClientWithOpts(client.WithHost(e.Host), client.WithAPIVersionNegotiation())
	must(t, err)
	dir := t.TempDir()
	cfg := testConfig("mother-chick:fake")
	cfg.Chicks.Network = config.NetworkBridge
	cfg.Chicks.Egress.LogMaxBytes = "16k"
	h, err := hatchery.New(hatchery.Options{
		Config: cfg, Dir: dir, Logger: testLogger(t), ProbeInterval: time.Hour,
		Hosts: []hatchery.Host{{Name: "fake", Runtime: docker.New(c), Capacity: 2, MotherAddress: "127.0.0.1:1"}},
	})
	must(t, err)
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
	const refused, allowed = 2000, 50
	for i := range refused + allowed {
		r := hatchery.Egress{Host: "refused.test", Port: 443, Outcome: hatchery.EgressRefused, Reason: "not allowed for this chick"}
		if i%(refused/allowed+1) == 0 {
			r = hatchery.Egress{Host: "pypi.org", Port: 443, Outcome: hatchery.EgressAllowed, BytesOut: 100, BytesIn: 1000}
		}
		if _, err := h.RecordEgress(in.ID, r); err != nil {
			t.Fatalf("RecordEgress %d: %v", i, err)
		}
	}
	must(t, h.Close())
	path := filepath.Join(dir, in.ID, "egress.jsonl")
	fi, err := os.Stat(path)
	must(t, err)
	if fi.Size() > 16<<10 {
		t.Errorf("egress.jsonl is %d bytes, want at most 16384", fi.Size())
	}
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	counts := map[hatchery.EgressOutcome]int64{}
	var out int64
	summaries := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e hatchery.Egress
		must(t, json.Unmarshal(sc.Bytes(), &e))
		out += e.BytesOut
		if e.Outcome == hatchery.EgressUnlogged {
			summaries++
			for k, n := range e.Counts {
				counts[k] += n
			}
			continue
		}
		counts[e.Outcome]++
	}
	if counts[hatchery.EgressRefused] != refused || counts[hatchery.EgressAllowed] != allowed || out != 100*allowed {
		t.Errorf("egress.jsonl accounts for %v and %d bytes out, want %d refused, %d allowed, %d bytes", counts, out, refused, allowed, 100*allowed)
	}
	if summaries < 2 {
		t.Errorf("%d summary lines, want one at the cap and one at the end", summaries)
	}
	rec.mu.Lock()
	heard := len(rec.got)
	rec.mu.Unlock()
	if heard != refused+allowed {
		t.Errorf("observers heard %d connections, want %d", heard, refused+allowed)
	}
}
