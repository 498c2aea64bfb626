package mother

import (
	"sync"

	"github.com/mother-chat/mother/pkg/agent"
)

// pendingSync is an fsync in flight that a run waits for before it shows
// anything.
type pendingSync struct {
	done chan struct{}
	err  error
}

func newPendingSync() *pendingSync { return &pendingSync{done: make(chan struct{})} }

// settle records the fsync's outcome and releases the waiters.
func (p *pendingSync) settle(err error) {
	p.err = err
	close(p.done)
}

// wait returns the fsync's outcome once it is known; a nil p is settled.
func (p *pendingSync) wait() error {
	if p == nil {
		return nil
	}
	<-p.done
	return p.err
}

// heldEvents passes a run's events on in order, holding them while the
// run's trigger is not on disk yet: the agent emits without waiting (its
// model request goes out meanwhile) and what it emitted is shown once the
// fsync is done, or dropped if it failed.
type heldEvents struct {
	deliver func(agent.Event)
	mu      sync.Mutex
	open    bool // the fsync is done: emit delivers directly
	failed  bool // the fsync failed: emit drops
	queue   []agent.Event
	drained chan struct{} // closed when the queue is settled
	err     error
}

// holdEvents starts passing events to deliver once pending settles
// (at once when it is nil); cancel is called if it fails.
func holdEvents(pending *pendingSync, deliver func(agent.Event), cancel func()) *heldEvents {
	h := &heldEvents{deliver: deliver, drained: make(chan struct{})}
	if pending == nil {
		h.open = true
		close(h.drained)
		return h
	}
	go func() {
		defer close(h.drained)
		if err := pending.wait(); err != nil {
			h.mu.Lock()
			h.failed, h.err, h.queue = true, err, nil
			h.mu.Unlock()
			cancel()
			return
		}
		for {
			h.mu.Lock()
			q := h.queue
			h.queue = nil
			if len(q) == 0 {
				h.open = true
				h.mu.Unlock()
				return
			}
			h.mu.Unlock()
			for _, ev := range q {
				h.deliver(ev)
			}
		}
	}()
	return h
}

func (h *heldEvents) emit(ev agent.Event) {
	h.mu.Lock()
	switch {
	case h.failed:
		h.mu.Unlock()
	case h.open:
		h.mu.Unlock()
		h.deliver(ev)
	default:
		h.queue = append(h.queue, ev)
		h.mu.Unlock()
	}
}

// release waits until every event held has been shown (or dropped) and
// returns the fsync's error.
func (h *heldEvents) release() error {
	<-h.drained
	return h.err
}
