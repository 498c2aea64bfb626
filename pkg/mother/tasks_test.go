package mother

import (
	"context"
	"errors"
	"sync"
)

// ErrCancelledByStop is the cause of a task's context when "stop all"
// cancelled it.
var ErrCancelledByStop = errors.New("cancelled by stop all")

// Tasks (a test helper: Mother cancels chicks through the hatchery) tracks background work started on behalf of a channel and a user
// (chicks, or anything else that must outlive Mother's own run), so that
// "stop all" can cancel it. It implements ChickCanceller. The zero value
// is ready to use.
type Tasks struct {
	mu    sync.Mutex
	seq   uint64
	tasks map[uint64]*task
	wg    sync.WaitGroup
}

var _ ChickCanceller = (*Tasks)(nil)

type task struct {
	channel, user string
	cancel        context.CancelCauseFunc
}

// Go runs fn in a goroutine with a context derived from parent (not from
// a run's context: stopping the run must not end it) that CancelChicks
// cancels. channel is qualified; user is who started it.
func (t *Tasks) Go(parent context.Context, channel, user string, fn func(ctx context.Context)) {
	ctx, cancel := context.WithCancelCause(parent)
	t.mu.Lock()
	if t.tasks == nil {
		t.tasks = map[uint64]*task{}
	}
	t.seq++
	id := t.seq
	t.tasks[id] = &task{channel: channel, user: user, cancel: cancel}
	t.wg.Add(1)
	t.mu.Unlock()
	go func() {
		defer t.wg.Done()
		defer func() {
			t.mu.Lock()
			delete(t.tasks, id)
			t.mu.Unlock()
			cancel(nil)
		}()
		fn(ctx)
	}()
}

// Running counts a channel's tasks (of one user, if user is not empty).
func (t *Tasks) Running(channel, user string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, k := range t.tasks {
		if k.channel == channel && (user == "" || k.user == user) {
			n++
		}
	}
	return n
}

// CancelChicks implements ChickCanceller.
func (t *Tasks) CancelChicks(_ context.Context, channel, startedBy string) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for id, k := range t.tasks {
		if k.channel == channel && (startedBy == "" || k.user == startedBy) {
			k.cancel(ErrCancelledByStop)
			delete(t.tasks, id)
			n++
		}
	}
	return n, nil
}

// Wait blocks until every task has returned.
func (t *Tasks) Wait() { t.wg.Wait() }
