package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/config"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// usageRowJSON is one row of momctl usage --json.
type usageRowJSON struct {
	Key          string  `json:"key"`
	Calls        int64   `json:"calls"`
	InputTokens  int64   `json:"inputTokens"`
	OutputTokens int64   `json:"outputTokens"`
	CostMicroUSD int64   `json:"costMicroUSD"`
	CostUSD      float64 `json:"costUSD"`
}

type usageJSON struct {
	From  string         `json:"from"`
	To    string         `json:"to"`
	By    string         `json:"by"`
	Rows  []usageRowJSON `json:"rows"`
	Total usageRowJSON   `json:"total"`
}

func toUsageRow(r *pb.UsageRow) usageRowJSON {
	return usageRowJSON{Key: r.GetKey(), Calls: r.GetCalls(), InputTokens: r.GetInputTokens(), OutputTokens: r.GetOutputTokens(),
		CostMicroUSD: r.GetCostMicroUsd(), CostUSD: float64(r.GetCostMicroUsd()) / 1e6}
}

// usage sums the usage ledger: momctl usage [--days N] [--by ...].
func (c *cli) usage(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("usage", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	days := fs.Int("days", 7, "how many days back, today included")
	by := fs.String("by", broker.ByDay, "sum by "+strings.Join(broker.UsageBys, ", "))
	asJSON := fs.Bool("json", false, "print JSON")
	syntax := usageError{"usage [--days N] [--by " + strings.Join(broker.UsageBys, "|") + "] [--json]"}
	if err := c.parse(fs, args); err != nil || fs.NArg() > 0 {
		return syntax
	}
	if *days < 1 || !slices.Contains(broker.UsageBys, *by) {
		return syntax
	}
	var resp *pb.GetUsageResponse
	err := c.do(ctx, 30*time.Second, func(ctx context.Context, api pb.AdminServiceClient) (err error) {
		resp, err = api.GetUsage(ctx, &pb.GetUsageRequest{Days: int32(*days), By: *by})
		return err
	})
	if err != nil {
		return err
	}
	out := usageJSON{From: resp.GetFrom(), To: resp.GetTo(), By: resp.GetBy(), Rows: []usageRowJSON{}, Total: toUsageRow(resp.GetTotal())}
	for _, r := range resp.GetRows() {
		out.Rows = append(out.Rows, toUsageRow(r))
	}
	return c.print(*asJSON, out, func(w io.Writer) error {
		fmt.Fprintf(w, "Usage %s to %s, by %s\n", out.From, out.To, out.By)
		if len(out.Rows) == 0 {
			fmt.Fprintln(w, "no model calls")
			return nil
		}
		tw := table(w)
		fmt.Fprintf(tw, "%s\tCALLS\tIN\tOUT\tCOST\n", strings.ToUpper(out.By))
		line := func(key string, r usageRowJSON) {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", key, r.Calls, r.InputTokens, r.OutputTokens, config.FormatMicroUSD(r.CostMicroUSD))
		}
		for _, r := range out.Rows {
			line(r.Key, r)
		}
		line("TOTAL", out.Total)
		return tw.Flush()
	})
}
