package mother

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/mother-chat/mother/pkg/egress"
	"github.com/mother-chat/mother/pkg/hatchery"
)

// What a chick's request_access may not do (issue 42): ask for what the
// gate will refuse anyway, or keep more requests waiting for an admin
// than chicks.egress.maxPendingPerChick (per chick) and
// maxPendingPerChannel (per channel) allow. Both are answered at once,
// plainly, and nobody is asked.

// accessRefused answers a request for a destination the gate will refuse
// whatever an admin says (egress.Policy.Refused): refused at once, with
// the reason, nobody asked. ok is false when it cannot be known here.
func (m *Mother) accessRefused(in hatchery.Info, dest string) (g egress.Grant, ok bool) {
	why := m.egress.Refused(egress.ChickInfo{ID: in.ID, Channel: in.Channel, Tier: in.Tier}, dest)
	if why == "" {
		return egress.Grant{}, false
	}
	m.logger.Debug("access request refused: the gate refuses the destination", "chick", in.ID, "destination", dest, "why", why)
	return egress.Grant{Message: "refused: " + why + ", whatever an admin says; nobody was asked. " +
		"Only the operator can allow such an address, by listing it in chicks.egress.allow"}, true
}

// accessCapLocked says why chick in may not add a pending request now
// (too many pending for it or its channel), or "". Called with accessMu
// held.
func (m *Mother) accessCapLocked(in hatchery.Info) string {
	perChick, perChannel := m.egress.PendingCaps()
	mine, channel := 0, 0
	for _, r := range m.access {
		if r.chick.ID == in.ID {
			mine++
		}
		if r.chick.Channel == in.Channel {
			channel++
		}
	}
	switch {
	case mine >= perChick:
		return fmt.Sprintf("refused at once: this chick already has %d access requests pending (chicks.egress.maxPendingPerChick is %d); nobody was asked. Wait for their answers, then ask again", mine, perChick)
	case channel >= perChannel:
		return fmt.Sprintf("refused at once: this channel already has %d access requests pending (chicks.egress.maxPendingPerChannel is %d); nobody was asked. Ask again later", channel, perChannel)
	}
	return ""
}

// approvalRider is what an approval of dest adds for the chick and the
// channel: for a name, that the gate still refuses what resolves to a
// private address (only the resolution at connection time tells);
// nothing for a public address literal.
func approvalRider(dest string) string {
	host := dest
	if i := strings.LastIndex(dest, ":"); i > 0 {
		host = dest[:i]
	}
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return ""
	}
	return "; " + egress.RefusesPrivate
}
