// Package privaddr says which addresses a chick may not reach through its
// gate: loopback, private, link-local, unspecified, multicast, reserved,
// the gate host's own, and IPv6 addresses that carry one of those IPv4
// addresses (IPv4-mapped, -compatible and -translated, NAT64, 6to4,
// Teredo, ISATAP). The gate refuses them (pkg/gate); Mother refuses a
// chick's request for one before an admin is asked (pkg/mother).
package privaddr

import "net/netip"

var (
	sharedSpace = netip.MustParsePrefix("100.64.0.0/10")   // carrier-grade NAT (RFC 6598)
	thisNet     = netip.MustParsePrefix("0.0.0.0/8")       // "this network"
	reserved4   = netip.MustParsePrefix("240.0.0.0/4")     // reserved, and broadcast
	siteLocal   = netip.MustParsePrefix("fec0::/10")       // deprecated site-local
	compat4     = netip.MustParsePrefix("::/96")           // IPv4-compatible (RFC 4291, deprecated)
	translated4 = netip.MustParsePrefix("::ffff:0:0:0/96") // IPv4-translated (SIIT, RFC 2765)
	nat64       = netip.MustParsePrefix("64:ff9b::/96")    // well-known NAT64 prefix (RFC 6052)
	nat64Local  = netip.MustParsePrefix("64:ff9b:1::/48")  // local-use NAT64 (RFC 8215)
	sixToFour   = netip.MustParsePrefix("2002::/16")       // 6to4 (RFC 3056)
	teredo      = netip.MustParsePrefix("2001::/32")       // Teredo (RFC 4380)
)

// Kind says why a chick may not reach a, as "a loopback address"
// and the like, or "" when a is a public address. local holds the gate
// host's own addresses. An IPv6 address that carries an IPv4 one is
// judged by that address too (embedded4), which the kind then names:
// "a private address 10.0.0.1 in ::a00:1".
func Kind(a netip.Addr, local map[netip.Addr]bool) string {
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
	for _, v4 := range embedded4(a) {
		if k := Kind(v4, local); k != "" {
			return k + " " + v4.String() + " in"
		}
	}
	return ""
}

// embedded4 are the IPv4 addresses an IPv6 address a carries where a
// kernel, a tunnel or a translator on the way would deliver to them
// (IPv4-mapped addresses were unmapped before, by Unmap):
//
//   - IPv4-compatible ::a.b.c.d (deprecated, still parsed; an automatic
//     tunnel (sit) sends it to a.b.c.d) and IPv4-translated
//     ::ffff:0:a.b.c.d (SIIT);
//   - NAT64: the well-known 64:ff9b::/96, and the local-use 64:ff9b:1::/48
//     at every place RFC 6052 allows for its prefix lengths (/48 to /96),
//     since the gate cannot know which one a translator uses (at a site
//     whose translator uses a prefix shorter than /96, a public address
//     that reads as a private one at another place is refused too);
//   - 6to4 2002:a.b.c.d::/48;
//   - Teredo 2001:0::/32: its server's address and its client's
//     (stored inverted);
//   - ISATAP: an interface id 0:5efe:a.b.c.d (or 200:5efe:...) under any
//     prefix.
//
// A public address that only happens to look like one of these is refused
// only when the IPv4 address in it would be; the cost is nil for real
// public destinations, which do not embed private IPv4 addresses.
func embedded4(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	v4 := func(i, j, k, l int) netip.Addr { return netip.AddrFrom4([4]byte{b[i], b[j], b[k], b[l]}) }
	var out []netip.Addr
	switch {
	case compat4.Contains(a), translated4.Contains(a), nat64.Contains(a):
		out = append(out, v4(12, 13, 14, 15))
	case nat64Local.Contains(a):
		// RFC 6052 2.2: prefix /48, /56, /64, /96 (bits 64-71 are zero).
		// A place that reads 0.x.x.x is not the translator's (no
		// translator sends to "this network"): the zeros of a /96
		// address, read at the /48 place, must not refuse it.
		for _, c := range []netip.Addr{v4(6, 7, 9, 10), v4(7, 9, 10, 11), v4(9, 10, 11, 12), v4(12, 13, 14, 15)} {
			if !thisNet.Contains(c) {
				out = append(out, c)
			}
		}
	case sixToFour.Contains(a):
		out = append(out, v4(2, 3, 4, 5))
	case teredo.Contains(a):
		out = append(out, v4(4, 5, 6, 7), netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}))
	}
	if b[8]&^0x03 == 0 && b[9] == 0 && b[10] == 0x5e && b[11] == 0xfe {
		out = append(out, v4(12, 13, 14, 15)) // ISATAP
	}
	return out
}
