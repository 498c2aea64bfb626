package gate_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/egress"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// TestEgressDecisionPath walks a chick's connection through the whole
// decision: Mother's policy (a real egress.Policy, answering as the nest's
// Authorize does: allowed, the operator's addresses for the name, the
// trusted addresses for the port asked for) and the gate (resolution,
// address checks, dial) over its real sockets, to two loopback servers
// of the test's, A and B. The operator listed 127.0.0.1 at A's port only:
// whatever name the chick uses, allowed by config or approved in chat,
// and in whatever IPv6 form the address comes, B is never reached.
func TestEgressDecisionPath(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	srvA, srvB := startEcho(t), startEcho(t)
	a, b := srvA.port, srvB.port
	cfg := &config.Config{}
	cfg.SetDefaults(t.TempDir())
	cfg.Chicks.Egress.Allow = []string{
		"mirror.test:" + a, "127.0.0.1:" + a, // a name and its address, both at A's port
		"any.test", "dns.test", // names at any port
		"compat.test", "nat64.test", "mapped.test", "sixtofour.test",
	}
	cfg.Chicks.Egress.Hosts = map[string]string{
		"mirror.test": "127.0.0.1", "any.test": "127.0.0.1", "approved.test": "127.0.0.1",
		"compat.test": "::127.0.0.1", "nat64.test": "64:ff9b::127.0.0.1", "mapped.test": "::ffff:127.0.0.1",
		"sixtofour.test": "2002:7f00:1::1",
	}
	p, err := egress.NewPolicy(egress.Options{Config: cfg.Chicks})
	if err != nil {
		t.Fatal(err)
	}
	chick := egress.ChickInfo{ID: "c-1", Channel: "cli/local", Tier: "local"}
	// Approved in chat: a name at B's port, and an IPv4-compatible form of
	// the listed address at A's port.
	for _, d := range []string{"approved.test:" + b, "[::127.0.0.1]:" + a} {
		if err := p.Approve(chick, egress.ScopeChick, d); err != nil {
			t.Fatal(err)
		}
	}
	e.setName("dns.test", "127.0.0.1") // resolved by DNS, not by config
	e.m.SetDecide(func(req *pb.AuthorizeRequest) *pb.AuthorizeResponse {
		ok, reason := p.Allowed(chick, req.GetHost(), int(req.GetPort()))
		if !ok {
			return &pb.AuthorizeResponse{Reason: reason}
		}
		return &pb.AuthorizeResponse{Allow: true, Addresses: p.Addresses(req.GetHost()), Trusted: p.Trusted(chick, int(req.GetPort()))}
	})
	loopB := "resolves to a loopback address 127.0.0.1)"
	for _, c := range []struct {
		name, dest string
		code       int
		why        string // the 403's reason
		reach      *echo
	}{
		{"listed name at its port", "mirror.test:" + a, http.StatusOK, "", srvA},
		{"listed name at another port", "mirror.test:" + b, http.StatusForbidden, "not allowed for this chick)", nil},
		{"listed address at its port", "127.0.0.1:" + a, http.StatusOK, "", srvA},
		{"listed address at another port", "127.0.0.1:" + b, http.StatusForbidden, "not allowed for this chick)", nil},
		{"mapped literal of the listed address", "[::ffff:127.0.0.1]:" + a, http.StatusOK, "", srvA},
		{"mapped literal at another port", "[::ffff:127.0.0.1]:" + b, http.StatusForbidden, "not allowed for this chick)", nil},
		{"name at any port, to the listed address at its port", "any.test:" + a, http.StatusOK, "", srvA},
		{"name at any port, to the listed address at another port", "any.test:" + b, http.StatusForbidden, loopB, nil},
		{"name by DNS, at the listed port", "dns.test:" + a, http.StatusOK, "", srvA},
		{"name by DNS, at another port", "dns.test:" + b, http.StatusForbidden, loopB, nil},
		{"name approved in chat at another port", "approved.test:" + b, http.StatusForbidden, loopB, nil},
		{"name resolving to the mapped form, at another port", "mapped.test:" + b, http.StatusForbidden, loopB, nil},
		{"name resolving to the IPv4-compatible form", "compat.test:" + a, http.StatusForbidden, "resolves to a loopback address 127.0.0.1 in ::7f00:1)", nil},
		{"name resolving to the NAT64 form", "nat64.test:" + a, http.StatusForbidden, "resolves to a loopback address 127.0.0.1 in 64:ff9b::7f00:1)", nil},
		{"name resolving to the 6to4 form", "sixtofour.test:" + a, http.StatusForbidden, "resolves to a loopback address 127.0.0.1 in 2002:7f00:1::1)", nil},
		{"IPv4-compatible literal approved in chat", "[::127.0.0.1]:" + a, http.StatusForbidden, "carries a loopback address 127.0.0.1)", nil},
	} {
		beforeA, beforeB := srvA.accepted.Load(), srvB.accepted.Load()
		conn, br, code, body := e.connect(t, c.dest)
		if code != c.code || (c.why != "" && !strings.Contains(body, "("+c.why)) {
			t.Errorf("%s: CONNECT %s = %d %q, want %d (%s", c.name, c.dest, code, body, c.code, c.why)
		}
		if code == http.StatusOK {
			roundTrip(t, conn, br, "ping")
		}
		conn.Close()
		if c.why != "not allowed for this chick)" {
			e.m.NextReport(t) // Mother's own refusals are not reported
		}
		gotA, gotB := srvA.accepted.Load()-beforeA, srvB.accepted.Load()-beforeB
		wantA, wantB := int32(0), int32(0)
		if c.reach == srvA {
			wantA = 1
		}
		if gotA != wantA || gotB != wantB {
			t.Errorf("%s: server A saw %d connections, B %d; want %d and %d", c.name, gotA, gotB, wantA, wantB)
		}
	}
}
