package nest

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

type ctxKey struct{}

// chickOf returns the authenticated chick id of a call.
func chickOf(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

func (s *Server) authenticate(ctx context.Context) (context.Context, error) {
	id, tok := wire.FromIncoming(ctx)
	if id == "" || tok == "" {
		return nil, status.Error(codes.Unauthenticated, "missing chick id or token")
	}
	if err := s.chicks.Authenticate(id, tok); err != nil {
		s.logger.Warn("chick call refused", "chick", id, "err", err)
		if errors.Is(err, hatchery.ErrChickEnded) {
			return nil, status.Error(codes.Unauthenticated, "token expired: the chick has ended")
		}
		return nil, status.Error(codes.Unauthenticated, "token not valid for this chick")
	}
	return context.WithValue(ctx, ctxKey{}, id), nil
}

func (s *Server) authUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	auth := s.authenticate
	if strings.HasPrefix(info.FullMethod, gateMethodPrefix) {
		auth = s.authenticateGate
	}
	ctx, err := auth(ctx)
	if err != nil {
		return nil, err
	}
	return h(ctx, req)
}

type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (a authedStream) Context() context.Context { return a.ctx }

func (s *Server) authStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, err := s.authenticate(ss.Context())
	if err != nil {
		return err
	}
	if info.FullMethod == pb.ChickService_Generate_FullMethodName {
		// Counted and given room before a byte of the call is read.
		return s.admitGenerate(srv, authedStream{ServerStream: ss, ctx: ctx}, h)
	}
	return h(srv, authedStream{ServerStream: ss, ctx: ctx})
}
