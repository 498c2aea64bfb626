// Package feed holds what the Discord and Slack adapters share for the
// inbound side: a queue that hands platform events to Mother's inbox in
// arrival order from one goroutine (so a slow attachment download never
// stalls the platform connection), a bounded set of already delivered
// message ids (gateway replays and backfill overlap), reconnect backoff,
// the connection state reported to momctl and the metrics, the attachment
// intake with its notes to the user (Intake), the backfill cursor
// (Cursor), and the delivery again of a message Mother could not store
// (Redeliver, WaitRetry).
package feed

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
)

// Queue runs pushed jobs one at a time, in push order. It never blocks the
// pusher: the queue grows instead.
type Queue struct {
	mu   sync.Mutex
	jobs []func(context.Context)
	wake chan struct{}
}

// NewQueue returns an empty queue; call Run to process it.
func NewQueue() *Queue { return &Queue{wake: make(chan struct{}, 1)} }

// Push appends a job.
func (q *Queue) Push(job func(context.Context)) {
	q.mu.Lock()
	q.jobs = append(q.jobs, job)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Len is the number of jobs waiting.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.jobs)
}

// Run processes jobs until ctx ends; jobs still queued then are dropped.
func (q *Queue) Run(ctx context.Context) {
	for {
		q.mu.Lock()
		var job func(context.Context)
		if len(q.jobs) > 0 {
			job = q.jobs[0]
			q.jobs[0] = nil
			q.jobs = q.jobs[1:]
		}
		q.mu.Unlock()
		if job != nil {
			if ctx.Err() != nil {
				return
			}
			job(ctx)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
		}
	}
}

// Seen is a bounded set of ids: it remembers the most recent Max ids.
type Seen struct {
	mu    sync.Mutex
	max   int
	set   map[string]struct{}
	order []string
}

// NewSeen remembers up to max ids (default 10000).
func NewSeen(max int) *Seen {
	if max <= 0 {
		max = 10000
	}
	return &Seen{max: max, set: make(map[string]struct{}, max)}
}

// Add records id and reports whether it is new.
func (s *Seen) Add(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.set[id]; ok {
		return false
	}
	s.set[id] = struct{}{}
	s.order = append(s.order, id)
	if len(s.order) > s.max {
		delete(s.set, s.order[0])
		s.order = s.order[1:]
	}
	return true
}

// Forget removes id, so that it counts as new again (a message Mother
// could not store, to be delivered again).
func (s *Seen) Forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.set[id]; !ok {
		return
	}
	delete(s.set, id)
	for i, o := range s.order {
		if o == id {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
}

// Backoff yields growing waits between reconnect attempts: Min, doubling
// up to Max, each with up to 20% random jitter added.
type Backoff struct {
	Min, Max time.Duration
	n        int
}

// Next returns the wait before the next attempt.
func (b *Backoff) Next() time.Duration {
	d := b.Min
	if d <= 0 {
		d = time.Second
	}
	for i := 0; i < b.n && d < b.Max; i++ {
		d *= 2
	}
	if b.Max > 0 && d > b.Max {
		d = b.Max
	}
	b.n++
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}

// Attempts is how many waits were handed out since the last Reset.
func (b *Backoff) Attempts() int { return b.n }

// Reset starts over at Min.
func (b *Backoff) Reset() { b.n = 0 }

// Conn tracks an adapter's connection state for chat.StatusReporter. The
// zero value is down; it is safe for concurrent use.
type Conn struct {
	mu         sync.Mutex
	state      chat.ConnState
	since      time.Time
	reconnects int64
	lastErr    string
	now        func() time.Time
}

func (c *Conn) setLocked(s chat.ConnState) {
	if c.state != s {
		c.state = s
		if c.now == nil {
			c.now = clock.Real{}.Now
		}
		c.since = c.now()
	}
}

// Connected records a (first) connection.
func (c *Conn) Connected() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(chat.ConnConnected)
}

// Lost records a lost connection the adapter is re-establishing; err may
// be nil.
func (c *Conn) Lost(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.lastErr = err.Error()
	}
	c.setLocked(chat.ConnReconnecting)
}

// Reconnected records a connection re-established after a loss.
func (c *Conn) Reconnected() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reconnects++
	c.setLocked(chat.ConnConnected)
}

// Down records that the adapter is not connected and not trying; err may
// be nil.
func (c *Conn) Down(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.lastErr = err.Error()
	}
	c.setLocked(chat.ConnDown)
}

// Status implements chat.StatusReporter.
func (c *Conn) Status() chat.AdapterStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.state
	if st == "" {
		st = chat.ConnDown
	}
	return chat.AdapterStatus{State: st, Since: c.since, Reconnects: c.reconnects, LastError: c.lastErr}
}
