package chick

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

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
