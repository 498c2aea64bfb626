package egress

import (
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/config"
)

// TestRefused: a destination the gate will refuse whatever an admin says
// is known before anyone is asked: an address literal privaddr names (in
// every form that carries one), a name chicks.egress.hosts maps only to
// such addresses, localhost; an address the operator listed is not; a
// name the gate resolves by DNS cannot be known.
func TestRefused(t *testing.T) {
	t.Parallel()
	cc := config.Chicks{}
	cc.Egress.Allow = []string{"10.0.0.9:8080"}
	cc.Egress.Hosts = map[string]string{"loop.test": "127.0.0.1", "lan.test": "10.0.0.5", "listed.test": "10.0.0.9", "pub.test": "192.0.2.7", "mapped.test": "::ffff:127.0.0.1"}
	p, err := NewPolicy(Options{Config: cc})
	if err != nil {
		t.Fatal(err)
	}
	c := ChickInfo{ID: "c-1", Channel: "cli/local"}
	for _, tc := range []struct{ dest, want string }{
		{"127.0.0.1:8080", "127.0.0.1 is a loopback address"},
		{"[::1]:8080", "::1 is a loopback address"},
		{"[::ffff:127.0.0.1]:8080", "127.0.0.1 is a loopback address"},
		{"[::127.0.0.1]:8080", "::7f00:1 carries a loopback address 127.0.0.1"},
		{"[::ffff:0:127.0.0.1]:8080", "carries a loopback address 127.0.0.1"},
		{"[64:ff9b::127.0.0.1]:8080", "carries a loopback address 127.0.0.1"},
		{"[2002:7f00:1::]:8080", "carries a loopback address 127.0.0.1"},
		{"[2001:0:7f00:1::]:8080", "carries a loopback address 127.0.0.1"},
		{"[2001:db8::5efe:127.0.0.1]:8080", "carries a loopback address 127.0.0.1"},
		{"169.254.169.254:80", "is a link-local address"},
		{"10.1.2.3:443", "is a private address"},
		{"0.0.0.0:80", "is an unspecified address"},
		{"224.0.0.1:80", "is a link-local address"},
		{"239.1.2.3:80", "is a multicast address"},
		{"localhost:8080", "localhost is a loopback address"},
		{"db.localhost:5432", "db.localhost is a loopback address"},
		{"loop.test:443", "loop.test resolves (chicks.egress.hosts) to a loopback address 127.0.0.1"},
		{"mapped.test:443", "resolves (chicks.egress.hosts) to a loopback address 127.0.0.1"},
		{"lan.test:443", "resolves (chicks.egress.hosts) to a private address 10.0.0.5"},
		{"10.0.0.9:9090", "10.0.0.9 is a private address"}, // listed at 8080 only
		// Not known to be refused.
		{"10.0.0.9:8080", ""},
		{"listed.test:8080", ""},
		{"pub.test:443", ""},
		{"192.0.2.7:443", ""},
		{"pypi.org:443", ""},
	} {
		got := p.Refused(c, tc.dest)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("Refused(%q) = %q, want %q", tc.dest, got, tc.want)
		}
	}
}

func TestPendingCaps(t *testing.T) {
	t.Parallel()
	p, err := NewPolicy(Options{Config: config.Chicks{}})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := p.PendingCaps(); a != config.DefaultAccessPendingPerChick || b != config.DefaultAccessPendingPerChannel {
		t.Errorf("PendingCaps() = %d, %d; want the defaults", a, b)
	}
	cc := config.Chicks{}
	cc.Egress.MaxPendingPerChick, cc.Egress.MaxPendingPerChannel = 1, 2
	p.SetConfig(cc)
	if a, b := p.PendingCaps(); a != 1 || b != 2 {
		t.Errorf("PendingCaps() after a reload = %d, %d; want 1, 2", a, b)
	}
}
