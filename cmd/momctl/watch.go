package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// clearScreen moves a terminal's cursor home and clears it.
const clearScreen = "\x1b[H\x1b[2J"

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// watch redraws the chicks table every interval until interrupted (or
// --count refreshes). On a terminal each refresh replaces the last; into
// a pipe or file each is a block of its own (with --json: one JSON array
// per line). A Mother that stops answering is shown, and watched for.
func (c *cli) watch(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("chicks watch", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	all := fs.Bool("all", false, "include ended chicks")
	asJSON := fs.Bool("json", false, "print one JSON array per refresh, one per line")
	interval := fs.Duration("interval", 2*time.Second, "time between refreshes")
	count := fs.Int("count", 0, "stop after this many refreshes (0: until interrupted)")
	if err := c.parse(fs, args); err != nil || fs.NArg() > 0 || *interval <= 0 || *count < 0 {
		return usageError{"chicks watch [--all] [--json] [--interval D] [--count N]"}
	}
	api, done, err := c.connect()
	if err != nil {
		return err
	}
	defer done()
	tty := isTerminal(c.term) && !*asJSON
	for n := 1; ; n++ {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := api.ListChicks(rctx, &pb.ListChicksRequest{All: *all})
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && n == 1 {
			return c.explain(err)
		}
		now := c.clock.Now()
		if *asJSON {
			if err != nil {
				fmt.Fprintf(c.stderr, "momctl: %v\n", c.explain(err))
			} else {
				out := []chickJSON{}
				for _, ci := range resp.GetChicks() {
					out = append(out, toJSON(ci, now))
				}
				b, _ := json.Marshal(out)
				if err := c.writeJSON(b); err != nil {
					return err
				}
			}
		} else {
			var sb strings.Builder
			if tty {
				// momctl's own control, straight to the terminal; the
				// table after it goes through termtext.
				if _, err := io.WriteString(c.term, clearScreen); err != nil {
					return err
				}
			} else if n > 1 {
				sb.WriteString("\n")
			}
			what := "momctl chicks ls"
			if *all {
				what += " --all"
			}
			fmt.Fprintf(&sb, "Every %s: %s    %s\n\n", *interval, what, now.In(c.loc).Format("15:04:05"))
			if err != nil {
				fmt.Fprintf(&sb, "%v\n", c.explain(err))
			} else {
				c.chickTable(&sb, resp.GetChicks(), now)
			}
			if _, err := io.WriteString(c.stdout, sb.String()); err != nil {
				return err
			}
		}
		if *count > 0 && n >= *count {
			return nil
		}
		if clock.Sleep(ctx, c.clock, *interval) != nil {
			return nil
		}
	}
}

// chickTable writes the chicks ls table (or "no chicks").
func (c *cli) chickTable(w io.Writer, chicks []*pb.ChickInfo, now time.Time) {
	if len(chicks) == 0 {
		fmt.Fprintln(w, "no chicks")
		return
	}
	tw := table(w)
	fmt.Fprintln(tw, "ID\tCHANNEL\tTIER\tSTATE\tHOST\tAGE\tTOKENS")
	for _, ci := range chicks {
		host := ci.GetHost()
		if host == "" {
			host = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", ci.GetId(), ci.GetChannel(), ci.GetTier(), stateName(ci.GetState()), host, age(now.Sub(ci.GetCreatedAt().AsTime())), ci.GetTokensUsed())
	}
	tw.Flush()
}

// tailEventJSON is one line of chicks tail --json.
type tailEventJSON struct {
	Seq   uint64      `json:"seq"`
	Event agent.Event `json:"event"`
}

// tailEndJSON is the last line of chicks tail --json for a chick that
// ended.
type tailEndJSON struct {
	Ended chickJSON `json:"ended"`
}

// tail prints a chick's events as Mother stored them, then each new one
// as it arrives, until the chick ends (--no-follow: the stored ones only).
func (c *cli) tail(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("chicks tail", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	noFollow := fs.Bool("no-follow", false, "print the events so far and exit")
	asJSON := fs.Bool("json", false, "print one JSON object per event, one per line")
	deltas := fs.Bool("deltas", false, "also print the streamed pieces of the model's answers")
	if err := c.parse(fs, args); err != nil || fs.NArg() != 1 {
		return usageError{"chicks tail [--no-follow] [--json] [--deltas] ID"}
	}
	id := fs.Arg(0)
	// No timeout: it follows until the chick ends or it is interrupted.
	return c.do(ctx, 0, func(ctx context.Context, api pb.AdminServiceClient) error {
		stream, err := api.ChickEvents(ctx, &pb.ChickEventsRequest{Id: id, Follow: !*noFollow})
		if err != nil {
			return err
		}
		for {
			m, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			switch {
			case m.GetEvent() != nil:
				ev := wire.EventFromProto(m.GetEvent())
				if *asJSON {
					b, _ := json.Marshal(tailEventJSON{Seq: m.GetEvent().GetSeq(), Event: ev})
					if err := c.writeJSON(b); err != nil {
						return err
					}
				} else if line := c.eventLine(m.GetEvent().GetSeq(), ev, *deltas); line != "" {
					fmt.Fprintln(c.stdout, line)
				}
			case m.GetEnded() != nil:
				in := m.GetEnded()
				if *asJSON {
					b, _ := json.Marshal(tailEndJSON{Ended: toJSON(in, c.clock.Now())})
					if err := c.writeJSON(b); err != nil {
						return err
					}
				} else {
					fmt.Fprintf(c.stdout, "chick %s %s: %s\n", in.GetId(), stateName(in.GetState()), oneLine(in.GetOutcome(), 200))
				}
			}
		}
	})
}

// eventLine is one event for a person: time, sequence number, kind and
// what it says, on one line ("" for a delta without --deltas).
func (c *cli) eventLine(seq uint64, ev agent.Event, deltas bool) string {
	var what string
	switch ev.Type {
	case agent.EventMessageDelta:
		if !deltas {
			return ""
		}
		what = oneLine(ev.Text, 200)
	case agent.EventMessageStart:
		what = "the model is answering"
	case agent.EventThinking:
		what = "the model is thinking"
	case agent.EventMessageEnd:
		what = fmt.Sprintf("%s  (%d in, %d out tokens)", oneLine(ev.Text, 200), ev.Usage.InputTokens, ev.Usage.OutputTokens)
	case agent.EventToolStart:
		what = ev.ToolName
		if ev.Label != "" {
			what += ": " + oneLine(ev.Label, 100)
		}
		if len(ev.Args) > 0 {
			what += "  " + oneLine(string(ev.Args), 200)
		}
	case agent.EventToolEnd:
		state := "ok"
		if ev.IsError {
			state = "error"
		}
		what = fmt.Sprintf("%s %s in %s: %s", ev.ToolName, state, ev.Duration.Round(time.Millisecond), oneLine(ev.Result, 200))
	case agent.EventRetry:
		what = fmt.Sprintf("attempt %d in %s: %s", ev.Attempt, ev.Duration.Round(time.Millisecond), oneLine(ev.Err, 200))
	case agent.EventCompactionStart:
		what = oneLine(ev.Text, 200)
	case agent.EventCompactionEnd:
		what = oneLine(ev.Text, 200)
		if ev.Err != "" {
			what = "failed: " + oneLine(ev.Err, 200)
		}
	case agent.EventRunEnd:
		what = fmt.Sprintf("%s  (%d in, %d out tokens)", ev.StopReason, ev.Usage.InputTokens, ev.Usage.OutputTokens)
		if ev.Err != "" {
			what += ": " + oneLine(ev.Err, 200)
		}
	}
	at := "--:--:--"
	if !ev.Time.IsZero() {
		at = ev.Time.In(c.loc).Format("15:04:05")
	}
	return fmt.Sprintf("%s  #%-4d %-17s %s", at, seq, ev.Type, what)
}

// oneLine squeezes s onto one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
