// Command momctl is the operator's tool for a running Mother: it talks to
// her admin socket (default ./data/mother.sock; --socket or MOTHER_SOCKET).
//
//	momctl [--socket PATH] chicks ls [--all] [--json]
//	momctl [--socket PATH] chicks kill [--grace 10s] ID...
//	momctl [--socket PATH] chicks logs [-f] ID
//	momctl [--socket PATH] events ls [--json]   (also: momctl events)
//	momctl [--socket PATH] status [--json]
//	momctl [--socket PATH] tools ls [--json]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// version is stamped at build time.
var version = "dev"

// DefaultSocket is used without --socket and MOTHER_SOCKET.
const DefaultSocket = "data/mother.sock"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

const usage = `usage: momctl [--socket PATH] COMMAND

  chicks ls [--all] [--json]      running and queued chicks (--all: ended ones too)
  chicks kill [--grace D] ID...   cancel, then kill after the grace period
  chicks logs [-f] ID             a chick's container output (-f: follow)
  events ls [--json]              scheduled events, soonest first ("events" alone too)
  status [--json]                 versions, adapters, chicks, Docker hosts, budgets today, next events
  tools ls [--json]               host tool servers (mcpServers), their state and tools

The socket is --socket, else $MOTHER_SOCKET, else ./data/mother.sock.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("momctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", "", "Mother's admin socket")
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		fmt.Fprintf(stdout, "momctl %s\n", version)
		return 0
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return 2
	}
	path := *socket
	if path == "" {
		path = getenv("MOTHER_SOCKET")
	}
	if path == "" {
		path = DefaultSocket
	}
	c := &cli{socket: path, stdout: stdout, stderr: stderr}
	var err error
	switch {
	case rest[0] == "status":
		err = c.status(ctx, rest[1:])
	case rest[0] == "events" && len(rest) >= 2 && (rest[1] == "ls" || rest[1] == "list"):
		err = c.events(ctx, rest[2:])
	case rest[0] == "events":
		err = c.events(ctx, rest[1:])
	case rest[0] == "chicks" && len(rest) >= 2 && (rest[1] == "ls" || rest[1] == "list"):
		err = c.ls(ctx, rest[2:])
	case rest[0] == "chicks" && len(rest) >= 2 && rest[1] == "kill":
		err = c.kill(ctx, rest[2:])
	case rest[0] == "chicks" && len(rest) >= 2 && rest[1] == "logs":
		err = c.logs(ctx, rest[2:])
	case rest[0] == "tools" && len(rest) >= 2 && (rest[1] == "ls" || rest[1] == "list"):
		err = c.tools(ctx, rest[2:])
	default:
		fmt.Fprintf(stderr, "momctl: unknown command %q\n\n", strings.Join(rest, " "))
		fs.Usage()
		return 2
	}
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "momctl: %v\n", err)
			return 2
		}
		fmt.Fprintf(stderr, "momctl: %v\n", err)
		return 1
	}
	return 0
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

type cli struct {
	socket         string
	stdout, stderr io.Writer
}

// connect checks the socket first, so a missing socket or a permission
// problem reads as such, not as a gRPC error.
func (c *cli) connect() (pb.AdminServiceClient, func(), error) {
	st, err := os.Stat(c.socket)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil, fmt.Errorf("no admin socket at %s: is Mother running? (set --socket or MOTHER_SOCKET to <data>/mother.sock)", c.socket)
	case errors.Is(err, os.ErrPermission):
		return nil, nil, fmt.Errorf("permission denied on %s: run momctl as the user that runs Mother", c.socket)
	case err != nil:
		return nil, nil, fmt.Errorf("admin socket %s: %w", c.socket, err)
	case st.Mode()&os.ModeSocket == 0:
		return nil, nil, fmt.Errorf("%s is not a socket", c.socket)
	}
	f, err := os.OpenFile(c.socket, os.O_RDWR, 0)
	if f != nil {
		f.Close()
	}
	if errors.Is(err, os.ErrPermission) {
		return nil, nil, fmt.Errorf("permission denied on %s: run momctl as the user that runs Mother", c.socket)
	}
	// unix:// needs an absolute path; a relative one would read as a host.
	abs, err := filepath.Abs(c.socket)
	if err != nil {
		return nil, nil, fmt.Errorf("admin socket %s: %w", c.socket, err)
	}
	conn, err := grpc.NewClient("unix://"+abs, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, fmt.Errorf("admin socket %s: %w", c.socket, err)
	}
	return pb.NewAdminServiceClient(conn), func() { conn.Close() }, nil
}

// explain turns a gRPC error into one line.
func (c *cli) explain(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.Unavailable:
		msg := st.Message()
		if strings.Contains(msg, "permission denied") {
			return fmt.Errorf("permission denied on %s: run momctl as the user that runs Mother", c.socket)
		}
		return fmt.Errorf("Mother is not answering on %s (stale socket?): %s", c.socket, msg)
	case codes.NotFound:
		return errors.New(st.Message())
	case codes.Unimplemented:
		return fmt.Errorf("this Mother does not support that: %s", st.Message())
	}
	return errors.New(st.Message())
}

func stateName(s pb.ChickState) string { return wire.ChickStateName(s) }

// chickJSON is the --json form of a chick.
type chickJSON struct {
	ID         string    `json:"id"`
	Channel    string    `json:"channel"`
	Tier       string    `json:"tier"`
	State      string    `json:"state"`
	CreatedAt  time.Time `json:"createdAt"`
	AgeSeconds int64     `json:"ageSeconds"`
	Tokens     int64     `json:"tokens"`
	Host       string    `json:"host,omitempty"`
	Container  string    `json:"container,omitempty"`
	Goal       string    `json:"goal"`
	Outcome    string    `json:"outcome,omitempty"`
	// Version is the chick binary's, as it reported when it joined.
	Version string `json:"version,omitempty"`
}

func toJSON(ci *pb.ChickInfo, now time.Time) chickJSON {
	created := ci.GetCreatedAt().AsTime()
	return chickJSON{
		ID: ci.GetId(), Channel: ci.GetChannel(), Tier: ci.GetTier(), State: stateName(ci.GetState()), CreatedAt: created,
		AgeSeconds: int64(now.Sub(created).Seconds()), Tokens: ci.GetTokensUsed(), Host: ci.GetHost(), Container: ci.GetContainerId(),
		Goal: ci.GetGoal(), Outcome: ci.GetOutcome(), Version: ci.GetVersion(),
	}
}

func (c *cli) ls(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("chicks ls", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	all := fs.Bool("all", false, "include ended chicks")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return usageError{"chicks ls [--all] [--json]"}
	}
	api, done, err := c.connect()
	if err != nil {
		return err
	}
	defer done()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := api.ListChicks(cctx, &pb.ListChicksRequest{All: *all})
	if err != nil {
		return c.explain(err)
	}
	now := time.Now()
	if *asJSON {
		out := []chickJSON{}
		for _, ci := range resp.GetChicks() {
			out = append(out, toJSON(ci, now))
		}
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if len(resp.GetChicks()) == 0 {
		fmt.Fprintln(c.stdout, "no chicks")
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCHANNEL\tTIER\tSTATE\tAGE\tTOKENS")
	for _, ci := range resp.GetChicks() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", ci.GetId(), ci.GetChannel(), ci.GetTier(), stateName(ci.GetState()), age(now.Sub(ci.GetCreatedAt().AsTime())), ci.GetTokensUsed())
	}
	return tw.Flush()
}

func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func (c *cli) kill(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("chicks kill", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	grace := fs.Duration("grace", 0, "time between cancel and kill (default: Mother's chicks.killGrace)")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		return usageError{"chicks kill [--grace D] ID..."}
	}
	api, done, err := c.connect()
	if err != nil {
		return err
	}
	defer done()
	var errs []error
	for _, id := range fs.Args() {
		var g time.Duration // zero: Mother's default
		if *grace > 0 {
			g = max(time.Second, grace.Truncate(time.Second)) // whole seconds, as momctl always sent
		}
		resp, err := api.KillChick(ctx, &pb.KillChickRequest{Id: id, Grace: wire.DurationToProto(g)})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, c.explain(err)))
			continue
		}
		fmt.Fprintf(c.stdout, "%s %s: %s\n", id, stateName(resp.GetState()), resp.GetMessage())
	}
	return errors.Join(errs...)
}

func (c *cli) logs(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("chicks logs", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	follow := fs.Bool("f", false, "follow the output")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		return usageError{"chicks logs [-f] ID"}
	}
	api, done, err := c.connect()
	if err != nil {
		return err
	}
	defer done()
	stream, err := api.ChickLogs(ctx, &pb.ChickLogsRequest{Id: fs.Arg(0), Follow: *follow})
	if err != nil {
		return c.explain(err)
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
			return c.explain(err)
		}
		if _, err := c.stdout.Write(m.GetData()); err != nil {
			return err
		}
	}
}

// statusJSON is the --json form of momctl status.
type statusJSON struct {
	Version    string        `json:"version"`
	Momctl     string        `json:"momctl"`
	ChickImage string        `json:"chickImage,omitempty"`
	StartedAt  time.Time     `json:"startedAt"`
	Adapters   []adapterJSON `json:"adapters"`
	Chicks     []chickJSON   `json:"chicks"`
	Queued     int32         `json:"queued"`
	Hosts      []hostJSON    `json:"hosts"`
	Budgets    []budgetJSON  `json:"budgets"`
	NextEvents []eventJSON   `json:"nextEvents"`
}

type adapterJSON struct {
	Name       string     `json:"name"`
	Type       string     `json:"type"`
	State      string     `json:"state"`
	Reconnects int64      `json:"reconnects"`
	Since      *time.Time `json:"since,omitempty"`
	Error      string     `json:"error,omitempty"`
}

type hostJSON struct {
	Name          string     `json:"name"`
	Up            bool       `json:"up"`
	Running       int32      `json:"running"`
	Capacity      int32      `json:"capacity"`
	Tiers         []string   `json:"tiers,omitempty"`
	EngineVersion string     `json:"engineVersion,omitempty"`
	Since         *time.Time `json:"since,omitempty"`
	Error         string     `json:"error,omitempty"`
}

type budgetJSON struct {
	Scope string `json:"scope"`
	Used  int64  `json:"used"`
	Limit int64  `json:"limit"`
}

type eventJSON struct {
	File     string     `json:"file"`
	Type     string     `json:"type,omitempty"`
	Channel  string     `json:"channel,omitempty"`
	Schedule string     `json:"schedule,omitempty"`
	Next     *time.Time `json:"next,omitempty"`
	Text     string     `json:"text,omitempty"`
}

func optTime(ts interface{ AsTime() time.Time }, valid bool) *time.Time {
	if !valid {
		return nil
	}
	t := ts.AsTime()
	return &t
}

func toEventJSON(e *pb.EventInfo) eventJSON {
	return eventJSON{File: e.GetFile(), Type: wire.EventTypeName(e.GetType()), Channel: e.GetChannel(), Schedule: e.GetSchedule(), Text: e.GetText(),
		Next: optTime(e.GetNextRun(), e.GetNextRun() != nil)}
}

func (c *cli) status(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return usageError{"status [--json]"}
	}
	api, done, err := c.connect()
	if err != nil {
		return err
	}
	defer done()
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	st, err := api.GetStatus(cctx, &pb.GetStatusRequest{})
	if err != nil {
		return c.explain(err)
	}
	now := time.Now()
	out := statusJSON{
		Version: st.GetVersion(), Momctl: version, ChickImage: st.GetChickImage(), StartedAt: st.GetStartedAt().AsTime(), Queued: st.GetQueued(),
		Adapters: []adapterJSON{}, Chicks: []chickJSON{}, Hosts: []hostJSON{}, Budgets: []budgetJSON{}, NextEvents: []eventJSON{},
	}
	for _, a := range st.GetAdapters() {
		out.Adapters = append(out.Adapters, adapterJSON{Name: a.GetName(), Type: a.GetType(), State: wire.AdapterStateName(a.GetState()), Reconnects: a.GetReconnects(),
			Since: optTime(a.GetSince(), a.GetSince() != nil), Error: a.GetError()})
	}
	for _, ci := range st.GetChicks() {
		out.Chicks = append(out.Chicks, toJSON(ci, now))
	}
	for _, h := range st.GetHosts() {
		out.Hosts = append(out.Hosts, hostJSON{Name: h.GetName(), Up: h.GetUp(), Running: h.GetRunning(), Capacity: h.GetCapacity(), Tiers: h.GetTiers(),
			EngineVersion: h.GetEngineVersion(), Since: optTime(h.GetSince(), h.GetSince() != nil), Error: h.GetError()})
	}
	for _, b := range st.GetBudgets() {
		out.Budgets = append(out.Budgets, budgetJSON{b.GetScope(), b.GetUsedTokens(), b.GetLimitTokens()})
	}
	for _, e := range st.GetNextEvents() {
		out.NextEvents = append(out.NextEvents, toEventJSON(e))
	}
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	w := c.stdout
	fmt.Fprintf(w, "Mother %s, up %s (momctl %s", out.Version, age(now.Sub(out.StartedAt)), version)
	if out.ChickImage != "" {
		fmt.Fprintf(w, ", chick image %s", out.ChickImage)
	}
	fmt.Fprintln(w, ")")

	fmt.Fprintln(w, "\nADAPTERS")
	if len(out.Adapters) == 0 {
		fmt.Fprintln(w, "  none")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, a := range out.Adapters {
		state := a.State
		if a.Since != nil && !a.Since.IsZero() {
			state += " for " + age(now.Sub(*a.Since))
		}
		line := fmt.Sprintf("  %s\t%s\t%s\t%d reconnects", a.Name, a.Type, state, a.Reconnects)
		if a.Error != "" && a.State != "connected" {
			line += "\t" + a.Error
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()

	fmt.Fprintf(w, "\nCHICKS  %d alive, %d queued\n", len(out.Chicks), out.Queued)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, ci := range out.Chicks {
		host := ci.Host
		if host == "" {
			host = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\ton %s\t%s\t%d tokens\n", ci.ID, ci.Channel, ci.Tier, ci.State, host, age(time.Duration(ci.AgeSeconds)*time.Second), ci.Tokens)
	}
	tw.Flush()

	fmt.Fprintln(w, "\nDOCKER HOSTS")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, h := range out.Hosts {
		state := "up"
		if !h.Up {
			state = "DOWN"
		}
		if h.Since != nil && !h.Since.IsZero() {
			state += " for " + age(now.Sub(*h.Since))
		}
		tiers := "all tiers"
		if len(h.Tiers) > 0 {
			tiers = "tiers " + strings.Join(h.Tiers, ",")
		}
		line := fmt.Sprintf("  %s\t%s\t%d/%d chicks\t%s", h.Name, state, h.Running, h.Capacity, tiers)
		if h.EngineVersion != "" {
			line += "\tDocker " + h.EngineVersion
		}
		if !h.Up && h.Error != "" {
			line += "\t" + h.Error
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()

	fmt.Fprintln(w, "\nBUDGETS TODAY")
	if len(out.Budgets) == 0 {
		fmt.Fprintln(w, "  none used")
	}
	for _, b := range out.Budgets {
		lim := "no cap"
		if b.Limit > 0 {
			lim = fmt.Sprintf("of %d, %d left", b.Limit, max(0, b.Limit-b.Used))
		}
		fmt.Fprintf(w, "  %s: %d tokens (%s)\n", b.Scope, b.Used, lim)
	}

	fmt.Fprintln(w, "\nNEXT EVENTS")
	if len(out.NextEvents) == 0 {
		fmt.Fprintln(w, "  none scheduled")
	}
	for _, e := range out.NextEvents {
		next := "-"
		if e.Next != nil {
			next = e.Next.Local().Format("2006-01-02 15:04")
		}
		fmt.Fprintf(w, "  %s  %s (%s, %s)\n", next, e.File, e.Type, e.Channel)
	}
	return nil
}

func (c *cli) events(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("events ls", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return usageError{"events ls [--json]"}
	}
	api, done, err := c.connect()
	if err != nil {
		return err
	}
	defer done()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := api.ListEvents(cctx, &pb.ListEventsRequest{})
	if err != nil {
		return c.explain(err)
	}
	if *asJSON {
		out := []eventJSON{}
		for _, e := range resp.GetEvents() {
			out = append(out, toEventJSON(e))
		}
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if len(resp.GetEvents()) == 0 {
		fmt.Fprintln(c.stdout, "no events")
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tTYPE\tCHANNEL\tSCHEDULE\tNEXT")
	for _, e := range resp.GetEvents() {
		next := "-"
		if e.GetNextRun() != nil {
			next = e.GetNextRun().AsTime().Local().Format("2006-01-02 15:04")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.GetFile(), wire.EventTypeName(e.GetType()), e.GetChannel(), e.GetSchedule(), next)
	}
	return tw.Flush()
}
