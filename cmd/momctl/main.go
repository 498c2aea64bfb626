// Command momctl is the operator's tool for a running Mother: it talks to
// her admin socket (default ./data/mother.sock; --socket or MOTHER_SOCKET).
//
//	momctl [--socket PATH] chicks ls [--all] [--json] [-q]
//	momctl [--socket PATH] chicks kill [--grace 10s] ID...
//	momctl [--socket PATH] chicks logs [-f] ID
//	momctl [--socket PATH] chicks watch [--all] [--json] [--interval D] [--count N]
//	momctl [--socket PATH] chicks tail [--no-follow] [--json] [--deltas] ID
//	momctl [--socket PATH] events ls [--json]   (also: momctl events)
//	momctl [--socket PATH] status [--json]
//	momctl health [--wait D] [--env-file FILE] DATA
//	momctl [--socket PATH] tools ls [--json]
//	momctl [--socket PATH] usage [--days N] [--by day|channel|tier|user|event|model] [--json]
//	momctl completion bash|zsh|fish
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

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/termtext"
	release "github.com/mother-chat/mother/pkg/version"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// version is stamped at build time.
var version = "dev"

// DefaultSocket is used without --socket and MOTHER_SOCKET.
const DefaultSocket = "data/mother.sock"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], &cli{stdout: os.Stdout, stderr: os.Stderr, clock: clock.Real{}, loc: time.Local, version: version}, os.Getenv)
	stop()
	os.Exit(code)
}

const usage = `usage: momctl [--socket PATH] COMMAND

  chicks ls [--all] [--json] [-q] running and queued chicks (--all: ended ones too; -q: ids only)
  chicks kill [--grace D] ID...   cancel, then kill after the grace period
  chicks logs [-f] ID             a chick's container output (-f: follow)
  chicks watch [--all] [--json] [--interval D] [--count N]
                                  the chicks table, refreshed every 2s (--interval)
  chicks tail [--no-follow] [--json] [--deltas] ID
                                  a chick's events (model and tool calls) as they happen, until it ends
  events ls [--json]              scheduled events, soonest first ("events" alone too)
  status [--json]                 versions, adapters, chicks, Docker hosts, budgets today, next events
  health [--wait D] [--env-file FILE] DATA
                                  whether Mother is up: /healthz on metrics.listen (or her admin
                                  socket), as DATA/config.json says; --wait: ask until then
  tools ls [--json]               host tool servers (mcpServers), their state and tools
  usage [--days N] [--by day|channel|tier|user|event|model] [--json]
                                  model calls, Mother's own and the chicks', and their cost (default: 7 days, by day)
  completion bash|zsh|fish        a shell completion script for momctl

The socket is --socket, else $MOTHER_SOCKET, else ./data/mother.sock.
`

// run runs one command with c's outputs, clock and version; c.socket is
// set here from --socket, $MOTHER_SOCKET or DefaultSocket.
func run(ctx context.Context, args []string, c *cli, getenv func(string) string) int {
	// Everything momctl prints may hold what a chick or a model wrote (a
	// label, a result, an outcome, a container's output, an error it
	// caused): it goes to the terminal with its control characters shown,
	// not obeyed (termtext). Only watch's own clear-screen goes to term.
	c.term = c.stdout
	out, errs := termtext.NewWriter(c.stdout), termtext.NewWriter(c.stderr)
	defer out.Flush()
	defer errs.Flush()
	c.stdout, c.stderr = out, errs
	stdout, stderr := c.stdout, c.stderr
	fs := flag.NewFlagSet("momctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket, showVersion := rootFlags(fs)
	// The flag package prints the usage itself on a parse error; it is
	// printed below instead, after the error, or on stdout for --help.
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprintf(stderr, "momctl: %v\n\n%s", err, usage)
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, release.Line("momctl", c.version))
		return 0
	}
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return 2
	}
	// Help, asked for the usual ways: "help", "help chicks", "chicks
	// --help", "chicks -h". A command's own --help prints its flags.
	if rest[0] == "help" || isHelp(rest[len(rest)-1]) && findCommandExact(rest[:len(rest)-1]) == nil {
		fmt.Fprint(stdout, usage)
		return 0
	}
	path := *socket
	if path == "" {
		path = getenv("MOTHER_SOCKET")
	}
	if path == "" {
		path = DefaultSocket
	}
	c.socket = path
	cmd, args := findCommand(rest)
	if cmd == nil {
		fmt.Fprintf(stderr, "momctl: unknown command %q\n\n", strings.Join(rest, " "))
		fs.Usage()
		return 2
	}
	if len(args) > 0 && isHelp(args[len(args)-1]) {
		// The command's flags, from the flag set it parses.
		c.describe = func(fs *flag.FlagSet) {
			fmt.Fprintf(stdout, "usage: momctl %s [flags]\n", strings.Join(cmd.words, " "))
			fs.SetOutput(stdout)
			fs.PrintDefaults()
		}
		_ = cmd.run(c, ctx, nil)
		return 0
	}
	err := cmd.run(c, ctx, args)
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

// isHelp reports whether a word asks for help.
func isHelp(w string) bool { return w == "-h" || w == "-help" || w == "--help" }

// findCommandExact is the command rest names with nothing after it.
func findCommandExact(rest []string) *command {
	cmd, args := findCommand(rest)
	if cmd == nil || len(args) > 0 {
		return nil
	}
	return cmd
}

// rootFlags defines momctl's own flags (before the command) on fs.
func rootFlags(fs *flag.FlagSet) (socket *string, version *bool) {
	socket = fs.String("socket", "", "Mother's admin `PATH` (default $MOTHER_SOCKET, else ./data/mother.sock)")
	version = fs.Bool("version", false, "print the version and exit")
	return socket, version
}

// errDescribed is what parse returns when the flag set was only
// described.
var errDescribed = errors.New("described")

// parse parses a command's flags, or hands the flag set to c.describe.
func (c *cli) parse(fs *flag.FlagSet, args []string) error {
	if c.describe != nil {
		c.describe(fs)
		return errDescribed
	}
	return fs.Parse(args)
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// cli runs momctl's commands against one admin socket.
type cli struct {
	// describe, when set, receives each command's flag set instead of
	// parsing (the shell completions are built from them).
	describe       func(*flag.FlagSet)
	socket         string
	stdout, stderr io.Writer
	// term is stdout as run got it, before termtext: for watch's own
	// clear-screen and to tell a terminal.
	term io.Writer
	// clock gives the ages and countdowns; loc the zone of printed times.
	clock   clock.Clock
	loc     *time.Location
	version string
}

// do connects to the admin socket, runs f with ctx bounded by timeout (0:
// ctx alone), and turns a gRPC error f returns into one line.
func (c *cli) do(ctx context.Context, timeout time.Duration, f func(context.Context, pb.AdminServiceClient) error) error {
	api, done, err := c.connect()
	if err != nil {
		return err
	}
	defer done()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return c.explain(f(ctx, api))
}

// print writes v as indented JSON with --json, else text's rendering.
func (c *cli) print(asJSON bool, v any, text func(w io.Writer) error) error {
	if asJSON {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		return c.writeJSON(b)
	}
	return text(c.stdout)
}

// writeJSON writes one JSON value and a newline. encoding/json escapes
// the C0 controls but not DEL and C1 (U+009B is CSI): termtext.JSON
// escapes those too, so the value reads back the same and the terminal
// gets no control from it.
func (c *cli) writeJSON(b []byte) error {
	_, err := c.stdout.Write(append(termtext.JSON(b), '\n'))
	return err
}

// table is a tabwriter on w with momctl's column layout.
func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// localTime formats t for a person, in c's zone.
func (c *cli) localTime(t time.Time) string { return t.In(c.loc).Format("2006-01-02 15:04") }

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

// explain turns a gRPC error into one line; other errors (nil too) pass
// as they are.
func (c *cli) explain(err error) error {
	if err == nil {
		return nil
	}
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
		if strings.Contains(msg, "connection refused") {
			// The socket file is there but nobody listens: it was left
			// by a Mother that is no longer running.
			return fmt.Errorf("nothing listens on %s: Mother is not running (the socket is left from an earlier run); start her, or point --socket at the one that runs", c.socket)
		}
		//lint:ignore ST1005 "Mother" is a name, and the sentence is printed as is
		return fmt.Errorf("Mother is not answering on %s: %s", c.socket, msg)
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
	quiet := fs.Bool("q", false, "print the ids only, one per line")
	if err := c.parse(fs, args); err != nil || fs.NArg() > 0 {
		return usageError{"chicks ls [--all] [--json] [-q]"}
	}
	var resp *pb.ListChicksResponse
	err := c.do(ctx, 10*time.Second, func(ctx context.Context, api pb.AdminServiceClient) (err error) {
		resp, err = api.ListChicks(ctx, &pb.ListChicksRequest{All: *all})
		return err
	})
	if err != nil {
		return err
	}
	now := c.clock.Now()
	out := []chickJSON{}
	for _, ci := range resp.GetChicks() {
		out = append(out, toJSON(ci, now))
	}
	if *quiet && !*asJSON {
		for _, ci := range resp.GetChicks() {
			fmt.Fprintln(c.stdout, ci.GetId())
		}
		return nil
	}
	// The same table as chicks watch, HOST column included.
	return c.print(*asJSON, out, func(w io.Writer) error {
		c.chickTable(w, resp.GetChicks(), now)
		return nil
	})
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
	if err := c.parse(fs, args); err != nil || fs.NArg() == 0 {
		return usageError{"chicks kill [--grace D] ID..."}
	}
	// No timeout: each call answers once its chick has ended.
	return c.do(ctx, 0, func(ctx context.Context, api pb.AdminServiceClient) error {
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
	})
}

func (c *cli) logs(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("chicks logs", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	follow := fs.Bool("f", false, "follow the output")
	if err := c.parse(fs, args); err != nil || fs.NArg() != 1 {
		return usageError{"chicks logs [-f] ID"}
	}
	// No timeout: -f streams until interrupted.
	return c.do(ctx, 0, func(ctx context.Context, api pb.AdminServiceClient) error {
		stream, err := api.ChickLogs(ctx, &pb.ChickLogsRequest{Id: fs.Arg(0), Follow: *follow})
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
			if _, err := c.stdout.Write(m.GetData()); err != nil {
				return err
			}
		}
	})
}

// statusJSON is the --json form of momctl status.
type statusJSON struct {
	Version    string         `json:"version"`
	Momctl     string         `json:"momctl"`
	ChickImage string         `json:"chickImage,omitempty"`
	StartedAt  time.Time      `json:"startedAt"`
	Adapters   []adapterJSON  `json:"adapters"`
	Chicks     []chickJSON    `json:"chicks"`
	Queued     int32          `json:"queued"`
	Hosts      []hostJSON     `json:"hosts"`
	Budgets    []budgetJSON   `json:"budgets"`
	NextEvents []eventJSON    `json:"nextEvents"`
	Providers  []providerJSON `json:"providers"`
}

// providerJSON is a model provider's health (those fallback chains call).
type providerJSON struct {
	Name      string     `json:"name"`
	Down      bool       `json:"down"`
	Since     *time.Time `json:"since,omitempty"`
	Until     *time.Time `json:"until,omitempty"`
	Failures  int32      `json:"failures"`
	LastOK    *time.Time `json:"lastOK,omitempty"`
	LastError string     `json:"lastError,omitempty"`
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
	// State is "up", "down" or "incompatible" (its chick image is of a
	// release this Mother does not work with: Incompatible says which,
	// and the fix).
	State        string `json:"state"`
	Incompatible string `json:"incompatible,omitempty"`
}

// hostState names a host's state for status --json.
func hostState(up bool, incompatible string) string {
	switch {
	case !up:
		return "down"
	case incompatible != "":
		return "incompatible"
	}
	return "up"
}

type budgetJSON struct {
	Scope string `json:"scope"`
	Used  int64  `json:"used"`
	Limit int64  `json:"limit"`
	// UsedMicroUSD and LimitMicroUSD are the money spent today and the
	// money cap (0: none), in millionths of a US dollar.
	UsedMicroUSD  int64 `json:"usedMicroUSD,omitempty"`
	LimitMicroUSD int64 `json:"limitMicroUSD,omitempty"`
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
	if err := c.parse(fs, args); err != nil || fs.NArg() > 0 {
		return usageError{"status [--json]"}
	}
	var st *pb.GetStatusResponse
	err := c.do(ctx, 15*time.Second, func(ctx context.Context, api pb.AdminServiceClient) (err error) {
		st, err = api.GetStatus(ctx, &pb.GetStatusRequest{})
		return err
	})
	if err != nil {
		return err
	}
	now := c.clock.Now()
	out := statusJSON{
		Version: st.GetVersion(), Momctl: c.version, ChickImage: st.GetChickImage(), StartedAt: st.GetStartedAt().AsTime(), Queued: st.GetQueued(),
		Adapters: []adapterJSON{}, Chicks: []chickJSON{}, Hosts: []hostJSON{}, Budgets: []budgetJSON{}, NextEvents: []eventJSON{}, Providers: []providerJSON{},
	}
	for _, p := range st.GetProviders() {
		out.Providers = append(out.Providers, providerJSON{Name: p.GetName(), Down: p.GetDown(), Since: optTime(p.GetSince(), p.GetSince() != nil),
			Until: optTime(p.GetUntil(), p.GetUntil() != nil), Failures: p.GetFailures(), LastOK: optTime(p.GetLastOk(), p.GetLastOk() != nil), LastError: p.GetLastError()})
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
			EngineVersion: h.GetEngineVersion(), Since: optTime(h.GetSince(), h.GetSince() != nil), Error: h.GetError(),
			State: hostState(h.GetUp(), h.GetIncompatible()), Incompatible: h.GetIncompatible()})
	}
	for _, b := range st.GetBudgets() {
		out.Budgets = append(out.Budgets, budgetJSON{b.GetScope(), b.GetUsedTokens(), b.GetLimitTokens(), b.GetUsedMicroUsd(), b.GetLimitMicroUsd()})
	}
	for _, e := range st.GetNextEvents() {
		out.NextEvents = append(out.NextEvents, toEventJSON(e))
	}
	return c.print(*asJSON, out, func(w io.Writer) error { return c.statusText(w, out, now) })
}

// statusText is momctl status for a person.
func (c *cli) statusText(w io.Writer, out statusJSON, now time.Time) error {
	fmt.Fprintf(w, "Mother %s, up %s (momctl %s", out.Version, age(now.Sub(out.StartedAt)), c.version)
	if out.ChickImage != "" {
		fmt.Fprintf(w, ", chick image %s", out.ChickImage)
	}
	fmt.Fprintln(w, ")")

	fmt.Fprintln(w, "\nADAPTERS")
	if len(out.Adapters) == 0 {
		fmt.Fprintln(w, "  none")
	}
	tw := table(w)
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
	tw = table(w)
	for _, ci := range out.Chicks {
		host := ci.Host
		if host == "" {
			host = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\ton %s\t%s\t%d tokens\n", ci.ID, ci.Channel, ci.Tier, ci.State, host, age(time.Duration(ci.AgeSeconds)*time.Second), ci.Tokens)
	}
	tw.Flush()

	if len(out.Providers) > 0 {
		fmt.Fprintln(w, "\nMODEL PROVIDERS")
		tw = table(w)
		for _, p := range out.Providers {
			state := "up"
			if p.Down {
				state = "DOWN"
				if p.Until != nil {
					state += ", skipped for " + age(p.Until.Sub(now)) + " more"
				}
			}
			line := fmt.Sprintf("  %s\t%s\t%d failures in a row", p.Name, state, p.Failures)
			if p.LastError != "" && p.Failures > 0 {
				line += "\t" + oneLine(p.LastError, 120)
			}
			fmt.Fprintln(tw, line)
		}
		tw.Flush()
	}

	fmt.Fprintln(w, "\nDOCKER HOSTS")
	tw = table(w)
	for _, h := range out.Hosts {
		state := "up"
		switch {
		case !h.Up:
			state = "DOWN"
		case h.Incompatible != "":
			// Up, but its chick image is of a release this Mother does
			// not work with: no chick starts there.
			state = "INCOMPATIBLE"
		}
		if h.Since != nil && !h.Since.IsZero() && state != "INCOMPATIBLE" {
			state += " for " + age(now.Sub(*h.Since))
		}
		tiers := "all tiers"
		if len(h.Tiers) > 0 {
			tiers = "tiers " + strings.Join(h.Tiers, ",")
		}
		line := fmt.Sprintf("  %s\t%s\t%d/%d chicks\t%s", h.Name, state, h.Running, h.Capacity, tiers)
		switch {
		case strings.Contains(h.EngineVersion, " "):
			// It names its engine ("Kubernetes v1.34.4").
			line += "\t" + h.EngineVersion
		case h.EngineVersion != "":
			line += "\tDocker " + h.EngineVersion
		}
		if !h.Up && h.Error != "" {
			line += "\t" + h.Error
		}
		if h.Up && h.Incompatible != "" {
			line += "\t" + h.Incompatible
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
		money := ""
		switch {
		case b.LimitMicroUSD > 0:
			money = fmt.Sprintf("; %s (of %s, %s left)", config.FormatMicroUSD(b.UsedMicroUSD), config.FormatMicroUSD(b.LimitMicroUSD), config.FormatMicroUSD(max(0, b.LimitMicroUSD-b.UsedMicroUSD)))
		case b.UsedMicroUSD > 0:
			money = fmt.Sprintf("; %s (no cap)", config.FormatMicroUSD(b.UsedMicroUSD))
		}
		fmt.Fprintf(w, "  %s: %d tokens (%s)%s\n", b.Scope, b.Used, lim, money)
	}

	fmt.Fprintln(w, "\nNEXT EVENTS")
	if len(out.NextEvents) == 0 {
		fmt.Fprintln(w, "  none scheduled")
	}
	for _, e := range out.NextEvents {
		next := "-"
		if e.Next != nil {
			next = c.localTime(*e.Next)
		}
		fmt.Fprintf(w, "  %s  %s (%s, %s)\n", next, e.File, e.Type, e.Channel)
	}
	return nil
}

func (c *cli) events(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("events ls", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := c.parse(fs, args); err != nil || fs.NArg() > 0 {
		return usageError{"events ls [--json]"}
	}
	var resp *pb.ListEventsResponse
	err := c.do(ctx, 10*time.Second, func(ctx context.Context, api pb.AdminServiceClient) (err error) {
		resp, err = api.ListEvents(ctx, &pb.ListEventsRequest{})
		return err
	})
	if err != nil {
		return err
	}
	out := []eventJSON{}
	for _, e := range resp.GetEvents() {
		out = append(out, toEventJSON(e))
	}
	return c.print(*asJSON, out, func(w io.Writer) error {
		if len(resp.GetEvents()) == 0 {
			fmt.Fprintln(w, "no events")
			return nil
		}
		tw := table(w)
		fmt.Fprintln(tw, "FILE\tTYPE\tCHANNEL\tSCHEDULE\tNEXT")
		for _, e := range resp.GetEvents() {
			next := "-"
			if e.GetNextRun() != nil {
				next = c.localTime(e.GetNextRun().AsTime())
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.GetFile(), wire.EventTypeName(e.GetType()), e.GetChannel(), e.GetSchedule(), next)
		}
		return tw.Flush()
	})
}
