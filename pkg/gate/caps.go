package gate

import (
	"sync"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
)

// caps holds each chick's byte allowance: how many more bytes it may send
// out, shared by all its connections. Mother's figure (Authorize's
// bytes_remaining) lags, since it counts only connections that have
// ended, so the gate keeps the lowest figure it has seen and spends it as
// bytes go out.
type caps struct {
	clock clock.Clock
	mu    sync.Mutex
	m     map[string]*chickCap
	swept time.Time
}

type chickCap struct {
	limited   bool
	remaining int64
	active    int
	last      time.Time
}

// idleFor is how long a chick without open connections is remembered.
const idleFor = time.Hour

func newCaps(c clock.Clock) *caps { return &caps{clock: c, m: map[string]*chickCap{}} }

// open registers a connection of chick id with Mother's latest figure
// (0: no cap; negative: nothing left). (How many a chick may open is the
// limiter's.)
func (c *caps) open(id string, fromMother int64) *chickCap {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if now.Sub(c.swept) > time.Minute {
		c.swept = now
		for k, v := range c.m {
			if v.active == 0 && now.Sub(v.last) > idleFor {
				delete(c.m, k)
			}
		}
	}
	cc := c.m[id]
	if cc == nil {
		cc = &chickCap{}
		c.m[id] = cc
	}
	cc.active++
	cc.last = now
	switch {
	case fromMother == 0:
		cc.limited, cc.remaining = false, 0
	case fromMother < 0:
		cc.limited, cc.remaining = true, 0
	case !cc.limited || fromMother < cc.remaining:
		cc.limited, cc.remaining = true, fromMother
	}
	return cc
}

// close ends a connection opened with open.
func (c *caps) close(cc *chickCap) {
	c.mu.Lock()
	cc.active--
	cc.last = c.clock.Now()
	c.mu.Unlock()
}

// spent reports whether the chick may send nothing more.
func (c *caps) spent(cc *chickCap) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cc.limited && cc.remaining <= 0
}

// taker returns the takeFunc of cc: n > 0 asks to send n bytes and
// returns how many may go; n < 0 gives -n back.
func (c *caps) taker(cc *chickCap) takeFunc {
	return func(n int64) int64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !cc.limited {
			return n
		}
		if n < 0 {
			cc.remaining -= n
			return 0
		}
		k := min(n, cc.remaining)
		cc.remaining -= k
		return k
	}
}
