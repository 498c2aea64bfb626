package nest

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/hatchery"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// Recaller searches the history of a chick's own channel (Mother). It
// is given the chick, never a channel: a chick cannot name another one.
// ErrRecallNotFound-like refusals are answers (text); err is for
// Mother's own failures.
type Recaller interface {
	ChickRecall(ctx context.Context, chick hatchery.Info, query string, limit int) (string, error)
	ChickRecallRead(ctx context.Context, chick hatchery.Info, id string, before, after int) (string, error)
}

// SetRecall sets who answers Recall (Mother, when she keeps a history
// index).
func (s *Server) SetRecall(r Recaller) {
	s.mu.Lock()
	s.recall = r
	s.mu.Unlock()
}

// maxRecallQuery bounds a query or an id from a chick.
const maxRecallQuery = 2000

// Recall searches the calling chick's channel's history, read-only.
func (c *chickService) Recall(ctx context.Context, req *pb.RecallRequest) (*pb.RecallResponse, error) {
	c.s.mu.Lock()
	r := c.s.recall
	c.s.mu.Unlock()
	if r == nil {
		return nil, status.Error(codes.FailedPrecondition, "Mother keeps no index of the channel's history")
	}
	in, err := c.s.chicks.Get(chickOf(ctx))
	if err != nil {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	if in.State.Final() {
		return nil, status.Error(codes.FailedPrecondition, "the chick has ended")
	}
	if len(req.GetQuery()) > maxRecallQuery || len(req.GetReadId()) > maxRecallQuery {
		return nil, status.Error(codes.InvalidArgument, "query or read_id too long")
	}
	var text string
	switch {
	case req.GetReadId() != "":
		text, err = r.ChickRecallRead(ctx, in, req.GetReadId(), int(req.GetBefore()), int(req.GetAfter()))
	case req.GetQuery() != "":
		text, err = r.ChickRecall(ctx, in, req.GetQuery(), int(req.GetLimit()))
	default:
		return nil, status.Error(codes.InvalidArgument, "query: missing (or read_id to read around a hit)")
	}
	var refused interface{ Refusal() bool }
	if errors.As(err, &refused) && refused.Refusal() {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err != nil {
		c.s.logger.Error("chick recall failed", "chick", in.ID, "err", err)
		return nil, status.Error(codes.Internal, "the history cannot be searched right now")
	}
	c.s.logger.Info("chick searched its channel's history", "chick", in.ID, "channel", in.Channel, "read", req.GetReadId() != "")
	return &pb.RecallResponse{Result: text}, nil
}
