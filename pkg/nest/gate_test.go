package nest_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/egress"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/metrics"
	"github.com/mother-chat/mother/pkg/metrics/metricstest"
	"github.com/mother-chat/mother/pkg/nest"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// gateFixture is the nest with GateService: the gate secret, a policy
// (pypi.org:443, mirror.lan resolved by config, 10.0.0.5 trusted, 1k
// cap), real metrics and a subscriber that hears the connections.
type gateFixture struct {
	*fixture
	secret egress.Secret
	policy *egress.Policy
	mx     *metrics.Metrics
	heard  *egressHeard
}

type egressHeard struct {
	hatchery.NopObserver
	mu  sync.Mutex
	got []hatchery.Egress
}

func (e *egressHeard) ChickEgress(_ hatchery.Info, x hatchery.Egress) {
	e.mu.Lock()
	e.got = append(e.got, x)
	e.mu.Unlock()
}

func (e *egressHeard) all() []hatchery.Egress {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.got)
}

func newGateFixture(t *testing.T, more ...func(*nest.Options)) *gateFixture {
	t.Helper()
	g := &gateFixture{secret: egress.NewSecret([]byte(strings.Repeat("k", 32))), mx: metrics.New(metrics.Options{}), heard: &egressHeard{}}
	g.fixture = newFixture(t, 0, func(cfg *config.Config, h *hatchery.Hatchery, o *nest.Options) {
		cfg.Chicks.Egress.Allow = []string{"pypi.org:443", "mirror.lan", "10.0.0.5", "10.0.0.6:8080"}
		cfg.Chicks.Egress.Hosts = map[string]string{"mirror.lan": "192.0.2.7"}
		cfg.Chicks.Egress.MaxBytes = "1k"
		p, err := egress.NewPolicy(egress.Options{Config: cfg.Chicks, StateDir: t.TempDir(), LoadSent: func(id string) int64 {
			n, _ := h.EgressSent(id)
			return n
		}})
		if err != nil {
			t.Fatal(err)
		}
		g.policy = p
		h.Subscribe(g.heard)
		o.Gate = &nest.Gate{Secret: g.secret, Instance: h.Instance(), Hosts: []string{"local"}, Policy: p, Metrics: g.mx}
		for _, f := range more {
			f(o)
		}
	})
	return g
}

// key is chick id's gate key at the gate of host "local".
func (g *gateFixture) key(id string) string { return g.secret.ChickKey(g.h.Instance(), "local", id) }

// as is a call from the gate of host "local".
func (g *gateFixture) as(ctx context.Context) context.Context {
	return wire.Credentials(ctx, "local", g.secret.GateToken(g.h.Instance(), "local"))
}

func TestGateAuthentication(t *testing.T) {
	t.Parallel()
	g := newGateFixture(t)
	id, tok := g.spawn(t)
	ctx := t.Context()
	req := &pb.AuthorizeRequest{ChickId: id, Key: g.key(id), Host: "pypi.org", Port: 443}
	if resp, err := g.gate.Authorize(g.as(ctx), req); err != nil || !resp.GetAllow() {
		t.Fatalf("the local gate, asking for an allowed destination: %v %v", resp, err)
	}
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{
		{"no credentials", ctx},
		{"bad token", wire.Credentials(ctx, "local", strings.Repeat("0", 64))},
		{"another host's token", wire.Credentials(ctx, "local", g.secret.GateToken(g.h.Instance(), "p40"))},
		{"another instance's token", wire.Credentials(ctx, "local", g.secret.GateToken("m-other", "local"))},
		{"unknown host with its own token", wire.Credentials(ctx, "p40", g.secret.GateToken(g.h.Instance(), "p40"))},
		{"a chick's nest token", wire.Credentials(ctx, id, tok)},
		{"a chick's gate key", wire.Credentials(ctx, "local", g.key(id))},
	} {
		if _, err := g.gate.Authorize(c.ctx, req); status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: %v, want Unauthenticated", c.name, err)
		}
		if _, err := g.gate.Report(c.ctx, &pb.ReportRequest{ChickId: id, Key: req.Key, Host: "pypi.org", Port: 443, Outcome: pb.EgressOutcome_EGRESS_OUTCOME_ALLOWED}); status.Code(err) != codes.Unauthenticated {
			t.Errorf("report, %s: %v, want Unauthenticated", c.name, err)
		}
	}
	// The gate's credentials open no ChickService call.
	if _, err := g.client.Join(g.as(ctx), &pb.JoinRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("Join with the gate's credentials: %v", err)
	}
}

func TestGateAuthorize(t *testing.T) {
	t.Parallel()
	g := newGateFixture(t)
	a, _ := g.spawn(t)
	b, _ := g.spawn(t)
	ctx := g.as(t.Context())
	ask := func(id, key, host string, port uint32) (*pb.AuthorizeResponse, error) {
		return g.gate.Authorize(ctx, &pb.AuthorizeRequest{ChickId: id, Key: key, Host: host, Port: port})
	}
	resp, err := ask(a, g.key(a), "PyPI.org.", 443)
	if err != nil || !resp.GetAllow() || resp.GetBytesRemaining() != 1024 || !slices.Equal(resp.GetTrusted(), []string{"10.0.0.5:443"}) || len(resp.GetAddresses()) != 0 {
		t.Fatalf("allowed destination: %v %v", resp, err)
	}
	resp, err = ask(a, g.key(a), "mirror.lan", 8080)
	if err != nil || !resp.GetAllow() || !slices.Equal(resp.GetAddresses(), []string{"192.0.2.7"}) {
		t.Errorf("a name with configured addresses: %v %v", resp, err)
	}
	// The trusted addresses are those listed for the port asked for, each
	// with that port: 10.0.0.6 is listed at 8080 only.
	if !slices.Equal(resp.GetTrusted(), []string{"10.0.0.5:8080", "10.0.0.6:8080"}) {
		t.Errorf("trusted for port 8080: %q, want 10.0.0.5:8080 and 10.0.0.6:8080", resp.GetTrusted())
	}
	resp, err = ask(a, g.key(a), "github.com", 443)
	if err != nil || resp.GetAllow() || resp.GetReason() != "not allowed for this chick" || resp.GetTrusted() != nil {
		t.Errorf("a destination not listed: %v %v", resp, err)
	}
	for _, c := range []struct{ name, id, key string }{
		{"B's key for A", a, g.key(b)},
		{"no key", a, ""},
		{"made-up key", a, strings.Repeat("0", 64)},
		{"unknown chick with its key", "c-00000000", g.key("c-00000000")},
		{"its key at another host's gate", a, g.secret.ChickKey(g.h.Instance(), "p40", a)},
		{"its key made for another instance", a, g.secret.ChickKey("m-other", "local", a)},
		{"its nest-only key (network none)", a, g.secret.NestKey(g.h.Instance(), "local", a)},
	} {
		if _, err := ask(c.id, c.key, "pypi.org", 443); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: %v, want PermissionDenied", c.name, err)
		}
	}
	if _, err := ask(a, g.key(a), "pypi.org", 0); status.Code(err) != codes.InvalidArgument {
		t.Errorf("port 0: %v, want InvalidArgument", err)
	}
	// An approval for the channel reaches every chick of it.
	must(t, g.policy.Approve(egress.ChickInfo{ID: a, Channel: "cli/local"}, egress.ScopeChannel, "github.com:443"))
	if resp, err := ask(b, g.key(b), "github.com", 443); err != nil || !resp.GetAllow() {
		t.Errorf("after the channel's approval: %v %v", resp, err)
	}
	// Reports count against the cap: 1000 of 1024 sent, then 100 more.
	report := func(id string, out int64) {
		t.Helper()
		_, err := g.gate.Report(ctx, &pb.ReportRequest{ChickId: id, Key: g.key(id), Host: "pypi.org", Port: 443,
			Outcome: pb.EgressOutcome_EGRESS_OUTCOME_ALLOWED, BytesOut: out})
		must(t, err)
	}
	report(a, 1000)
	if resp, _ := ask(a, g.key(a), "pypi.org", 443); !resp.GetAllow() || resp.GetBytesRemaining() != 24 {
		t.Errorf("after 1000 bytes: %v", resp)
	}
	report(a, 100)
	if resp, _ := ask(a, g.key(a), "pypi.org", 443); resp.GetAllow() || resp.GetReason() != "byte cap reached" {
		t.Errorf("over the cap: %v", resp)
	}
	if resp, _ := ask(b, g.key(b), "pypi.org", 443); !resp.GetAllow() || resp.GetBytesRemaining() != 1024 {
		t.Errorf("the other chick's cap: %v", resp)
	}
	// A new policy (Mother restarted) reads what the chick sent from its
	// egress log.
	p2, err := egress.NewPolicy(egress.Options{Config: g.h.Config(), LoadSent: func(id string) int64 { n, _ := g.h.EgressSent(id); return n }})
	must(t, err)
	p2.SetConfig(func() config.Chicks { c := g.h.Config(); c.Egress.MaxBytes = "1k"; return c }())
	if rem, _ := p2.Remaining(a); rem != 0 {
		t.Errorf("after a restart chick A may send %d more, want 0", rem)
	}
	// An ended chick is refused.
	if _, err := g.h.Stop(a, hatchery.ReasonKilled, "test", 0); err != nil {
		t.Fatal(err)
	}
	ended, _ := g.h.Ended(a)
	<-ended
	if _, err := ask(a, g.key(a), "pypi.org", 443); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "ended") {
		t.Errorf("ended chick: %v, want PermissionDenied (ended)", err)
	}
}

func TestGateReport(t *testing.T) {
	t.Parallel()
	g := newGateFixture(t)
	id, _ := g.spawn(t)
	ctx := g.as(t.Context())
	key := g.key(id)
	for _, r := range []*pb.ReportRequest{
		{ChickId: id, Key: key, Host: "pypi.org", Port: 443, Outcome: pb.EgressOutcome_EGRESS_OUTCOME_ALLOWED, Address: "151.101.0.223", BytesOut: 700, BytesIn: 5000, Duration: durationpb.New(2 * time.Second)},
		{ChickId: id, Key: key, Host: "github.com", Port: 443, Outcome: pb.EgressOutcome_EGRESS_OUTCOME_REFUSED},
		{ChickId: id, Key: key, Host: "evil.example", Port: 80, Outcome: pb.EgressOutcome_EGRESS_OUTCOME_BLOCKED_ADDRESS, Reason: "resolves to 127.0.0.1 (loopback)"},
		// A refusal of the gate's own (a connection limit), with the
		// nest-only key a chick of network "none" has.
		{ChickId: id, Key: g.secret.NestKey(g.h.Instance(), "local", id), Host: "nest.sock", Outcome: pb.EgressOutcome_EGRESS_OUTCOME_REFUSED, Reason: "refused: connection limit"},
	} {
		if _, err := g.gate.Report(ctx, r); err != nil {
			t.Fatalf("report %v: %v", r, err)
		}
	}
	for _, bad := range []*pb.ReportRequest{
		{ChickId: id, Key: key, Host: "pypi.org", Port: 443},                                                                 // no outcome
		{ChickId: id, Key: key, Host: "pypi.org", Port: 443, Outcome: pb.EgressOutcome_EGRESS_OUTCOME_ALLOWED, BytesOut: -1}, // negative
		{ChickId: id, Key: key, Host: "", Port: 443, Outcome: pb.EgressOutcome_EGRESS_OUTCOME_ALLOWED},                       // no host
		{ChickId: id, Key: g.key("c-x"), Host: "pypi.org", Port: 443, Outcome: pb.EgressOutcome_EGRESS_OUTCOME_ALLOWED},      // other key
	} {
		if _, err := g.gate.Report(ctx, bad); status.Code(err) == codes.OK {
			t.Errorf("bad report %v accepted", bad)
		}
	}
	got := g.heard.all()
	if len(got) != 4 || got[3].Host != "nest.sock" || got[3].Reason != "refused: connection limit" || got[0].Outcome != hatchery.EgressAllowed || got[0].BytesOut != 700 || got[0].Duration != 2*time.Second ||
		got[1].Outcome != hatchery.EgressRefused || got[1].Reason != "not allowed for this chick" ||
		got[2].Outcome != hatchery.EgressBlockedAddress || !strings.Contains(got[2].Reason, "loopback") {
		t.Errorf("the subscriber heard %+v", got)
	}
	if n := g.policy.Sent(id); n != 700 {
		t.Errorf("ledger: %d bytes sent, want 700", n)
	}
	// A connection that ends after its chick is still counted.
	if _, err := g.h.Stop(id, hatchery.ReasonKilled, "test", 0); err != nil {
		t.Fatal(err)
	}
	ended, _ := g.h.Ended(id)
	<-ended
	if _, err := g.gate.Report(ctx, &pb.ReportRequest{ChickId: id, Key: key, Host: "pypi.org", Port: 443, Outcome: pb.EgressOutcome_EGRESS_OUTCOME_ALLOWED, BytesOut: 5}); err != nil {
		t.Errorf("report after the chick ended: %v", err)
	}
	srv := httptest.NewServer(g.mx.Handler())
	defer srv.Close()
	s := metricstest.Get(t, srv.URL+"/metrics")
	for _, w := range []struct {
		labels []string
		v      float64
	}{
		{[]string{"destination", "pypi.org:443", "outcome", "allowed"}, 2},
		{[]string{"destination", "github.com:443", "outcome", "refused"}, 1},
		{[]string{"destination", "evil.example:80", "outcome", "blocked_address"}, 1},
	} {
		if v, ok := s.Value("mother_gate_connections_total", w.labels...); !ok || v != w.v {
			t.Errorf("mother_gate_connections_total%v = %v, want %v\n%s", w.labels, v, w.v, s.Series("mother_gate_connections_total"))
		}
	}
	if v, _ := s.Value("mother_chick_egress_bytes_total", "direction", "out"); v != 705 {
		t.Errorf("bytes out = %v, want 705", v)
	}
	if len(g.heard.all()) != 4 {
		t.Error("a report after the chick ended reached the channel")
	}
}

// accessDesk answers RequestAccess as the test says.
type accessDesk struct {
	mu    sync.Mutex
	asked []string
	grant egress.Grant
	err   error
}

func (d *accessDesk) RequestAccess(_ context.Context, in hatchery.Info, dest, reason string) (egress.Grant, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked = append(d.asked, in.ID+" "+in.Channel+" "+dest+" "+reason)
	return d.grant, d.err
}

func TestRequestAccessGoesToTheDesk(t *testing.T) {
	t.Parallel()
	g := newGateFixture(t)
	id, tok := g.spawn(t)
	ctx := wire.Credentials(t.Context(), id, tok)
	req := &pb.RequestAccessRequest{Destination: "pypi.org:443", Reason: "install\n  requests"}
	if _, err := g.client.RequestAccess(ctx, req); status.Code(err) != codes.Unavailable {
		t.Errorf("without a desk: %v, want Unavailable", err)
	}
	d := &accessDesk{grant: egress.Grant{Granted: true, Scope: egress.ScopeChannel, Message: "approved by @ana for this channel"}}
	g.srv.SetAccess(d)
	resp, err := g.client.RequestAccess(ctx, req)
	if err != nil || !resp.GetGranted() || resp.GetScope() != pb.AccessScope_ACCESS_SCOPE_CHANNEL || resp.GetMessage() != d.grant.Message {
		t.Errorf("granted: %v %v", resp, err)
	}
	if want := id + " cli/local pypi.org:443 install requests"; len(d.asked) != 1 || d.asked[0] != want {
		t.Errorf("the desk was asked %q, want %q", d.asked, want)
	}
	if _, err := g.client.RequestAccess(ctx, &pb.RequestAccessRequest{Destination: "not a host!"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("bad destination: %v", err)
	}
	d.err = egress.ErrUnavailable
	if _, err := g.client.RequestAccess(ctx, req); status.Code(err) != codes.Unavailable {
		t.Errorf("desk unavailable: %v, want Unavailable (the chick asks again)", err)
	}
	// The gate's credentials cannot ask.
	if _, err := g.client.RequestAccess(g.as(t.Context()), req); status.Code(err) != codes.Unauthenticated {
		t.Errorf("RequestAccess with the gate's credentials: %v", err)
	}
}
