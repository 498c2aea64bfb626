package chick

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// The bounds of a model call's images when Mother does not say them
// (config's chicks.calls defaults).
const (
	defaultImagesPerCall     = 4
	defaultImageBytesPerCall = 2 << 20
)

// brokerProvider is the chick's model: every call goes to Mother.
type brokerProvider struct{ r *runner }

var _ model.Provider = (*brokerProvider)(nil)

func (p *brokerProvider) Chat(ctx context.Context, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	var resp model.Response
	err := p.r.retry(ctx, "generate", func(ctx context.Context) error {
		stream, err := p.r.client.Generate(ctx, wire.RequestToProto(req))
		if err != nil {
			return err
		}
		for {
			m, err := stream.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					return status.Error(codes.Unavailable, "generate stream ended without an answer")
				}
				return err
			}
			switch k := m.GetKind().(type) {
			case *pb.GenerateResponse_TextDelta:
				if onDelta != nil {
					onDelta(model.Delta{Text: k.TextDelta})
				}
			case *pb.GenerateResponse_Thinking:
				// Mother keeps the thoughts; only that there are some
				// comes here.
				if onDelta != nil {
					onDelta(model.Delta{Thinking: "…"})
				}
			case *pb.GenerateResponse_Done:
				resp = wire.DoneFromProto(k.Done)
				return nil
			}
		}
	})
	if err != nil {
		if mapped, ok := wire.ModelErrorFromStatus(err); ok {
			return model.Response{}, mapped
		}
		if errors.Is(err, ErrRejected) || ctx.Err() != nil {
			return model.Response{}, err
		}
		return model.Response{}, model.Wrap(model.ErrUnreachable, "Mother's broker: %v", err)
	}
	return resp, nil
}
