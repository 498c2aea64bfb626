package nest_test

import (
	"net/http/httptest"
	"testing"

	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/metrics/metricstest"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// TestGateAuthorizeRecordsRefusals: a refusal is recorded where it is
// decided, in Authorize (the chick's log, its channel, the metrics): the
// gate reports none, so a refused request costs one call, not two. An
// allowed one is recorded when the gate reports how it ended, not here.
func TestGateAuthorizeRecordsRefusals(t *testing.T) {
	t.Parallel()
	g := newGateFixture(t)
	id, _ := g.spawn(t)
	ctx := g.as(t.Context())
	for range 3 {
		resp, err := g.gate.Authorize(ctx, &pb.AuthorizeRequest{ChickId: id, Key: g.key(id), Host: "GitHub.com.", Port: 443})
		if err != nil || resp.GetAllow() {
			t.Fatalf("Authorize github.com:443 = %v, %v; want refused", resp, err)
		}
	}
	if resp, err := g.gate.Authorize(ctx, &pb.AuthorizeRequest{ChickId: id, Key: g.key(id), Host: "pypi.org", Port: 443}); err != nil || !resp.GetAllow() {
		t.Fatalf("Authorize pypi.org:443 = %v, %v; want allowed", resp, err)
	}
	got := g.heard.all()
	if len(got) != 3 {
		t.Fatalf("the subscriber heard %d connections, want the 3 refusals: %+v", len(got), got)
	}
	for _, e := range got {
		if e.Host != "github.com" || e.Port != 443 || e.Outcome != hatchery.EgressRefused || e.Reason != "not allowed for this chick" {
			t.Errorf("recorded %+v", e)
		}
	}
	srv := httptest.NewServer(g.mx.Handler())
	defer srv.Close()
	s := metricstest.Get(t, srv.URL+"/metrics")
	if v, ok := s.Value("mother_gate_connections_total", "destination", "github.com:443", "outcome", "refused"); !ok || v != 3 {
		t.Errorf("mother_gate_connections_total{github.com:443, refused} = %v, want 3\n%s", v, s.Series("mother_gate_connections_total"))
	}
}
