package daemon

import (
	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/mother"
)

// reportMeter charges what Mother's model reads about an ended chick to
// that chick, in the broker's ledger, as the chick's own calls are.
type reportMeter struct{ b *broker.Broker }

var _ mother.ReportMeter = reportMeter{}

func (r reportMeter) ChargeReport(in hatchery.Info, text string) (int64, error) {
	return r.b.ChargeReport(broker.Caller{ChickID: in.ID, Channel: in.Channel, Tier: in.Tier, User: in.Requester()}, text)
}
