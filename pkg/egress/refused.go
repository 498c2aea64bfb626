package egress

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/mother-chat/mother/pkg/privaddr"
)

// PendingCaps are how many access requests may wait for an admin at once,
// per chick and per channel (chicks.egress.maxPendingPerChick and
// maxPendingPerChannel).
func (p *Policy) PendingCaps() (perChick, perChannel int) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.cfg.perChick, p.cfg.perChannel
}

// Refused says why chick c's gate will refuse destination (in the form
// ParseRequest returns) whatever an admin approves, as "127.0.0.1 is a
// loopback address", or "" when that cannot be known before the gate
// resolves it. The gate refuses every address privaddr names (loopback,
// private, link-local and the like, in every form that carries one)
// unless the operator listed that exact address (Trusted). That is known
// here for an address literal, for a name chicks.egress.hosts maps only
// to such addresses, and for localhost and its subdomains (RFC 6761:
// always loopback). The gate host's own public addresses are not known
// here: the gate still refuses those.
func (p *Policy) Refused(c ChickInfo, destination string) string {
	e, err := parseEntry(destination)
	if err != nil || e.wildcard || e.port == 0 {
		return ""
	}
	trusted := p.Trusted(c, e.port)
	blocked := func(a netip.Addr) string {
		a = a.Unmap().WithZone("")
		if slices.Contains(trusted, netJoin(a.String(), e.port)) {
			return ""
		}
		return privaddr.Kind(a, nil)
	}
	if e.addr.IsValid() {
		k := blocked(e.addr)
		if k == "" {
			return ""
		}
		if v4, ok := strings.CutSuffix(k, " in"); ok {
			return e.addr.String() + " carries " + v4 + ": the gate refuses it"
		}
		return e.addr.String() + " is " + k + ": the gate refuses it"
	}
	if mapped := p.Addresses(e.name); len(mapped) > 0 {
		first := ""
		for _, s := range mapped {
			a, err := netip.ParseAddr(s)
			if err != nil {
				continue
			}
			k := blocked(a)
			if k == "" {
				return "" // the gate may dial this one
			}
			if first == "" {
				first = k + " " + a.String()
			}
		}
		if first == "" {
			return ""
		}
		return e.name + " resolves (chicks.egress.hosts) to " + first + ", which the operator did not list: the gate refuses it"
	}
	if e.name == "localhost" || strings.HasSuffix(e.name, ".localhost") {
		return e.name + " is a loopback address: the gate refuses it"
	}
	return ""
}

// RefusesPrivate is what an approval of a name says of the addresses the
// gate refuses, which only its resolution at connection time tells.
const RefusesPrivate = "the gate still refuses it if it resolves to a loopback, private or link-local address (or the gate host's own) that the operator did not list"
