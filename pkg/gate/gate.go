package gate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/version"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// Resolver looks up the addresses of a name.
type Resolver func(ctx context.Context, host string) ([]netip.Addr, error)

// Options configure a gate.
type Options struct {
	// Dir is where the sockets are made (MOTHER_GATE_DIR, wire.GateDir).
	Dir string
	// Upstream is Mother's nest address, host:port (MOTHER_ADDR): where
	// nest.sock leads and where GateService is called.
	Upstream string
	// CAPEM is Mother's nest CA certificate (MOTHER_CA_PEM).
	CAPEM []byte
	// HostName and Token are the gate's GateService credentials
	// (MOTHER_GATE_HOST, MOTHER_GATE_TOKEN).
	HostName, Token string
	Logger          *slog.Logger
	// Clock times the preface deadline, connection durations and retries
	// (default clock.Real).
	Clock clock.Clock
	// Resolver looks names up (default: the system's DNS).
	Resolver Resolver
	// LocalAddrs lists the gate host's own addresses, which no chick may
	// reach (default: the addresses of every interface).
	LocalAddrs func() ([]netip.Addr, error)
	// PrefaceTimeout bounds the wait for a connection's preface, and a
	// proxy connection's request head after it (default 5s).
	PrefaceTimeout time.Duration
	// DialTimeout bounds each TCP dial, to Mother or to a destination
	// (default 10s).
	DialTimeout time.Duration
	// CallTimeout bounds each GateService call and each DNS lookup
	// (default 15s).
	CallTimeout time.Duration
	// MaxNestConnsPerChick and MaxProxyConnsPerChick bound one chick's
	// open connections on nest.sock and proxy.sock, so that one chick
	// cannot starve the others of the gate (defaults 4 and 32).
	MaxNestConnsPerChick, MaxProxyConnsPerChick int
	// MaxPending bounds the connections that have not yet named their
	// chick; past it the oldest is closed (default 64).
	MaxPending int
	// MaxConns bounds the named connections in all (default 512): with
	// MaxPending, what bounds the gate's memory.
	MaxConns int
	// DialOptions are extra gRPC options (tests).
	DialOptions []grpc.DialOption
}

// Gate is a running gate: New listens, Serve serves until its context
// ends.
type Gate struct {
	opts      Options
	log       *slog.Logger
	clock     clock.Clock
	nestLis   net.Listener
	proxyLis  net.Listener
	conn      *grpc.ClientConn
	client    pb.GateServiceClient
	caps      *caps
	lim       *limiter
	refusals  *refusals
	reports   chan *pb.ReportRequest
	reportsWG sync.WaitGroup
	reportCtx context.Context
	endReport context.CancelFunc

	mu     sync.Mutex
	conns  map[io.Closer]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Run listens and serves until ctx ends; it returns nil then.
func Run(ctx context.Context, opts Options) error {
	g, err := New(opts)
	if err != nil {
		return err
	}
	return g.Serve(ctx)
}

// New checks opts, removes stale sockets and listens on both. Call Serve
// next: it owns the listeners.
func New(opts Options) (*Gate, error) {
	switch {
	case opts.Dir == "":
		return nil, errors.New("gate: no socket directory")
	case opts.Upstream == "":
		return nil, errors.New("gate: no upstream (Mother's nest address)")
	case opts.HostName == "" || opts.Token == "":
		return nil, errors.New("gate: host name and token are required")
	}
	if _, _, err := net.SplitHostPort(opts.Upstream); err != nil {
		return nil, fmt.Errorf("gate: upstream %q is not host:port: %w", opts.Upstream, err)
	}
	creds, err := wire.ClientTLS(opts.CAPEM)
	if err != nil {
		return nil, fmt.Errorf("gate: Mother's CA certificate: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Clock = clock.OrReal(opts.Clock)
	if opts.Resolver == nil {
		opts.Resolver = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if opts.LocalAddrs == nil {
		opts.LocalAddrs = interfaceAddrs
	}
	if opts.PrefaceTimeout <= 0 {
		opts.PrefaceTimeout = DefaultPrefaceTimeout
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 10 * time.Second
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 15 * time.Second
	}
	for _, l := range []struct {
		v   *int
		def int
	}{
		{&opts.MaxNestConnsPerChick, DefaultNestConnsPerChick}, {&opts.MaxProxyConnsPerChick, DefaultProxyConnsPerChick},
		{&opts.MaxPending, DefaultPending}, {&opts.MaxConns, DefaultConns},
	} {
		if *l.v <= 0 {
			*l.v = l.def
		}
	}
	conn, err := grpc.NewClient(opts.Upstream, append([]grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithChainUnaryInterceptor(sayRelease)}, opts.DialOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("gate: GateService at %s: %w", opts.Upstream, err)
	}
	g := &Gate{
		opts:     opts,
		log:      opts.Logger.With("component", "gate"),
		clock:    opts.Clock,
		conn:     conn,
		client:   pb.NewGateServiceClient(conn),
		caps:     newCaps(opts.Clock),
		lim:      newLimiter(opts),
		refusals: newRefusals(opts.Clock),
		reports:  make(chan *pb.ReportRequest, 1024),
		conns:    map[io.Closer]struct{}{},
	}
	g.reportCtx, g.endReport = context.WithCancel(context.Background())
	fail := func(err error) (*Gate, error) {
		if g.nestLis != nil {
			g.nestLis.Close()
		}
		g.endReport()
		conn.Close()
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return fail(fmt.Errorf("gate: %w", err))
	}
	if g.nestLis, err = listenUnix(g.NestSocket()); err != nil {
		return fail(err)
	}
	if g.proxyLis, err = listenUnix(g.ProxySocket()); err != nil {
		return fail(err)
	}
	return g, nil
}

// listenUnix listens at path, removing what a gate that died left there,
// and lets every user connect (chicks run as their own user).
func listenUnix(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("gate: remove stale socket: %w", err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("gate: %w", err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		lis.Close()
		return nil, fmt.Errorf("gate: %w", err)
	}
	return lis, nil
}

// NestSocket is the path of nest.sock.
func (g *Gate) NestSocket() string { return filepath.Join(g.opts.Dir, wire.GateNestSocket) }

// ProxySocket is the path of proxy.sock.
func (g *Gate) ProxySocket() string { return filepath.Join(g.opts.Dir, wire.GateProxySocket) }

// Serve accepts on both sockets until ctx ends, then closes them (removing
// the files) and every connection, sends the reports still queued (for a
// few seconds at most) and returns nil.
func (g *Gate) Serve(ctx context.Context) error {
	g.log.Info("gate listening", "dir", g.opts.Dir, "upstream", g.opts.Upstream, "host", g.opts.HostName,
		"nest_conns_per_chick", g.opts.MaxNestConnsPerChick, "proxy_conns_per_chick", g.opts.MaxProxyConnsPerChick,
		"pending", g.opts.MaxPending, "conns", g.opts.MaxConns, "preface_timeout", g.opts.PrefaceTimeout)
	g.reportsWG.Add(1)
	go g.sendReports()
	var accepting sync.WaitGroup
	accepting.Add(2)
	go func() { defer accepting.Done(); g.accept(ctx, g.nestLis, g.serveNest) }()
	go func() { defer accepting.Done(); g.accept(ctx, g.proxyLis, g.serveProxy) }()
	<-ctx.Done()
	g.nestLis.Close()
	g.proxyLis.Close()
	accepting.Wait()
	g.mu.Lock()
	g.closed = true
	for c := range g.conns {
		c.Close()
	}
	g.mu.Unlock()
	g.wg.Wait()
	close(g.reports)
	drain := g.clock.AfterFunc(drainFor, g.endReport)
	g.reportsWG.Wait()
	drain.Stop()
	g.endReport()
	g.conn.Close()
	g.log.Info("gate stopped")
	return nil
}

// accept serves lis's connections, each in its own goroutine, entering
// each in the pending pool first (which closes the oldest pending one
// when full), so the goroutines waiting for a preface stay bounded.
func (g *Gate) accept(ctx context.Context, lis net.Listener, serve func(context.Context, net.Conn, *pendingConn)) {
	for {
		c, err := lis.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return
			}
			// Out of descriptors and the like: wait a little.
			g.log.Warn("accept failed", "socket", lis.Addr(), "err", err)
			if clock.Sleep(ctx, g.clock, 100*time.Millisecond) != nil {
				return
			}
			continue
		}
		if !g.track(c) {
			c.Close()
			return
		}
		p := g.lim.enter(c)
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			defer g.untrack(c)
			defer c.Close()
			defer g.lim.leave(p)
			defer func() {
				if p := recover(); p != nil {
					g.log.Error("connection handler panicked", "panic", p)
				}
			}()
			serve(ctx, c, p)
		}()
	}
}

// track registers a connection to close at shutdown; false once closing.
func (g *Gate) track(c io.Closer) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.conns[c] = struct{}{}
	return true
}

func (g *Gate) untrack(c io.Closer) {
	g.mu.Lock()
	delete(g.conns, c)
	g.mu.Unlock()
}

// armPreface starts the preface deadline of c: when it passes before
// stop, c's pending reads fail. stop says whether it had passed.
func (g *Gate) armPreface(c net.Conn) (stop func() (expired bool)) {
	var mu sync.Mutex
	done, expired := false, false
	timer := g.clock.AfterFunc(g.opts.PrefaceTimeout, func() {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			expired = true
			c.SetReadDeadline(longAgo)
		}
	})
	return func() bool {
		mu.Lock()
		done = true
		mu.Unlock()
		timer.Stop()
		return expired
	}
}

// named reads the preface of a pending connection on sock and checks its
// key (itself: no call to Mother), taking the connection out of the
// pending pool. ok false: the connection is to be closed, and was logged
// (once in a while).
func (g *Gate) named(br *bufio.Reader, p *pendingConn, sock socket) (id, key string, ok bool) {
	id, key, err := readPreface(br)
	if !g.lim.leave(p) {
		g.dropped(sock, "pushed out of the pending pool by newer connections")
		return "", "", false
	}
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = fmt.Errorf("no preface within %s", g.opts.PrefaceTimeout)
		}
		g.dropped(sock, err.Error())
		return "", "", false
	}
	good, proxy := wire.CheckChickKey(g.opts.Token, id, key)
	if !good || (sock == sockProxy && !proxy) {
		g.dropped(sock, fmt.Sprintf("not a gate key for chick %.40q here", id))
		return "", "", false
	}
	return id, key, true
}

// serveNest pipes one nest.sock connection to Mother, once it has named
// its chick with a good key and the chick is within its limit.
func (g *Gate) serveNest(ctx context.Context, c net.Conn, p *pendingConn) {
	stop := g.armPreface(c)
	// Small: it holds the preface line, then what came with it.
	br := bufio.NewReaderSize(c, maxPreface)
	id, key, ok := g.named(br, p, sockNest)
	if stop() || !ok {
		return
	}
	release, why := g.lim.acquire(id, sockNest)
	if why != "" {
		g.refused(id, key, sockNest, why)
		return
	}
	defer release()
	d := net.Dialer{Timeout: g.opts.DialTimeout, KeepAlive: 30 * time.Second}
	up, err := d.DialContext(ctx, "tcp", g.opts.Upstream)
	if err != nil {
		g.log.Warn("nest: cannot reach Mother", "upstream", g.opts.Upstream, "err", err)
		return
	}
	if !g.track(up) {
		up.Close()
		return
	}
	defer g.untrack(up)
	pipeNest(br, c, up)
}

// interfaceAddrs is the default LocalAddrs: every interface's addresses.
func interfaceAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range as {
		var ip net.IP
		switch v := a.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		if addr, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, addr.Unmap())
		}
	}
	return out, nil
}

// sayRelease tells Mother the gate's release and protocol on each call
// (she logs them, and a Mother of 0.1.x ignores them).
func sayRelease(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	ctx = metadata.AppendToOutgoingContext(ctx, version.MetaRelease, version.Release, version.MetaProtocol, strconv.Itoa(version.Protocol))
	return invoker(ctx, method, req, reply, cc, opts...)
}
