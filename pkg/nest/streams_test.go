package nest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/egress"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/nest"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// heldDesk holds each RequestAccess until released, counting how many
// it holds at once.
type heldDesk struct {
	mu       sync.Mutex
	cur, max int
	entered  chan struct{}
	release  chan struct{}
}

func (d *heldDesk) RequestAccess(ctx context.Context, _ hatchery.Info, _, _ string) (egress.Grant, error) {
	d.mu.Lock()
	d.cur++
	d.max = max(d.max, d.cur)
	d.mu.Unlock()
	d.entered <- struct{}{}
	select {
	case <-d.release:
	case <-ctx.Done():
	}
	d.mu.Lock()
	d.cur--
	d.mu.Unlock()
	return egress.Grant{Granted: true}, nil
}

// TestStreamsPerConnectionBounded: one connection (a chick's) has at most
// MaxStreamsPerConn calls in flight at the nest; the calls past it wait
// and go through as others end.
func TestStreamsPerConnectionBounded(t *testing.T) {
	t.Parallel()
	g := newGateFixture(t)
	id, tok := g.spawn(t)
	// More than gRPC clients allow themselves by default (100), so
	// that the bound seen is the server's.
	const extra = 48
	d := &heldDesk{entered: make(chan struct{}, nest.MaxStreamsPerConn+extra), release: make(chan struct{})}
	g.srv.SetAccess(d)
	ctx := wire.Credentials(t.Context(), id, tok)
	var wg sync.WaitGroup
	errs := make(chan error, nest.MaxStreamsPerConn+extra)
	call := func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := g.client.RequestAccess(ctx, &pb.RequestAccessRequest{Destination: "pypi.org:443", Reason: "x"})
			errs <- err
		}()
	}
	for range nest.MaxStreamsPerConn {
		call()
	}
	for range nest.MaxStreamsPerConn {
		<-d.entered
	}
	for range extra {
		call()
	}
	// None of those gets in while the first hold their streams. (A
	// second is long enough for one to come in were there no bound; with
	// the bound none ever does, so this cannot fail wrongly.)
	select {
	case <-d.entered:
		close(d.release)
		wg.Wait()
		t.Fatalf("a call past %d came in on the same connection", nest.MaxStreamsPerConn)
	case <-time.After(time.Second):
	}
	// One ends, one more comes in, until all have been in.
	for range extra {
		d.release <- struct{}{}
		<-d.entered
	}
	close(d.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a call: %v", err)
		}
	}
	if d.max != nest.MaxStreamsPerConn {
		t.Errorf("%d calls in flight at once on one connection, want at most %d", d.max, nest.MaxStreamsPerConn)
	}
}
