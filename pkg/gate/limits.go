package gate

import (
	"container/list"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// What one chick may hold of the gate (docs/isolation.md, "Limits"). A
// connection is first pending: it has not named its chick. The pending
// pool is small and shared: when it is full, the oldest pending
// connection is closed to make room, so a chick that opens connections
// and says nothing (a slow loris) only ever pushes out its own, while a
// real chick's forwarder, which writes its preface at once, is in the
// pool for a moment. A named connection with a good key is then counted
// against its chick's limit on that socket and against the gate's total;
// over either it is closed and reported.

// Defaults of the limits (config chicks.gate has the same).
const (
	DefaultNestConnsPerChick  = 4
	DefaultProxyConnsPerChick = 32
	DefaultPending            = 64
	DefaultConns              = 512
	DefaultPrefaceTimeout     = 5 * time.Second
)

// reportEvery is how often one chick's refusals on one socket are
// reported to Mother and logged: the first at once, then at most one a
// window, with the count of those in between.
const reportEvery = time.Minute

// socket names which of the gate's sockets a connection came in on.
type socket uint8

const (
	sockNest socket = iota
	sockProxy
)

func (s socket) String() string {
	if s == sockNest {
		return "nest.sock"
	}
	return "proxy.sock"
}

// limiter holds the counts and the pending pool.
type limiter struct {
	perChick [2]int // by socket
	total    int
	pending  int

	mu      sync.Mutex
	open    int
	chicks  map[chickSocket]int
	waiting *list.List // of *pendingConn, oldest first
}

type chickSocket struct {
	id   string
	sock socket
}

// pendingConn is a connection in the pending pool.
type pendingConn struct {
	c    net.Conn
	elem *list.Element
}

func newLimiter(o Options) *limiter {
	return &limiter{
		perChick: [2]int{o.MaxNestConnsPerChick, o.MaxProxyConnsPerChick},
		total:    o.MaxConns, pending: o.MaxPending,
		chicks: map[chickSocket]int{}, waiting: list.New(),
	}
}

// enter puts a new connection in the pending pool, closing the oldest
// pending one if the pool is full.
func (l *limiter) enter(c net.Conn) *pendingConn {
	p := &pendingConn{c: c}
	var drop net.Conn
	l.mu.Lock()
	if l.waiting.Len() >= l.pending {
		old := l.waiting.Remove(l.waiting.Front()).(*pendingConn)
		old.elem = nil
		drop = old.c
	}
	p.elem = l.waiting.PushBack(p)
	l.mu.Unlock()
	if drop != nil {
		drop.Close()
	}
	return p
}

// leave takes p out of the pending pool; false if it was pushed out (and
// closed) meanwhile.
func (l *limiter) leave(p *pendingConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.elem == nil {
		return false
	}
	l.waiting.Remove(p.elem)
	p.elem = nil
	return true
}

// acquire counts a named connection of chick id on sock, or says why it
// may not open: the chick's limit or the gate's.
func (l *limiter) acquire(id string, sock socket) (release func(), refused string) {
	k := chickSocket{id, sock}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.chicks[k] >= l.perChick[sock]:
		return nil, fmt.Sprintf("connection limit, %d open", l.perChick[sock])
	case l.open >= l.total:
		return nil, fmt.Sprintf("the gate is full, %d connections open", l.total)
	}
	l.chicks[k]++
	l.open++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			if l.chicks[k]--; l.chicks[k] <= 0 {
				delete(l.chicks, k)
			}
			l.open--
			l.mu.Unlock()
		})
	}, ""
}

// counts are the open and pending connections (tests, logs).
func (l *limiter) counts() (open, pending int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, l.waiting.Len()
}

// refusals rate-limits what the gate says about refused connections: to
// Mother per chick and socket, and in its log about connections without
// a good preface (which name no chick it could trust).
type refusals struct {
	clock clock.Clock
	mu    sync.Mutex
	last  map[chickSocket]*refusal
	swept time.Time
	// unnamed counts connections closed without a good preface since
	// unnamedAt, when that was last logged.
	unnamed   int
	unnamedAt time.Time
}

type refusal struct {
	at     time.Time
	missed int
}

func newRefusals(c clock.Clock) *refusals {
	return &refusals{clock: c, last: map[chickSocket]*refusal{}}
}

// note counts a refusal of chick id on sock and says whether to report
// it now, and how many went unreported before it.
func (r *refusals) note(id string, sock socket) (now bool, missed int) {
	k := chickSocket{id, sock}
	t := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.Sub(r.swept) > reportEvery {
		r.swept = t
		for k, v := range r.last {
			if t.Sub(v.at) > reportEvery {
				delete(r.last, k)
			}
		}
	}
	v := r.last[k]
	if v != nil && t.Sub(v.at) < reportEvery {
		v.missed++
		return false, 0
	}
	if v == nil {
		v = &refusal{}
		r.last[k] = v
	}
	missed, v.at, v.missed = v.missed, t, 0
	return true, missed
}

// unnamedNow counts a connection dropped without a good preface and says
// whether to log now (once a window), with the count since the last line.
func (r *refusals) unnamedNow() (now bool, count int) {
	t := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unnamed++
	if !r.unnamedAt.IsZero() && t.Sub(r.unnamedAt) < reportEvery/6 {
		return false, 0
	}
	count, r.unnamed, r.unnamedAt = r.unnamed, 0, t
	return true, count
}

// refused tells Mother and the log that chick id's connection on sock was
// closed for reason: the first at once, then once a reportEvery.
func (g *Gate) refused(id, key string, sock socket, reason string) {
	now, missed := g.refusals.note(id, sock)
	if !now {
		return
	}
	open, pending := g.lim.counts()
	g.log.Warn("connection refused", "chick", id, "socket", sock.String(), "reason", reason, "refused_since_last_report", missed, "open", open, "pending", pending)
	g.report(&pb.ReportRequest{ChickId: id, Key: key, Host: sock.String(), Outcome: pb.EgressOutcome_EGRESS_OUTCOME_REFUSED, Reason: reason})
}

// dropped logs, once in a while, the connections closed without a good
// preface.
func (g *Gate) dropped(sock socket, why string) {
	if now, n := g.refusals.unnamedNow(); now {
		g.log.Info("connections closed without a good preface", "socket", sock.String(), "count", n, "last_reason", why)
	}
}
