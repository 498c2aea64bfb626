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
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/skills"
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
	Version   string
	Logger    *slog.Logger
	Tools     ToolsFunc
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
		join, err = r.client.Join(ctx, &pb.JoinRequest{Version: r.opts.Version})
		return err
	})
	if err != nil {
		return fmt.Errorf("chick: %w", err)
	}
	lim := join.GetLimits()
	wall := wire.DurationFromProto(lim.GetWallTimeout())
	r.logger.Info("joined", "channel", join.GetChannel(), "tier", join.GetTier(), "max_turns", lim.GetMaxTurns(), "wall", wall)

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
	tools = append(tools, &memoryTool{r: r})
	if r.opts.GateProxy != "" {
		tools = append(tools, &accessTool{r: r})
	}
	ag, err := agent.New(agent.Config{
		Provider: &brokerProvider{r: r},
		Model:    join.GetTier(),
		Tools:    tools,
		MaxTurns: int(lim.GetMaxTurns()),
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

// uploadOutputs sends every regular file under outputs/ back to Mother. It
// returns where Mother stored them, and the files that did not arrive
// with the reason.
func (r *runner) uploadOutputs(ctx context.Context) (stored, failed []string) {
	root := filepath.Join(r.opts.Workspace, wire.OutputsDir)
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(r.opts.Workspace, p)
		s, err := r.upload(ctx, rel, false, "")
		if err != nil {
			r.logger.Warn("output file not sent", "path", rel, "err", err)
			msg := err.Error()
			if st, ok := status.FromError(err); ok {
				msg = st.Message()
			}
			failed = append(failed, filepath.ToSlash(rel)+" ("+msg+")")
			return nil
		}
		stored = append(stored, s)
		return nil
	})
	return stored, failed
}

// upload sends one workspace file to Mother and returns where she stored
// it (relative to the channel directory).
func (r *runner) upload(ctx context.Context, path string, attach bool, title string) (string, error) {
	abs := path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(r.opts.Workspace, path)
	}
	rel, err := filepath.Rel(r.opts.Workspace, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("upload %s: outside the workspace", path)
	}
	var stored string
	err = r.retry(ctx, "upload", func(ctx context.Context) error {
		f, err := os.Open(abs)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", rel)
		}
		up, err := r.client.UploadFile(ctx)
		if err != nil {
			return err
		}
		if err := up.Send(&pb.UploadFileRequest{Kind: &pb.UploadFileRequest_Header{Header: &pb.UploadFileHeader{Path: filepath.ToSlash(rel), Size: st.Size(), Attach: attach, Title: title}}}); err != nil {
			_, rerr := up.CloseAndRecv()
			return errors.Join(err, rerr)
		}
		buf := make([]byte, 256<<10)
		for {
			n, rerr := f.Read(buf)
			if n > 0 {
				if err := up.Send(&pb.UploadFileRequest{Kind: &pb.UploadFileRequest_Data{Data: buf[:n]}}); err != nil {
					_, cerr := up.CloseAndRecv()
					return errors.Join(err, cerr)
				}
			}
			if errors.Is(rerr, io.EOF) {
				break
			}
			if rerr != nil {
				return rerr
			}
		}
		resp, err := up.CloseAndRecv()
		if err != nil {
			return err
		}
		stored = resp.GetStoredPath()
		return nil
	})
	if err != nil {
		return "", err
	}
	r.logger.Info("file sent", "path", rel, "stored", stored, "attach", attach)
	return stored, nil
}

// brokerProvider is the chick's model: every call goes to Mother.
type brokerProvider struct{ r *runner }

var _ model.Provider = (*brokerProvider)(nil)

func (p *brokerProvider) Chat(ctx context.Context, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	var resp model.Response
	err := p.r.retry(ctx, "generate", func(ctx context.Context) error {
		stream, err := p.r.client.Generate(ctx, wire.RequestToProto(req))
		if err != nil {
			return err
		}
		for {
			m, err := stream.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					return status.Error(codes.Unavailable, "generate stream ended without an answer")
				}
				return err
			}
			switch k := m.GetKind().(type) {
			case *pb.GenerateResponse_TextDelta:
				if onDelta != nil {
					onDelta(model.Delta{Text: k.TextDelta})
				}
			case *pb.GenerateResponse_Thinking:
				// Mother keeps the thoughts; only that there are some
				// comes here.
				if onDelta != nil {
					onDelta(model.Delta{Thinking: "…"})
				}
			case *pb.GenerateResponse_Done:
				resp = wire.DoneFromProto(k.Done)
				return nil
			}
		}
	})
	if err != nil {
		if mapped, ok := wire.ModelErrorFromStatus(err); ok {
			return model.Response{}, mapped
		}
		if errors.Is(err, ErrRejected) || ctx.Err() != nil {
			return model.Response{}, err
		}
		return model.Response{}, model.Wrap(model.ErrUnreachable, "Mother's broker: %v", err)
	}
	return resp, nil
}

// outbox holds the events Mother has not acknowledged, and the result.
type outbox struct {
	mu      sync.Mutex
	signal  chan struct{}
	events  []*pb.AgentEvent
	next    uint64
	result  *pb.ChickResult
	storedC chan struct{}
}

func newOutbox() *outbox {
	return &outbox{signal: make(chan struct{}, 1), next: 1, storedC: make(chan struct{})}
}

func (o *outbox) notify() {
	select {
	case o.signal <- struct{}{}:
	default:
	}
}

func (o *outbox) push(ev agent.Event) {
	o.mu.Lock()
	o.events = append(o.events, wire.EventToProto(o.next, ev))
	o.next++
	o.mu.Unlock()
	o.notify()
}

func (o *outbox) setResult(r *pb.ChickResult) {
	o.mu.Lock()
	o.result = r
	o.mu.Unlock()
	o.notify()
}

// ack drops every event up to seq.
func (o *outbox) ack(seq uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := 0
	for i < len(o.events) && o.events[i].GetSeq() <= seq {
		i++
	}
	o.events = append(o.events[:0], o.events[i:]...)
}

// pending returns events after seq, and the result once every event is
// acknowledged.
func (o *outbox) pending(after uint64) ([]*pb.AgentEvent, *pb.ChickResult, uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*pb.AgentEvent
	for _, e := range o.events {
		if e.GetSeq() > after {
			out = append(out, e)
		}
	}
	return out, o.result, o.next - 1
}

func (o *outbox) unacked() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.events)
}

var errResultStored = errors.New("result stored")

// sessionLoop keeps a Session stream open, reconnecting with backoff, until
// Mother has stored the result. It returns nil then.
func (r *runner) sessionLoop(ctx context.Context, hb time.Duration, cancelRun context.CancelCauseFunc) error {
	wait := r.opts.MinBackoff
	var downSince time.Time
	for {
		err := r.session(ctx, hb, cancelRun)
		if errors.Is(err, errResultStored) {
			return nil
		}
		if status.Code(err) == codes.Unauthenticated {
			r.reject()
			return fmt.Errorf("session: %w: %s", ErrRejected, status.Convert(err).Message())
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if downSince.IsZero() {
			downSince = r.opts.Clock.Now()
		}
		if clock.Since(r.opts.Clock, downSince) > r.opts.ReconnectFor {
			cancelRun(errors.New("lost Mother"))
			return fmt.Errorf("session: Mother unreachable for %s: %w", r.opts.ReconnectFor, err)
		}
		r.logger.Info("session lost; reconnecting", "in", wait, "unacked", r.out.unacked(), "err", err)
		if err := clock.Sleep(ctx, r.opts.Clock, wait); err != nil {
			return err
		}
		wait = min(wait*2, r.opts.MaxBackoff)
		if err == nil {
			wait = r.opts.MinBackoff
		}
	}
}

// session runs one Session stream.
func (r *runner) session(ctx context.Context, hb time.Duration, cancelRun context.CancelCauseFunc) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := r.client.Session(r.auth(sctx))
	if err != nil {
		return err
	}
	_, _, last := r.out.pending(0)
	if err := stream.Send(&pb.SessionRequest{Kind: &pb.SessionRequest_Hello{Hello: &pb.SessionHello{LastSentSeq: last}}}); err != nil {
		_, rerr := stream.Recv()
		return errors.Join(err, rerr)
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	sent := first.GetAck().GetSeq()
	r.out.ack(sent)
	r.logger.Debug("session open", "mother_has", sent, "sent", last)

	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			switch k := m.GetKind().(type) {
			case *pb.SessionResponse_Ack:
				r.out.ack(k.Ack.GetSeq())
			case *pb.SessionResponse_Cancel:
				r.logger.Info("cancelled by Mother", "reason", k.Cancel.GetMessage())
				cancelRun(fmt.Errorf("cancelled by Mother: %s", k.Cancel.GetMessage()))
			}
		}
	}()
	tick := clock.NewTicker(r.opts.Clock, hb)
	defer tick.Stop()
	resultSent := false
	for {
		evs, res, _ := r.out.pending(sent)
		for _, e := range evs {
			if err := stream.Send(&pb.SessionRequest{Kind: &pb.SessionRequest_Event{Event: e}}); err != nil {
				return <-recvErrOr(r.opts.Clock, recvErr, err)
			}
			sent = e.GetSeq()
		}
		if res != nil && !resultSent {
			if err := stream.Send(&pb.SessionRequest{Kind: &pb.SessionRequest_Result{Result: res}}); err != nil {
				return <-recvErrOr(r.opts.Clock, recvErr, err)
			}
			resultSent = true
		}
		select {
		case <-r.out.signal:
		case <-tick.C:
			if err := stream.Send(&pb.SessionRequest{Kind: &pb.SessionRequest_Heartbeat{Heartbeat: &pb.Heartbeat{SentAt: timestamppb.Now()}}}); err != nil {
				return <-recvErrOr(r.opts.Clock, recvErr, err)
			}
		case err := <-recvErr:
			if errors.Is(err, io.EOF) && resultSent {
				return errResultStored
			}
			if errors.Is(err, io.EOF) {
				return status.Error(codes.Unavailable, "Mother closed the session")
			}
			return err
		case <-sctx.Done():
			return sctx.Err()
		}
	}
}

// recvErrOr prefers the stream's own error (the real reason) over a send
// error, which is usually just io.EOF.
func recvErrOr(c clock.Clock, recvErr chan error, sendErr error) chan error {
	out := make(chan error, 1)
	late := make(chan struct{})
	t := c.AfterFunc(2*time.Second, func() { close(late) })
	defer t.Stop()
	select {
	case err := <-recvErr:
		out <- err
	case <-late:
		out <- sendErr
	}
	return out
}
