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
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/keepalive"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/events"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hosttools"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/fallback"
	"github.com/mother-chat/mother/pkg/version"
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
	// Calls bound the chicks' model calls (config chicks.calls).
	Calls CallLimits
	// Release is the release the nest says it is to chicks, and judges
	// theirs against (default version.Release; tests set another to play
	// an older or newer Mother).
	Release string
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
	calls     *callGate
	release   string

	mu     sync.Mutex
	access AccessDesk
	// toolGate checks roles before a chick's host tool call (nil: none).
	toolGate HostToolGate
	// roles shows who has which role (nil: none known).
	roles   chat.Roles
	contrib Contributions
	// recall searches a chick's own channel's history (recall.go).
	recall   Recaller
	events   Events
	adapters Adapters
	versions map[string]string // chick id -> the version it joined with
	// gateReleases: host -> the release/protocol its gate last said.
	gateReleases map[string]string
	sessions     map[string]*sessionSlot
	grpcs        []*grpc.Server
	stopped      bool
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
		calls: newCallGate(opts.Calls), release: cmp.Or(opts.Release, version.Release),
	}
	if r, ok := opts.Chicks.(EgressRecorder); ok {
		srv.egress = r
	}
	return srv
}

// SetRoles lets momctl see who has which role and what was refused.
func (s *Server) SetRoles(r chat.Roles) {
	s.mu.Lock()
	s.roles = r
	s.mu.Unlock()
}

func (s *Server) roleSource() chat.Roles {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.roles
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

// maxRecvMsgBytes is the largest message the nest reads from a chick or
// a gate: a Generate request (chicks.calls.maxRequestBytes), or an event
// if chicks.events.maxEventBytes is larger.
func (s *Server) maxRecvMsgBytes() int64 {
	if s.chicks == nil {
		return s.calls.limits.MaxRequestBytes
	}
	return max(s.calls.limits.MaxRequestBytes, s.chicks.EventLimits().MaxEventBytes)
}

// The nest's flow-control windows (ServeChicks).
const (
	streamWindowBytes = 256 << 10
	connWindowBytes   = 1 << 20
)

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
		// The largest message a chick sends is a Generate request, held
		// to chicks.calls.maxRequestBytes: gRPC refuses a longer message
		// of any method from its length, unread. A Session message is
		// held to chicks.events.maxEventBytes by the codec, before it is
		// decoded (see sessionMsg).
		grpc.MaxRecvMsgSize(int(s.maxRecvMsgBytes())),
		grpc.MaxConcurrentStreams(MaxStreamsPerConn),
		// Fixed flow-control windows: what a chick sends ahead of the
		// nest's reading is at most a stream's window per stream (gRPC's
		// own estimate would raise it to 16 MiB on a fast link, and a
		// model call waiting for room to be read would be held in it).
		grpc.InitialWindowSize(streamWindowBytes),
		grpc.InitialConnWindowSize(connWindowBytes),
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
