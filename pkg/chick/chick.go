// Package chick is the runtime inside a chick container: it dials Mother's
// nest over TLS (trusting only Mother's CA) with its id and single-use
// token, joins (receiving its goal, tier
// and limits), fetches its channel's files into its workspace (once per
// workspace: see wire.FetchedMarker), runs the agent loop with its tools in the workspace, streams
// every event over the Session stream (buffered until Mother acknowledges
// it, resent after a reconnect), sends heartbeats, makes every model call
// through Mother's broker, asks Mother to run the host tools she offers it
// (host_tool, within config's chicks.hostTools) and to update its
// channel's memory (update_memory), uploads attached and output files,
// offers Mother the skills it created or changed under skills/, sends its
// result, and returns. A cancellation from Mother aborts the run.
//
// An isolated chick (Options.GateProxy set, docs/isolation.md) reaches
// Mother through its host's gate (Addr is then the gate's nest socket,
// unix:///run/mother-gate/nest.sock; TLS still runs end to end to
// Mother), serves the HTTP proxy its tools are pointed at
// (wire.ChickProxyAddr) with a Forwarder to the gate's proxy socket, and
// gives its model the request_access tool, which asks the channel's
// admins for a destination.
//
// It links no chat platform and no Docker client, and holds no secret but
// its own token.
package chick

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/skills"
	"github.com/mother-chat/mother/pkg/version"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// ToolsFunc builds the chick's tools rooted at the workspace; attach
// delivers a workspace file to the channel.
type ToolsFunc func(root string, attach func(path, title string) error) ([]agent.Tool, error)

// Options configure a chick.
type Options struct {
	// Addr is Mother's gRPC address (MOTHER_ADDR).
	Addr string
	// Token is the chick's single-use token (MOTHER_TOKEN).
	Token string
	// ChickID is the chick's id (MOTHER_CHICK_ID).
	ChickID string
	// CAPEM is the certificate of Mother's nest CA (MOTHER_CA_PEM): the
	// chick speaks TLS to Mother and trusts only certificates it signed.
	CAPEM []byte
	// Workspace is the working directory (default /workspace).
	Workspace string
	// Version is the chick binary's build label, for the operator's eyes.
	Version string
	// Release is the release the chick says it is, and judges Mother's
	// against (default version.Release; tests set another to play an
	// older or newer chick).
	Release string
	Logger  *slog.Logger
	Tools   ToolsFunc
	// MinBackoff and MaxBackoff bound reconnect waits (200ms, 5s).
	MinBackoff, MaxBackoff time.Duration
	// ReconnectFor is how long the chick keeps trying to reach Mother
	// before giving up (default 10 minutes: a Mother restart takes less).
	ReconnectFor time.Duration
	// DialOptions are extra gRPC options (tests).
	DialOptions []grpc.DialOption
	// Clock times reconnects, event batching and waits (default
	// clock.Real).
	Clock clock.Clock
	// GateProxy is the gate's proxy socket (MOTHER_GATE_PROXY). Set, the
	// chick is isolated: it serves its HTTP proxy (wire.ChickProxyAddr)
	// by forwarding to this socket, and offers the request_access tool.
	// Addr is then the gate's nest socket (unix:///run/mother-gate/nest.sock).
	GateProxy string
	// GateKey names the chick to the gate (MOTHER_GATE_KEY), on its
	// nest socket (when Addr is one) and its proxy socket. Set, Addr is the
	// gate's unix:// nest socket (a TCP Addr is dialled as it is: tests).
	GateKey string
	// ProxyListener, if set, is where the proxy listens instead of
	// wire.ChickProxyAddr (tests).
	ProxyListener net.Listener
}

// IncompatibleError is a Join Mother refused because the chick's release
// does not work with hers: its text is her sentence, which names both
// releases and the fix. The chick exits with it.
type IncompatibleError struct{ Why string }

func (e *IncompatibleError) Error() string { return e.Why }

// ErrRejected means Mother refused the chick's token: it was reaped or has
// ended. There is nothing left to do.
var ErrRejected = errors.New("mother rejected this chick's token")

// Run is the chick's whole life. It returns nil once Mother has stored the
// result.
func Run(ctx context.Context, opts Options) error {
	if opts.Addr == "" || opts.Token == "" || opts.ChickID == "" {
		return errors.New("chick: address, token and chick id are required")
	}
	if opts.GateProxy != "" && opts.GateKey == "" {
		return errors.New("chick: isolated (a gate proxy socket) without a gate key")
	}
	creds, err := wire.ClientTLS(opts.CAPEM)
	if err != nil {
		return fmt.Errorf("chick: Mother's CA certificate (MOTHER_CA_PEM): %w", err)
	}
	if opts.Workspace == "" {
		opts.Workspace = "/workspace"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 200 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	if opts.ReconnectFor <= 0 {
		opts.ReconnectFor = 10 * time.Minute
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Release == "" {
		opts.Release = version.Release
	}
	dial := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// Reconnect as often as the chick retries: gRPC's own default
		// waits up to two minutes between attempts, too long for a gate
		// or Mother that is back in a second.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: opts.MinBackoff, Multiplier: 1.6, Jitter: 0.2, MaxDelay: opts.MaxBackoff},
			MinConnectTimeout: 20 * time.Second,
		}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 20 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)),
	}, opts.DialOptions...)
	if sock, ok := strings.CutPrefix(opts.Addr, "unix://"); ok && opts.GateKey != "" {
		// Behind a gate (isolated or none): each connection to its
		// nest.sock names the chick first, or the gate closes it.
		dial = append(dial, grpc.WithContextDialer(wire.GateDialer(sock, opts.ChickID, opts.GateKey)))
	}
	conn, err := grpc.NewClient(opts.Addr, dial...)
	if err != nil {
		return fmt.Errorf("chick: dial %s: %w", opts.Addr, err)
	}
	defer conn.Close()
	if opts.GateProxy != "" {
		stop, err := startForwarder(ctx, opts)
		if err != nil {
			return err
		}
		defer stop()
	}
	r := &runner{
		opts:   opts,
		client: pb.NewChickServiceClient(conn),
		logger: opts.Logger.With("component", "chick", "chick", opts.ChickID),
		out:    newOutbox(),
	}
	return r.run(ctx)
}

// startForwarder serves the isolated chick's HTTP proxy until stop.
func startForwarder(ctx context.Context, opts Options) (stop func(), err error) {
	lis := opts.ProxyListener
	if lis == nil {
		if lis, err = net.Listen("tcp", wire.ChickProxyAddr); err != nil {
			return nil, fmt.Errorf("chick: the proxy for the gate: %w", err)
		}
	}
	fctx, cancel := context.WithCancel(ctx)
	f := &Forwarder{Socket: opts.GateProxy, ChickID: opts.ChickID, Key: opts.GateKey, Logger: opts.Logger.With("chick", opts.ChickID), Clock: opts.Clock}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Serve(fctx, lis)
	}()
	opts.Logger.Info("isolated: proxy for the gate", "listen", lis.Addr().String(), "gate", opts.GateProxy)
	return func() { cancel(); <-done }, nil
}

type runner struct {
	opts   Options
	client pb.ChickServiceClient
	logger *slog.Logger
	out    *outbox

	cancelMu  sync.Mutex
	cancelRun context.CancelCauseFunc
	rejected  chan struct{}
	rejectOne sync.Once
}

func (r *runner) auth(ctx context.Context) context.Context {
	return wire.Credentials(ctx, r.opts.ChickID, r.opts.Token)
}

// retry runs call until it succeeds, fails for good, or the reconnect
// window closes. Unavailable (Mother away) is retried with backoff;
// Unauthenticated ends the chick.
func (r *runner) retry(ctx context.Context, what string, call func(ctx context.Context) error) error {
	deadline := r.opts.Clock.Now().Add(r.opts.ReconnectFor)
	wait := r.opts.MinBackoff
	for {
		err := call(r.auth(ctx))
		if err == nil {
			return nil
		}
		code := status.Code(err)
		switch {
		case code == codes.Unauthenticated:
			r.reject()
			return fmt.Errorf("%s: %w: %s", what, ErrRejected, status.Convert(err).Message())
		case ctx.Err() != nil:
			return ctx.Err()
		case code != codes.Unavailable && code != codes.DeadlineExceeded:
			return err
		case r.opts.Clock.Now().After(deadline):
			return fmt.Errorf("%s: Mother unreachable for %s: %w", what, r.opts.ReconnectFor, err)
		}
		r.logger.Debug("Mother unreachable; retrying", "op", what, "in", wait, "err", err)
		if err := clock.Sleep(ctx, r.opts.Clock, wait); err != nil {
			return err
		}
		wait = min(wait*2, r.opts.MaxBackoff)
	}
}

func (r *runner) reject() {
	r.rejectOne.Do(func() { close(r.rejected) })
	r.cancelMu.Lock()
	if r.cancelRun != nil {
		r.cancelRun(ErrRejected)
	}
	r.cancelMu.Unlock()
}

func (r *runner) run(ctx context.Context) error {
	r.rejected = make(chan struct{})
	var join *pb.JoinResponse
	err := r.retry(ctx, "join", func(ctx context.Context) error {
		var err error
		join, err = r.client.Join(ctx, &pb.JoinRequest{Version: r.opts.Version, Release: r.opts.Release, Protocol: version.Protocol})
		return err
	})
	if status.Code(err) == codes.FailedPrecondition {
		// Mother does not work with this chick's release, and said why.
		return &IncompatibleError{Why: status.Convert(err).Message()}
	}
	if err != nil {
		return fmt.Errorf("chick: %w", err)
	}
	lim := join.GetLimits()
	wall := wire.DurationFromProto(lim.GetWallTimeout())
	r.logger.Info("joined", "channel", join.GetChannel(), "tier", join.GetTier(), "max_turns", lim.GetMaxTurns(), "wall", wall,
		"mother_release", cmp.Or(join.GetRelease(), "0.1.x"), "mother_protocol", version.ProtocolOf(join.GetProtocol()))
	// A Mother outside this chick's range (an older one says no release:
	// 0.1.x) gets the chick's result at once, saying so: her end reason
	// then names the skew, not a hang.
	skew := version.Mother(r.opts.Release, join.GetRelease())

	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	if wall > 0 {
		var cancelT context.CancelFunc
		runCtx, cancelT = context.WithTimeoutCause(runCtx, wall, errors.New("wall-clock limit reached"))
		defer cancelT()
	}
	r.cancelMu.Lock()
	r.cancelRun = cancelRun
	r.cancelMu.Unlock()

	hb := wire.DurationFromProto(lim.GetHeartbeatInterval())
	if hb <= 0 {
		hb = 5 * time.Second
	}
	sessCtx, stopSession := context.WithCancel(ctx)
	defer stopSession()
	sessDone := make(chan error, 1)
	go func() { sessDone <- r.sessionLoop(sessCtx, hb, cancelRun) }()

	if skew != "" {
		r.logger.Error("Mother's release does not work with this chick's", "why", skew)
		r.out.setResult(&pb.ChickResult{StopReason: wire.StopReasonToProto(agent.StopError), Error: skew})
		return r.waitStored(ctx, sessDone)
	}
	if err := r.fetchFiles(runCtx); err != nil {
		if errors.Is(err, ErrRejected) {
			return fmt.Errorf("chick: %w", err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Report it as the chick's result: Mother learns why.
		res := &pb.ChickResult{StopReason: wire.StopReasonToProto(agent.StopError), Error: err.Error()}
		if cause := context.Cause(runCtx); cause != nil {
			// Cancelled, or out of time, while fetching.
			res.StopReason, res.Error = wire.StopReasonToProto(agent.StopAborted), cause.Error()
		} else {
			r.logger.Error("files not fetched", "err", err)
		}
		r.out.setResult(res)
		return r.waitStored(ctx, sessDone)
	}
	var tools []agent.Tool
	if r.opts.Tools != nil {
		tools, err = r.opts.Tools(r.opts.Workspace, func(path, title string) error {
			_, err := r.upload(runCtx, path, true, title)
			return err
		})
		if err != nil {
			// Report it as the chick's result: Mother learns why.
			r.out.setResult(&pb.ChickResult{StopReason: wire.StopReasonToProto(agent.StopError), Error: "chick tools: " + err.Error()})
			return r.waitStored(ctx, sessDone)
		}
	}
	tools = append(tools, r.hostTools(join)...)
	tools = append(tools, r.recallTools()...)
	tools = append(tools, &memoryTool{r: r})
	if r.opts.GateProxy != "" {
		tools = append(tools, &accessTool{r: r})
	}
	ag, err := agent.New(agent.Config{
		Provider: &brokerProvider{r: r},
		Model:    join.GetTier(),
		Tools:    tools,
		MaxTurns: int(lim.GetMaxTurns()),
		// An older Mother says nothing: her defaults then.
		MaxImages:     cmp.Or(int(lim.GetMaxImagesPerCall()), defaultImagesPerCall),
		MaxImageBytes: cmp.Or(lim.GetMaxImageBytesPerCall(), defaultImageBytesPerCall),
	})
	if err != nil {
		return fmt.Errorf("chick: %w", err)
	}
	// What the chick received, to find the skills it creates or changes.
	skillsBefore := skills.Snapshot(filepath.Join(r.opts.Workspace, "skills"))
	emit := r.coalescer()
	out := ag.Run(runCtx, agent.Input{
		System:  join.GetSystemPrompt(),
		History: []model.Message{{Role: model.RoleUser, Content: join.GetGoal()}},
		Emit:    emit,
	})
	emit(agent.Event{}) // flush
	res := &pb.ChickResult{Text: out.Final, StopReason: wire.StopReasonToProto(out.StopReason)}
	if out.Err != nil {
		res.Error = out.Err.Error()
	}
	if out.StopReason == agent.StopAborted {
		if cause := context.Cause(runCtx); cause != nil && !errors.Is(cause, context.Canceled) {
			res.Error = cause.Error()
		}
	}
	r.logger.Info("run ended", "stop", out.StopReason, "turns", out.Turns, "tokens", out.Usage.Total())
	select {
	case <-r.rejected:
		return fmt.Errorf("chick: %w", ErrRejected)
	default:
	}
	// Output files travel even after a cancellation: they may be what the
	// user needs to see of a stopped chick.
	upCtx := context.WithoutCancel(ctx)
	if out.StopReason != agent.StopAborted {
		// Skills of a stopped run may be half written: only a run that
		// ended by itself offers them.
		if lost := r.proposeSkills(upCtx, skillsBefore); len(lost) > 0 {
			res.Text = strings.TrimSpace(res.Text + "\n\nSkills not delivered: " + strings.Join(lost, "; ") + ".")
		}
	}
	var failed []string
	res.OutputFiles, failed = r.uploadOutputs(upCtx)
	if len(failed) > 0 {
		// Mother refused or never got them: the user must learn which.
		res.Text = strings.TrimSpace(res.Text + "\n\nNot delivered: " + strings.Join(failed, "; ") + ".")
	}
	r.out.setResult(res)
	return r.waitStored(ctx, sessDone)
}

// waitStored waits until Mother has stored the result (the session loop
// returns).
func (r *runner) waitStored(ctx context.Context, sessDone <-chan error) error {
	select {
	case err := <-sessDone:
		if err != nil {
			return fmt.Errorf("chick: %w", err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// coalescer forwards agent events to the outbox, merging message deltas
// that arrive within 250ms into one event (so Mother stores and acks a few
// events per second, not one per token). A zero event flushes.
func (r *runner) coalescer() func(agent.Event) {
	var (
		mu      sync.Mutex
		pending *agent.Event
		since   time.Time
	)
	flush := func() {
		if pending != nil {
			r.out.push(*pending)
			pending = nil
		}
	}
	return func(ev agent.Event) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Type == agent.EventMessageDelta {
			if pending == nil {
				e := ev
				pending, since = &e, r.opts.Clock.Now()
			} else {
				pending.Text += ev.Text
			}
			if clock.Since(r.opts.Clock, since) >= 250*time.Millisecond {
				flush()
			}
			return
		}
		flush()
		if ev.Type != "" {
			r.out.push(ev)
		}
	}
}
