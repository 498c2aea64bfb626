package privaddr

import (
	"net/netip"
	"testing"
)

// TestKind: loopback in every form the gate recognises is named, with the
// IPv4 address an IPv6 form carries; public addresses are not; the gate
// host's own addresses are.
func TestKind(t *testing.T) {
	t.Parallel()
	local := map[netip.Addr]bool{netip.MustParseAddr("203.0.113.7"): true}
	for _, c := range []struct{ addr, want string }{
		{"127.0.0.1", "a loopback address"},
		{"::1", "a loopback address"},
		{"::ffff:127.0.0.1", "a loopback address"},
		{"::127.0.0.1", "a loopback address 127.0.0.1 in"},
		{"::ffff:0:127.0.0.1", "a loopback address 127.0.0.1 in"},
		{"64:ff9b::127.0.0.1", "a loopback address 127.0.0.1 in"},
		{"2002:7f00:1::", "a loopback address 127.0.0.1 in"},
		{"2001:0:7f00:1::", "a loopback address 127.0.0.1 in"},
		{"2001:db8::5efe:127.0.0.1", "a loopback address 127.0.0.1 in"},
		{"10.0.0.5", "a private address"},
		{"169.254.169.254", "a link-local address"},
		{"0.0.0.0", "an unspecified address"},
		{"203.0.113.7", "an address of the gate's own host"},
		{"192.0.2.7", ""},
		{"2606:4700::1111", ""},
	} {
		if got := Kind(netip.MustParseAddr(c.addr), local); got != c.want {
			t.Errorf("Kind(%s) = %q, want %q", c.addr, got, c.want)
		}
	}
}
