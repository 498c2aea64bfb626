package gate

import (
	"net/netip"
	"testing"
)

// TestBlockedKind: every address a chick's connection may end at is
// judged by what it reaches: an IPv6 form that carries an IPv4 address
// (mapped, compatible, translated, NAT64, 6to4, Teredo, ISATAP) is that
// address; public addresses, and IPv6 ones that only carry public IPv4
// addresses, pass.
func TestBlockedKind(t *testing.T) {
	t.Parallel()
	local := map[netip.Addr]bool{netip.MustParseAddr("203.0.113.7"): true}
	for _, c := range []struct{ addr, want string }{
		// Public.
		{"151.101.0.223", ""},
		{"2a04:4e42::223", ""},
		{"2001:db8::1", ""},
		// Plain kinds.
		{"127.0.0.1", "a loopback address"},
		{"::1", "a loopback address"},
		{"10.0.0.1", "a private address"},
		{"fd00::1", "a private address"},
		{"169.254.169.254", "a link-local address"},
		{"fe80::1%eth0", "a link-local address"},
		{"0.0.0.0", "an unspecified address"},
		{"::", "an unspecified address"},
		{"203.0.113.7", "an address of the gate's own host"},
		// IPv4-mapped: the address itself (Unmap).
		{"::ffff:10.0.0.1", "a private address"},
		{"::ffff:127.0.0.1", "a loopback address"},
		{"::ffff:169.254.169.254", "a link-local address"},
		{"::ffff:203.0.113.7", "an address of the gate's own host"},
		{"::ffff:151.101.0.223", ""},
		// IPv4-compatible (deprecated, still parsed).
		{"::10.0.0.1", "a private address 10.0.0.1 in"},
		{"::127.0.0.1", "a loopback address 127.0.0.1 in"},
		{"::169.254.169.254", "a link-local address 169.254.169.254 in"},
		{"::192.168.1.1", "a private address 192.168.1.1 in"},
		{"::203.0.113.7", "an address of the gate's own host 203.0.113.7 in"},
		{"::0.0.0.2", "an unspecified address 0.0.0.2 in"},
		{"::151.101.0.223", ""},
		// IPv4-translated (SIIT).
		{"::ffff:0:10.0.0.1", "a private address 10.0.0.1 in"},
		{"::ffff:0:151.101.0.223", ""},
		// NAT64, well-known prefix.
		{"64:ff9b::10.0.0.5", "a private address 10.0.0.5 in"},
		{"64:ff9b::127.0.0.1", "a loopback address 127.0.0.1 in"},
		{"64:ff9b::151.101.0.223", ""},
		// NAT64, local-use prefix, at each RFC 6052 place.
		{"64:ff9b:1::10.0.0.5", "a private address 10.0.0.5 in"},    // /96
		{"64:ff9b:1:0:a:0:500:0", "a private address 10.0.0.5 in"},  // /64: bytes 9-12
		{"64:ff9b:1:977f:0:1::", "a loopback address 127.0.0.1 in"}, // /56: bytes 7, 9-11 (151.127.0.0 at /48)
		{"64:ff9b:1:a00:0:500::", "a private address 10.0.0.5 in"},  // /48: bytes 6, 7, 9, 10
		{"64:ff9b:1::151.101.0.223", ""},                            // DNS64 at /96: the zeros are no address
		{"64:ff9b:1:9765:0:df00::", ""},                             // 151.101.0.223 at /48
		// 6to4.
		{"2002:a00:1::1", "a private address 10.0.0.1 in"},
		{"2002:7f00:1::1", "a loopback address 127.0.0.1 in"},
		{"2002:9765:df::1", ""}, // 151.101.0.223
		// Teredo: server 4-7, client inverted at 12-15.
		{"2001:0:a00:1::1", "a private address 10.0.0.1 in"},
		{"2001:0:9765:df:0:0:f5ff:fffe", "a private address 10.0.0.1 in"},
		{"2001:0:9765:df:0:0:6894:ff20", ""}, // client 151.107.0.223
		// ISATAP interface ids.
		{"2a04:4e42::5efe:a00:1", "a private address 10.0.0.1 in"},
		{"2a04:4e42::200:5efe:c0a8:101", "a private address 192.168.1.1 in"},
		{"2a04:4e42::5efe:9765:df", ""},
	} {
		if got := blockedKind(netip.MustParseAddr(c.addr), local); got != c.want {
			t.Errorf("blockedKind(%s) = %q, want %q", c.addr, got, c.want)
		}
	}
}

// TestTrustSet: an address Mother trusts with a port is trusted at that
// port only; without one (an operator's entry without a port), at every
// port; mapped forms are the address, other embeddings are not.
func TestTrustSet(t *testing.T) {
	t.Parallel()
	ts := newTrustSet([]string{"10.0.0.5:8080", "[fd00::7]:443", "192.168.1.1", "[::ffff:172.16.0.9]:22", "junk", "10.0.0.6:99999"})
	for _, c := range []struct {
		addr string
		port uint16
		want bool
	}{
		{"10.0.0.5", 8080, true},
		{"10.0.0.5", 22, false},
		{"10.0.0.5", 80, false},
		{"fd00::7", 443, true},
		{"fd00::7", 8443, false},
		{"192.168.1.1", 22, true},
		{"192.168.1.1", 65535, true},
		{"172.16.0.9", 22, true},
		{"172.16.0.9", 23, false},
		{"::10.0.0.5", 8080, false},     // IPv4-compatible: another address
		{"64:ff9b::a00:5", 8080, false}, // NAT64 form: another address
		{"10.0.0.6", 9999, false},       // its entry was no address and port
		{"10.0.0.7", 8080, false},
	} {
		if got := ts.has(netip.MustParseAddr(c.addr), c.port); got != c.want {
			t.Errorf("trusted %s port %d = %v, want %v", c.addr, c.port, got, c.want)
		}
	}
}
