package gate

import (
	"net/netip"
	"strings"

	"github.com/mother-chat/mother/pkg/privaddr"
)

// blockedKind says why a chick may not reach a (privaddr.Kind), or ""
// when it may.
func blockedKind(a netip.Addr, local map[netip.Addr]bool) string {
	return privaddr.Kind(a, local)
}

// trustSet is the exact addresses (with or without a port) the operator
// listed: the only blocked addresses the gate may dial.
type trustSet struct {
	addrs map[netip.Addr]bool
	ports map[netip.AddrPort]bool
}

func newTrustSet(list []string) trustSet {
	t := trustSet{addrs: map[netip.Addr]bool{}, ports: map[netip.AddrPort]bool{}}
	for _, s := range list {
		s = strings.TrimSpace(s)
		if ap, err := netip.ParseAddrPort(s); err == nil {
			t.ports[netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())] = true
		} else if a, err := parseAddr(s); err == nil {
			t.addrs[a] = true
		}
	}
	return t
}

func (t trustSet) has(a netip.Addr, port uint16) bool {
	return t.addrs[a] || t.ports[netip.AddrPortFrom(a, port)]
}

// parseAddr parses an address, with or without IPv6 brackets, without a
// zone, unmapped.
func parseAddr(s string) (netip.Addr, error) {
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, err
	}
	return a.Unmap().WithZone(""), nil
}
