package nest

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

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
