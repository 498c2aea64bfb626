package gate

import (
	"net/netip"
	"strings"
)

var (
	sharedSpace = netip.MustParsePrefix("100.64.0.0/10")  // carrier-grade NAT (RFC 6598)
	thisNet     = netip.MustParsePrefix("0.0.0.0/8")      // "this network"
	reserved4   = netip.MustParsePrefix("240.0.0.0/4")    // reserved, and broadcast
	siteLocal   = netip.MustParsePrefix("fec0::/10")      // deprecated site-local
	nat64       = netip.MustParsePrefix("64:ff9b::/96")   // well-known NAT64 prefix
	nat64Local  = netip.MustParsePrefix("64:ff9b:1::/48") // local-use NAT64
	sixToFour   = netip.MustParsePrefix("2002::/16")      // 6to4
)

// blockedKind says why a chick may not reach a, as "a loopback address"
// and the like, or "" when a is a public address. local holds the gate
// host's own addresses. An IPv6 address that embeds an IPv4 one a
// translator would reach (NAT64, 6to4) is judged by that address, which
// the kind then names.
func blockedKind(a netip.Addr, local map[netip.Addr]bool) string {
	a = a.Unmap().WithZone("")
	switch {
	case !a.IsValid():
		return "an invalid address"
	case a.IsUnspecified() || thisNet.Contains(a):
		return "an unspecified address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return "a link-local address"
	case a.IsMulticast():
		return "a multicast address"
	case a.IsPrivate() || sharedSpace.Contains(a) || siteLocal.Contains(a):
		return "a private address"
	case reserved4.Contains(a):
		return "a reserved address"
	case local[a]:
		return "an address of the gate's own host"
	}
	// IPv6 forms that carry an IPv4 address a translator would reach.
	if a.Is6() {
		b := a.As16()
		var v4 netip.Addr
		switch {
		case nat64.Contains(a) || nat64Local.Contains(a):
			v4 = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		case sixToFour.Contains(a):
			v4 = netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
		}
		if v4.IsValid() {
			if k := blockedKind(v4, local); k != "" {
				return k + " " + v4.String() + " in"
			}
		}
	}
	return ""
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
