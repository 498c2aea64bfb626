// Package nest is Mother's gRPC side of the chicks (proto/mother/v1).
//
// ChickService listens on config grpc.listen for chicks: every call carries
// the chick's id and its single-use token (see wire.Credentials), checked
// against the hatchery's hashed copy; a token is bound to its chick and
// useless once the chick has ended. The Session stream carries the chick's
// events (stored before they are acknowledged, duplicates dropped by
// sequence number so a reconnecting chick can resend what was not acked),
// heartbeats and its result one way, acks and the cancellation the other.
// Generate is the broker's door. FetchFiles hands a chick the files it
// starts with, in chunks; UploadFile brings files back.
//
// ChickService is served over TLS only (see LoadTLS): Mother keeps a
// private CA under <data>/chicks/tls and each chick receives its
// certificate and trusts nothing else, so a token crossing the LAN is
// encrypted and reaches only the Mother that started the chick.
//
// GateService shares ChickService's listener and answers the egress gates
// of isolated chicks (docs/isolation.md): a gate authenticates with its
// Docker host's name and a token derived from Mother's gate secret; it
// asks whether a chick (named by its gate key) may reach a destination,
// and reports how each connection ended. RequestAccess lets a chick ask
// its channel's admins for more (see AccessDesk). ProposeSkill and
// UpdateMemory hand Mother a skill the chick wrote and a change to its
// channel's memory (see Contributions).
//
// AdminService listens on a unix socket (mode 0600) for momctl.
package nest

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

	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/events"
	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hosttools"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/fallback"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// ChickSessions is what ChickService needs from the hatchery: a chick's
// token and assignment, its liveness, its events, result and files (those
// it starts with and those it sends back), and stopping it on a budget
// refusal.
type ChickSessions interface {
	Authenticate(id, token string) error
	Assignment(id string) (hatchery.Assignment, error)
	Touch(id string)
	Stopping(id string) (<-chan struct{}, func() string, error)
	LastSeq(id string) (uint64, error)
	WriteEvents(id string, evs []hatchery.SeqEvent) (w hatchery.Written, gap, err error)
	CommitEvents(id string, w hatchery.Written) (uint64, error)
	Finish(id string, r hatchery.Result) error
	StoreFile(id, rel string, attach bool, title string, r io.Reader) (hatchery.File, error)
	ChickFiles(id string) (hatchery.Files, error)
	Get(id string) (hatchery.Info, error)
	Stop(id string, reason hatchery.Reason, outcome string, grace time.Duration) (hatchery.State, error)
	// EventLimits, AdmitEvent and Flooded bound a chick's events
	// (chicks.events): the nest asks for each event as it arrives,
	// before it is decoded further or queued.
	EventLimits() hatchery.EventLimits
	AdmitEvent(id string, size int64) error
	Flooded(id string) error
}

// ChickAdmin is what AdminService needs from the hatchery, for momctl:
// list and inspect chicks, kill one and wait for its end, its logs, the
// hosts.
type ChickAdmin interface {
	Get(id string) (hatchery.Info, error)
	List(all bool) []hatchery.Info
	Stop(id string, reason hatchery.Reason, outcome string, grace time.Duration) (hatchery.State, error)
	Ended(id string) (<-chan struct{}, error)
	Logs(ctx context.Context, id string, follow bool, w io.Writer) error
	Hosts(ctx context.Context) []hatchery.HostStatus
	FollowEvents(ctx context.Context, id string, follow bool, f func(hatchery.StoredEvent) error) error
}

// Chicks is the hatchery as the nest's two services see it.
type Chicks interface {
	ChickSessions
	ChickAdmin
}

var _ Chicks = (*hatchery.Hatchery)(nil)

// Events lists the scheduled events (the events watcher), for momctl.
type Events interface {
	List(channel string) []events.Info
}

// Adapters reports the chat adapters' connections (Mother), for momctl.
type Adapters interface {
	AdapterReports() []chat.AdapterReport
}

// HostTools runs host tools for chicks within config's chicks.hostTools
// (hosttools.ChickInvoker).
type HostTools interface {
	// Specs are the host tools chicks may call now.
	Specs() []model.ToolSpec
	// InvokeForChick runs one; a forbidden tool is hosttools.ErrNotAllowed.
	InvokeForChick(ctx context.Context, chickChannel, tool, argsJSON string) (result string, isError bool, err error)
}

// ToolServers lists the host tool servers for momctl tools ls
// (hosttools.Manager).
type ToolServers interface {
	Status() []hosttools.ServerStatus
}

// Models is the broker.
type Models interface {
	Generate(ctx context.Context, c broker.Caller, req model.Request, onDelta func(model.Delta)) (model.Response, error)
	Budgets() []broker.Budget
}

// ProviderHealth is a Models that tells the health of the model providers
// its fallback chains call (broker.Broker).
type ProviderHealth interface {
	ProviderStatuses() []fallback.Status
}

// UsageReporter is a Models that sums its usage ledger (broker.Broker),
// for momctl usage.
type UsageReporter interface {
	Usage(days int, by string) (broker.Usage, error)
}

// Options build a Server.
type Options struct {
	Chicks    Chicks
	Models    Models
	Logger    *slog.Logger
	Version   string
	StartedAt time.Time
	// Clock is the time source (nil: the wall clock).
	Clock clock.Clock
	// KillGrace is the default time between cancel and kill.
	KillGrace time.Duration
	// ChickImage is the image chicks start from (for momctl status).
	ChickImage string
	// TLS secures ChickService (see LoadTLS); ServeChicks refuses to
	// serve without it.
	TLS credentials.TransportCredentials
	// HostTools serves InvokeHostTool (nil: chicks get no host tools).
	HostTools HostTools
	// ToolServers serves ListTools (nil: no servers to list).
	ToolServers ToolServers
	// Gate serves GateService for the egress gates (nil: every gate call
	// is refused). Connections are recorded with the chick if Chicks is an
	// EgressRecorder (the hatchery is).
	Gate *Gate
}

// Server serves both services.
type Server struct {
	// chicks serves ChickService, admin AdminService (both the
	// hatchery).
	chicks    ChickSessions
	admin     ChickAdmin
	models    Models
	logger    *slog.Logger
	version   string
	startedAt time.Time
	clock     clock.Clock
	killGrace time.Duration
	image     string
	tls       credentials.TransportCredentials
	hostTools HostTools
	servers   ToolServers
	gate      *Gate
	egress    EgressRecorder

	mu       sync.Mutex
	access   AccessDesk
	contrib  Contributions
	events   Events
	adapters Adapters
	versions map[string]string // chick id -> the version it joined with
	sessions map[string]*sessionSlot
	grpcs    []*grpc.Server
	stopped  bool
}

type sessionSlot struct{ cancel context.CancelFunc }

var (
	_ pb.ChickServiceServer = (*chickService)(nil)
	_ pb.AdminServiceServer = (*adminService)(nil)
	_ EgressRecorder        = (*hatchery.Hatchery)(nil)
)

// New returns a Server.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = 10 * time.Second
	}
	opts.Clock = clock.OrReal(opts.Clock)
	if opts.StartedAt.IsZero() {
		opts.StartedAt = opts.Clock.Now()
	}
	srv := &Server{
		chicks: opts.Chicks, admin: opts.Chicks, models: opts.Models, logger: opts.Logger.With("component", "nest"),
		version: opts.Version, startedAt: opts.StartedAt, clock: opts.Clock, killGrace: opts.KillGrace, sessions: map[string]*sessionSlot{},
		image: opts.ChickImage, tls: opts.TLS, versions: map[string]string{},
		hostTools: opts.HostTools, servers: opts.ToolServers, gate: opts.Gate,
	}
	if r, ok := opts.Chicks.(EgressRecorder); ok {
		srv.egress = r
	}
	return srv
}

// SetAdapters lets momctl see the adapters' connections.
func (s *Server) SetAdapters(a Adapters) {
	s.mu.Lock()
	s.adapters = a
	s.mu.Unlock()
}

func (s *Server) adapterReports() []chat.AdapterReport {
	s.mu.Lock()
	a := s.adapters
	s.mu.Unlock()
	if a == nil {
		return nil
	}
	return a.AdapterReports()
}

// rememberVersion keeps what a chick said it runs; versions of chicks that
// have ended are forgotten once there are many.
func (s *Server) rememberVersion(id, v string) {
	s.mu.Lock()
	s.versions[id] = v
	var ids []string
	if len(s.versions) > 256 {
		for k := range s.versions {
			ids = append(ids, k)
		}
	}
	s.mu.Unlock()
	for _, k := range ids {
		if in, err := s.chicks.Get(k); err != nil || in.State.Final() {
			s.mu.Lock()
			delete(s.versions, k)
			s.mu.Unlock()
		}
	}
}

func (s *Server) chickVersion(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.versions[id]
}

// SetEvents lets momctl list the scheduled events.
func (s *Server) SetEvents(e Events) {
	s.mu.Lock()
	s.events = e
	s.mu.Unlock()
}

func (s *Server) eventList() []events.Info {
	s.mu.Lock()
	e := s.events
	s.mu.Unlock()
	if e == nil {
		return nil
	}
	return e.List("")
}

// MaxStreamsPerConn bounds the calls in flight on one connection to the
// nest; a client's further calls wait for one to end. A chick keeps one
// connection (behind a gate: at most chicks.gate.maxNestConnsPerChick) and
// needs a few calls at once (its session, model calls, request_access),
// a gate one call per proxy connection it is deciding.
const MaxStreamsPerConn = 64

// ErrNoTLS: ChickService is served over TLS only (Options.TLS).
var ErrNoTLS = errors.New("nest: ChickService needs TLS credentials (see LoadTLS)")

// ServeChicks serves ChickService and GateService on lis, over TLS only,
// until Stop. A
// client speaking plaintext, or one that does not accept the nest's
// certificate, fails its handshake before any call is read.
func (s *Server) ServeChicks(lis net.Listener) error {
	if s.tls == nil {
		lis.Close()
		return ErrNoTLS
	}
	g := grpc.NewServer(
		grpc.Creds(s.tls),
		grpc.UnaryInterceptor(s.authUnary),
		grpc.StreamInterceptor(s.authStream),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		// The largest message a chick sends is a Generate request: its
		// whole history, images included (up to 5 MiB each). A Session
		// message is held to chicks.events.maxEventBytes by the codec,
		// before it is decoded (see sessionMsg).
		grpc.MaxRecvMsgSize(maxRecvMsgBytes),
		grpc.MaxConcurrentStreams(MaxStreamsPerConn),
		grpc.MaxSendMsgSize(64<<20),
		grpc.ForceServerCodecV2(limitCodec{encoding.GetCodecV2(protoCodecName)}),
	)
	pb.RegisterChickServiceServer(g, &chickService{s: s})
	pb.RegisterGateServiceServer(g, &gateService{s: s})
	if !s.track(g) {
		lis.Close()
		return grpc.ErrServerStopped
	}
	return g.Serve(lis)
}

// ServeAdmin serves AdminService on lis (a unix socket) until Stop.
func (s *Server) ServeAdmin(lis net.Listener) error {
	g := grpc.NewServer()
	pb.RegisterAdminServiceServer(g, &adminService{s: s})
	if !s.track(g) {
		lis.Close()
		return grpc.ErrServerStopped
	}
	return g.Serve(lis)
}

func (s *Server) track(g *grpc.Server) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.grpcs = append(s.grpcs, g)
	return true
}

// Stop closes both services. Chicks connected now will reconnect to the
// next Mother.
func (s *Server) Stop() {
	s.mu.Lock()
	gs := s.grpcs
	s.grpcs = nil
	s.stopped = true
	s.mu.Unlock()
	for _, g := range gs {
		g.Stop()
	}
}

// ListenUnix listens on a unix socket with mode 0600. A stale socket file
// is replaced; a live one (another Mother) is an error.
func ListenUnix(path string) (net.Listener, error) {
	if err := fsync.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	if _, err := os.Lstat(path); err == nil {
		if c, derr := net.DialTimeout("unix", path, time.Second); derr == nil {
			c.Close()
			return nil, fmt.Errorf("admin socket %s: another Mother is listening there", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("admin socket: remove stale %s: %w", path, err)
		}
	}
	// Bind in a private directory, set the mode, then move the socket into
	// place: no moment where others could connect, and no process-wide
	// umask games.
	tmp, err := os.MkdirTemp(filepath.Dir(path), ".s")
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	defer os.RemoveAll(tmp)
	lis, err := net.Listen("unix", filepath.Join(tmp, "s"))
	if err != nil {
		if len(tmp) > 100 {
			return nil, fmt.Errorf("admin socket %s: the path is too long for a unix socket (about 100 bytes at most): set admin.socket to a shorter path (%w)", path, err)
		}
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	ul := lis.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	if err := os.Chmod(filepath.Join(tmp, "s"), 0o600); err != nil {
		lis.Close()
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	if err := os.Rename(filepath.Join(tmp, "s"), path); err != nil {
		lis.Close()
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	return &unixListener{UnixListener: ul, path: path}, nil
}

// unixListener removes its socket file on Close.
type unixListener struct {
	*net.UnixListener
	path string
	once sync.Once
}

func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() { os.Remove(l.path) })
	return err
}

type ctxKey struct{}

// chickOf returns the authenticated chick id of a call.
func chickOf(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

func (s *Server) authenticate(ctx context.Context) (context.Context, error) {
	id, tok := wire.FromIncoming(ctx)
	if id == "" || tok == "" {
		return nil, status.Error(codes.Unauthenticated, "missing chick id or token")
	}
	if err := s.chicks.Authenticate(id, tok); err != nil {
		s.logger.Warn("chick call refused", "chick", id, "err", err)
		if errors.Is(err, hatchery.ErrChickEnded) {
			return nil, status.Error(codes.Unauthenticated, "token expired: the chick has ended")
		}
		return nil, status.Error(codes.Unauthenticated, "token not valid for this chick")
	}
	return context.WithValue(ctx, ctxKey{}, id), nil
}

func (s *Server) authUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	auth := s.authenticate
	if strings.HasPrefix(info.FullMethod, gateMethodPrefix) {
		auth = s.authenticateGate
	}
	ctx, err := auth(ctx)
	if err != nil {
		return nil, err
	}
	return h(ctx, req)
}

type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (a authedStream) Context() context.Context { return a.ctx }

func (s *Server) authStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, err := s.authenticate(ss.Context())
	if err != nil {
		return err
	}
	return h(srv, authedStream{ServerStream: ss, ctx: ctx})
}

type chickService struct {
	pb.UnimplementedChickServiceServer
	s *Server
}

func (c *chickService) Join(ctx context.Context, req *pb.JoinRequest) (*pb.JoinResponse, error) {
	id := chickOf(ctx)
	a, err := c.s.chicks.Assignment(id)
	if err != nil {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	c.s.logger.Info("chick joined", "chick", id, "version", req.GetVersion())
	c.s.rememberVersion(id, req.GetVersion())
	var hostTools []*pb.ToolSpec
	if c.s.hostTools != nil {
		for _, t := range c.s.hostTools.Specs() {
			hostTools = append(hostTools, wire.ToolSpecToProto(t))
		}
	}
	return &pb.JoinResponse{
		HostTools: hostTools,
		ChickId:   a.ChickID, Channel: a.Channel, Goal: a.Goal, Tier: a.Tier, SystemPrompt: a.System,
		Limits: &pb.ChickLimits{
			MaxTurns: int32(a.MaxTurns), WallTimeout: wire.DurationToProto(a.WallTimeout),
			TokenBudget: a.TokenBudget, HeartbeatInterval: wire.DurationToProto(a.HeartbeatInterval),
		},
	}, nil
}

// attach registers a session for chick id, ending an older one (a chick
// that reconnected before its old stream timed out).
func (s *Server) attach(id string, cancel context.CancelFunc) *sessionSlot {
	slot := &sessionSlot{cancel: cancel}
	s.mu.Lock()
	old := s.sessions[id]
	s.sessions[id] = slot
	s.mu.Unlock()
	if old != nil {
		old.cancel()
	}
	return slot
}

func (s *Server) detach(id string, slot *sessionSlot) {
	s.mu.Lock()
	if s.sessions[id] == slot {
		delete(s.sessions, id)
	}
	s.mu.Unlock()
}

func (c *chickService) Session(stream pb.ChickService_SessionServer) error {
	id := chickOf(stream.Context())
	lg := c.s.logger.With("chick", id)
	// A chick stopped for flooding is not heard again: not a byte of a
	// new session is read.
	if err := c.s.chicks.Flooded(id); err != nil {
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	limits := c.s.chicks.EventLimits()
	first, err := recvSession(stream, limits.MaxEventBytes)
	if err != nil {
		return err
	}
	if first.size > limits.MaxEventBytes {
		return status.Error(codes.ResourceExhausted, c.s.chicks.AdmitEvent(id, first.size).Error())
	}
	if first.req.GetHello() == nil {
		return status.Error(codes.InvalidArgument, "a session starts with hello")
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	slot := c.s.attach(id, cancel)
	defer c.s.detach(id, slot)
	c.s.chicks.Touch(id)
	last, err := c.s.chicks.LastSeq(id)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	lg.Debug("session opened", "chick_sent", first.req.GetHello().GetLastSentSeq(), "stored", last)
	if err := stream.Send(&pb.SessionResponse{Kind: &pb.SessionResponse_Ack{Ack: &pb.Ack{Seq: last}}}); err != nil {
		return err
	}
	stopCh, reasonOf, err := c.s.chicks.Stopping(id)
	if err != nil {
		return status.Error(codes.NotFound, err.Error())
	}
	// The receiver runs ahead of the storing: the events that arrive
	// while a batch is being written queue here and are written together.
	// The stream's end comes through the same channel, after the
	// messages before it.
	//
	// Every event is admitted (its size, the chick's rate) before it is
	// queued, and what waits is bounded in bytes as well as in count:
	// past maxQueuedBytes the receiver stops reading, and the transport's
	// flow control holds the chick back. A refused event ends the
	// session: the chick is being stopped for flooding.
	type received struct {
		m    *pb.SessionRequest
		size int64 // its bytes on the wire (at most maxQueuedBytes), held in queued until stored
		err  error
	}
	msgs := make(chan received, maxEventBatch)
	queued := semaphore.NewWeighted(maxQueuedBytes)
	go func() {
		for {
			sm, err := recvSession(stream, limits.MaxEventBytes)
			var m *pb.SessionRequest
			if err == nil {
				m = sm.req
				if sm.size > limits.MaxEventBytes || m.GetEvent() != nil {
					err = c.s.chicks.AdmitEvent(id, sm.size)
				}
			}
			// A heartbeat is heard when it arrives, not when the loop
			// below gets to it: behind a batch whose fsync a busy disk
			// (an SD card under other writes) holds for seconds, a
			// healthy chick was taken for a hung one.
			if m.GetHeartbeat() != nil {
				c.s.chicks.Touch(id)
			}
			r := received{m: m, err: err}
			if err == nil && m.GetEvent() != nil {
				// An event bigger than the queue takes all of it: it
				// waits alone.
				r.size = min(sm.size, maxQueuedBytes)
				if queued.Acquire(ctx, r.size) != nil {
					return
				}
			}
			select {
			case msgs <- r:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	// A batch is written and shown at once; its fsync runs in its own
	// goroutine, one at a time, and the cumulative ack for what it
	// covered goes out from this loop when it returns. The batches
	// written while an fsync runs wait for the next one, which covers
	// them all: an event is never held up behind the fsync of the events
	// before it (on a card that is milliseconds per event), and an ack
	// still follows the fsync that covers it. Only this loop sends on the
	// stream.
	type committed struct {
		ack uint64
		err error
	}
	commitDone := make(chan committed, 1) // one commit in flight at most
	inFlight := false
	var toCommit *hatchery.Written // written since the commit in flight began
	commit := func(w hatchery.Written) {
		if inFlight {
			toCommit = &w // covers what an earlier toCommit did
			return
		}
		inFlight = true
		go func() {
			ack, err := c.s.chicks.CommitEvents(id, w)
			commitDone <- committed{ack, err}
		}()
	}
	// commitEnded sends the ack of a commit that returned (unless told
	// not to) and starts the next one.
	commitEnded := func(r committed, ack bool) error {
		inFlight = false
		if r.err != nil {
			if errors.Is(r.err, hatchery.ErrChickEnded) {
				return status.Error(codes.FailedPrecondition, "the chick has ended")
			}
			lg.Warn("events not stored", "stored_up_to", r.ack, "err", r.err)
			return status.Error(codes.DataLoss, r.err.Error())
		}
		if ack {
			if err := stream.Send(&pb.SessionResponse{Kind: &pb.SessionResponse_Ack{Ack: &pb.Ack{Seq: r.ack}}}); err != nil {
				return err
			}
		}
		if w := toCommit; w != nil {
			toCommit = nil
			commit(*w)
		}
		return nil
	}
	// commitAll waits until every event written is durable (and,
	// with ack, acknowledged).
	commitAll := func(ack bool) error {
		for inFlight {
			if err := commitEnded(<-commitDone, ack); err != nil {
				return err
			}
		}
		return nil
	}
	var next *received // a message taken while draining a batch
	batch := make([]hatchery.SeqEvent, 0, maxEventBatch)
	for {
		var r received
		if next != nil {
			r, next = *next, nil
		} else {
			select {
			case <-ctx.Done():
				if stream.Context().Err() == nil {
					return status.Error(codes.Aborted, "replaced by a newer session of the same chick")
				}
				return ctx.Err()
			case <-stopCh:
				stopCh = nil
				reason := reasonOf()
				lg.Info("sending cancellation", "reason", reason)
				if err := stream.Send(&pb.SessionResponse{Kind: &pb.SessionResponse_Cancel{Cancel: &pb.Cancel{Message: reason}}}); err != nil {
					return err
				}
				continue
			case cr := <-commitDone:
				if err := commitEnded(cr, true); err != nil {
					return err
				}
				continue
			case r = <-msgs:
			}
		}
		if r.err != nil {
			if errors.Is(r.err, io.EOF) {
				// The chick closed its side: what it sent is made
				// durable and acknowledged before the session ends.
				return commitAll(true)
			}
			if errors.Is(r.err, hatchery.ErrFlooding) {
				return c.flooded(stream, lg, r.err, commitAll)
			}
			return r.err
		}
		switch k := r.m.GetKind().(type) {
		case *pb.SessionRequest_Heartbeat:
			// Heard by the receiver already.
		case *pb.SessionRequest_Hello:
			c.s.chicks.Touch(id)
		case *pb.SessionRequest_Event:
			batch = append(batch[:0], hatchery.SeqEvent{Seq: k.Event.GetSeq(), Event: wire.EventFromProto(k.Event)})
			batchBytes := r.size
		drain:
			for len(batch) < maxEventBatch {
				select {
				case more := <-msgs:
					ev := more.m.GetEvent()
					if ev == nil {
						next = &more
						break drain
					}
					batch = append(batch, hatchery.SeqEvent{Seq: ev.GetSeq(), Event: wire.EventFromProto(ev)})
					batchBytes += more.size
				default:
					break drain
				}
			}
			w, gap, err := c.s.chicks.WriteEvents(id, batch)
			clear(batch) // drop the events' references until the next batch
			queued.Release(batchBytes)
			if errors.Is(err, hatchery.ErrFlooding) {
				// Past chicks.events.maxBytes: the events before the one
				// refused were written and are made durable.
				commit(w)
				return c.flooded(stream, lg, err, commitAll)
			}
			if err != nil {
				if errors.Is(err, hatchery.ErrChickEnded) {
					return status.Error(codes.FailedPrecondition, "the chick has ended")
				}
				lg.Warn("events not stored", "seq", batch[0].Seq, "events", len(batch), "stored_up_to", w.Acked, "err", err)
				return status.Error(codes.DataLoss, err.Error())
			}
			commit(w)
			if gap != nil {
				// The events before the gap are made durable; the
				// chick resends from its last ack.
				if err := commitAll(false); err != nil {
					return err
				}
				lg.Warn("events not stored", "err", gap)
				return status.Error(codes.DataLoss, gap.Error())
			}
		case *pb.SessionRequest_Result:
			// Every event before the result is durable (and acknowledged)
			// before the result is stored.
			if err := commitAll(true); err != nil {
				return err
			}
			r := k.Result
			if err := c.s.chicks.Finish(id, hatchery.Result{Text: r.GetText(), StopReason: string(wire.StopReasonFromProto(r.GetStopReason())), Error: r.GetError(), OutputFiles: r.GetOutputFiles()}); err != nil {
				return status.Error(codes.Internal, err.Error())
			}
			lg.Info("chick result stored", "stop", wire.StopReasonFromProto(r.GetStopReason()))
			// Closing the stream tells the chick its result is stored.
			return nil
		}
	}
}

// maxEventBatch caps how many of a chick's events are written together (and
// how many received messages wait while a batch is written).
const maxEventBatch = 256

// maxQueuedBytes caps the bytes (on the wire) of a chick's events received
// and not yet written; one event bigger than that (up to
// chicks.events.maxEventBytes) still passes alone. With the event being
// read and the batch's encoding, a session holds a few MiB at most however
// fast its chick sends.
const maxQueuedBytes = 1 << 20

// maxRecvMsgBytes is the largest message the nest reads from a chick or a
// gate: what a Generate request with images may need.
const maxRecvMsgBytes = 64 << 20

// flooded ends a session whose chick passed a bound of chicks.events:
// what it stored is made durable and acknowledged, it is told why it is
// being cancelled (the hatchery stops it: cancel, then kill), and the
// stream ends with ResourceExhausted.
func (c *chickService) flooded(stream pb.ChickService_SessionServer, lg *slog.Logger, why error, commitAll func(bool) error) error {
	if err := commitAll(true); err != nil {
		return err
	}
	lg.Warn("session ended: the chick is flooding Mother", "why", why)
	if err := stream.Send(&pb.SessionResponse{Kind: &pb.SessionResponse_Cancel{Cancel: &pb.Cancel{Message: why.Error()}}}); err != nil {
		return err
	}
	return status.Error(codes.ResourceExhausted, why.Error())
}

func (c *chickService) Generate(req *pb.GenerateRequest, stream pb.ChickService_GenerateServer) error {
	id := chickOf(stream.Context())
	info, err := c.s.chicks.Get(id)
	if err != nil {
		return status.Error(codes.NotFound, err.Error())
	}
	c.s.chicks.Touch(id)
	caller := broker.Caller{ChickID: id, Channel: info.Channel, Tier: info.Tier, User: info.Requester()}
	var (
		sendErr error
		thought bool
	)
	resp, err := c.s.models.Generate(stream.Context(), caller, wire.RequestFromProto(req), func(d model.Delta) {
		switch {
		case sendErr != nil:
		case d.Thinking != "":
			// The thoughts stay here: the chick hears only that its model
			// is thinking, once.
			if !thought {
				thought = true
				sendErr = stream.Send(&pb.GenerateResponse{Kind: &pb.GenerateResponse_Thinking{Thinking: &pb.GenerateThinking{}}})
			}
		case d.Text != "":
			sendErr = stream.Send(&pb.GenerateResponse{Kind: &pb.GenerateResponse_TextDelta{TextDelta: d.Text}})
		}
	})
	c.s.chicks.Touch(id)
	if err != nil {
		if errors.Is(err, model.ErrBudgetExhausted) {
			// The chick should stop by itself on this answer; make sure.
			_, _ = c.s.chicks.Stop(id, hatchery.ReasonBudget, err.Error(), c.s.killGrace)
		}
		return wire.ModelErrorToStatus(err)
	}
	if sendErr != nil {
		return sendErr
	}
	return stream.Send(&pb.GenerateResponse{Kind: &pb.GenerateResponse_Done{Done: wire.DoneToProto(resp)}})
}

// FetchFiles streams the chick's files (hatchery.Files.List): one entry
// message each, then a file's content in data messages of at most
// wire.FetchChunkBytes, then done. Each file's size is taken from the file
// opened (the listing may be older), and exactly that many bytes are sent.
func (c *chickService) FetchFiles(_ *pb.FetchFilesRequest, stream pb.ChickService_FetchFilesServer) error {
	id := chickOf(stream.Context())
	files, err := c.s.chicks.ChickFiles(id)
	if err != nil {
		return status.Error(codes.NotFound, err.Error())
	}
	entries, err := files.List()
	if errors.Is(err, hatchery.ErrTooLarge) {
		c.s.logger.Warn("chick files refused", "chick", id, "err", err)
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	if err != nil {
		c.s.logger.Warn("chick files not listed", "chick", id, "err", err)
		return status.Error(codes.Internal, err.Error())
	}
	var nfiles, total int64
	buf := make([]byte, wire.FetchChunkBytes)
	for _, e := range entries {
		if e.Dir {
			if err := stream.Send(&pb.FetchFilesResponse{Kind: &pb.FetchFilesResponse_Entry{Entry: wire.WorkspaceEntryToProto(e.Path, true, 0, false, e.ModTime)}}); err != nil {
				return err
			}
			continue
		}
		n, err := c.sendFile(stream, e, buf, wire.MaxFetchBytes-total)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since it was listed
		}
		if err != nil {
			return err
		}
		nfiles++
		total += n
		c.s.chicks.Touch(id)
	}
	c.s.logger.Info("chick files sent", "chick", id, "files", nfiles, "bytes", total)
	return stream.Send(&pb.FetchFilesResponse{Kind: &pb.FetchFilesResponse_Done{Done: &pb.FetchFilesDone{Files: nfiles, Bytes: total}}})
}

// sendFile sends one file's entry and content, at most limit bytes.
func (c *chickService) sendFile(stream pb.ChickService_FetchFilesServer, e hatchery.FileEntry, buf []byte, limit int64) (int64, error) {
	f, err := e.Open()
	if errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	if err != nil {
		return 0, status.Errorf(codes.Internal, "send %s: %v", e.Path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, status.Errorf(codes.Internal, "send %s: %v", e.Path, err)
	}
	size := st.Size()
	if size > limit {
		return 0, status.Error(codes.ResourceExhausted, hatchery.ErrTooLarge.Error())
	}
	if err := stream.Send(&pb.FetchFilesResponse{Kind: &pb.FetchFilesResponse_Entry{Entry: wire.WorkspaceEntryToProto(e.Path, false, size, st.Mode()&0o100 != 0, st.ModTime())}}); err != nil {
		return 0, err
	}
	for left := size; left > 0; {
		n, err := io.ReadFull(f, buf[:min(left, int64(len(buf)))])
		if err != nil {
			// Shorter than it was a moment ago: the chick would get a
			// torn file.
			return 0, status.Errorf(codes.Aborted, "send %s: it changed while being sent (%v)", e.Path, err)
		}
		if err := stream.Send(&pb.FetchFilesResponse{Kind: &pb.FetchFilesResponse_Data{Data: buf[:n]}}); err != nil {
			return 0, err
		}
		left -= int64(n)
	}
	return size, nil
}

// uploadReader reads the data messages of an upload stream.
type uploadReader struct {
	stream pb.ChickService_UploadFileServer
	buf    []byte
}

func (u *uploadReader) Read(p []byte) (int, error) {
	for len(u.buf) == 0 {
		m, err := u.stream.Recv()
		if err != nil {
			return 0, err
		}
		d, ok := m.GetKind().(*pb.UploadFileRequest_Data)
		if !ok {
			return 0, errors.New("upload: a second header")
		}
		u.buf = d.Data
	}
	n := copy(p, u.buf)
	u.buf = u.buf[n:]
	return n, nil
}

func (c *chickService) UploadFile(stream pb.ChickService_UploadFileServer) error {
	id := chickOf(stream.Context())
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	h := first.GetHeader()
	if h == nil {
		return status.Error(codes.InvalidArgument, "an upload starts with its header")
	}
	f, err := c.s.chicks.StoreFile(id, h.GetPath(), h.GetAttach(), h.GetTitle(), &uploadReader{stream: stream})
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	c.s.logger.Info("chick file stored", "chick", id, "path", f.RelPath, "bytes", f.Size, "attach", f.Attach)
	return stream.SendAndClose(&pb.UploadFileResponse{StoredPath: f.RelPath})
}

// InvokeHostTool runs a host tool for the calling chick, if
// chicks.hostTools allows it: a forbidden tool is PermissionDenied (the
// tool's server never hears of it); the tool's own failures are results
// with is_error.
func (c *chickService) InvokeHostTool(ctx context.Context, req *pb.InvokeHostToolRequest) (*pb.InvokeHostToolResponse, error) {
	id := chickOf(ctx)
	if c.s.hostTools == nil {
		return nil, status.Errorf(codes.PermissionDenied, "host tool %q is not available to chicks: Mother offers them none", req.GetTool())
	}
	a, err := c.s.chicks.Assignment(id)
	if err != nil {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	text, isErr, err := c.s.hostTools.InvokeForChick(ctx, a.Channel, req.GetTool(), req.GetArgsJson())
	switch {
	case errors.Is(err, hosttools.ErrNotAllowed):
		c.s.logger.Warn("chick refused a host tool", "chick", id, "tool", req.GetTool())
		return nil, status.Error(codes.PermissionDenied, err.Error())
	case err != nil:
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &pb.InvokeHostToolResponse{Result: text, IsError: isErr}, nil
}
