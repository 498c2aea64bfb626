package gate

import (
	"context"
	"time"

	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// drainFor bounds how long a stopping gate keeps sending queued reports.
const drainFor = 3 * time.Second

// report queues r for Mother without waiting: a full queue (Mother slow or
// away) drops it, with a log line.
func (g *Gate) report(r *pb.ReportRequest) {
	select {
	case g.reports <- r:
	default:
		g.log.Warn("report dropped: queue full", "chick", r.GetChickId(), "host", r.GetHost(), "port", r.GetPort(), "outcome", r.GetOutcome().String())
	}
}

// sendReports delivers queued reports one by one until the queue is
// closed and empty. Serve ends reportCtx drainFor after it closes the
// queue, which fails whatever is left at once.
func (g *Gate) sendReports() {
	defer g.reportsWG.Done()
	for r := range g.reports {
		ctx, cancel := context.WithTimeout(wire.Credentials(g.reportCtx, g.opts.HostName, g.opts.Token), g.opts.CallTimeout)
		_, err := g.client.Report(ctx, r)
		cancel()
		if err != nil {
			g.log.Warn("report not delivered", "chick", r.GetChickId(), "host", r.GetHost(), "port", r.GetPort(), "outcome", r.GetOutcome().String(), "err", err)
		}
	}
}
