package nest

import (
	"cmp"
	"context"
	"errors"
	"io"
	"io/fs"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hosttools"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/version"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

type chickService struct {
	pb.UnimplementedChickServiceServer
	s *Server
}

func (c *chickService) Join(ctx context.Context, req *pb.JoinRequest) (*pb.JoinResponse, error) {
	id := chickOf(ctx)
	a, err := c.s.chicks.Assignment(id)
	if err != nil {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	// A chick of a release this Mother does not work with is refused
	// here, with the sentence that says why, and ends with it as its
	// reason (not as hung or crashed when it exits).
	if why := c.s.incompatible(id, req.GetRelease()); why != "" {
		c.s.logger.Warn("chick refused: its release does not work with this Mother", "chick", id, "version", req.GetVersion(),
			"release", req.GetRelease(), "protocol", version.ProtocolOf(req.GetProtocol()), "why", why)
		_, _ = c.s.chicks.Stop(id, hatchery.ReasonIncompatible, why, c.s.killGrace)
		return nil, status.Error(codes.FailedPrecondition, why)
	}
	c.s.logger.Info("chick joined", "chick", id, "version", req.GetVersion(), "release", cmp.Or(req.GetRelease(), "0.1.x"),
		"protocol", version.ProtocolOf(req.GetProtocol()))
	c.s.rememberVersion(id, req.GetVersion())
	var hostTools []*pb.ToolSpec
	if c.s.hostTools != nil {
		for _, t := range c.s.hostTools.Specs() {
			hostTools = append(hostTools, wire.ToolSpecToProto(t))
		}
	}
	return &pb.JoinResponse{
		HostTools: hostTools, Release: c.s.release, Protocol: version.Protocol,
		ChickId: a.ChickID, Channel: a.Channel, Goal: a.Goal, Tier: a.Tier, SystemPrompt: a.System,
		Limits: &pb.ChickLimits{
			MaxTurns: int32(a.MaxTurns), WallTimeout: wire.DurationToProto(a.WallTimeout),
			TokenBudget: a.TokenBudget, HeartbeatInterval: wire.DurationToProto(a.HeartbeatInterval),
			MaxImagesPerCall: int32(c.s.calls.limits.MaxImages), MaxImageBytesPerCall: c.s.calls.limits.MaxImageBytes,
		},
	}, nil
}

// incompatible is why a chick that says release rel may not run with
// this Mother; "" when it may.
func (s *Server) incompatible(id, rel string) string {
	what := "this chick"
	if info, err := s.chicks.Get(id); err == nil && info.Host != "" {
		what = "the chick on host " + info.Host
	}
	return version.Chick(s.release, rel, what)
}

func (c *chickService) Generate(req *pb.GenerateRequest, stream pb.ChickService_GenerateServer) error {
	id := chickOf(stream.Context())
	info, err := c.s.chicks.Get(id)
	if err != nil {
		return status.Error(codes.NotFound, err.Error())
	}
	c.s.chicks.Touch(id)
	if err := c.s.calls.limits.checkImages(req); err != nil {
		c.s.logger.Warn("model call refused", "chick", id, "err", err)
		return err
	}
	caller := broker.Caller{ChickID: id, Channel: info.Channel, Tier: info.Tier, User: info.Requester()}
	var (
		sendErr error
		thought bool
	)
	resp, err := c.s.models.Generate(stream.Context(), caller, wire.RequestFromProto(req), func(d model.Delta) {
		switch {
		case sendErr != nil:
		case d.Thinking != "":
			// The thoughts stay here: the chick hears only that its model
			// is thinking, once.
			if !thought {
				thought = true
				sendErr = stream.Send(&pb.GenerateResponse{Kind: &pb.GenerateResponse_Thinking{Thinking: &pb.GenerateThinking{}}})
			}
		case d.Text != "":
			sendErr = stream.Send(&pb.GenerateResponse{Kind: &pb.GenerateResponse_TextDelta{TextDelta: d.Text}})
		}
	})
	c.s.chicks.Touch(id)
	if err != nil {
		if errors.Is(err, model.ErrBudgetExhausted) {
			// The chick should stop by itself on this answer; make sure.
			_, _ = c.s.chicks.Stop(id, hatchery.ReasonBudget, err.Error(), c.s.killGrace)
		}
		return wire.ModelErrorToStatus(err)
	}
	if sendErr != nil {
		return sendErr
	}
	return stream.Send(&pb.GenerateResponse{Kind: &pb.GenerateResponse_Done{Done: wire.DoneToProto(resp)}})
}

// FetchFiles streams the chick's files (hatchery.Files.List): one entry
// message each, then a file's content in data messages of at most
// wire.FetchChunkBytes, then done. Each file's size is taken from the file
// opened (the listing may be older), and exactly that many bytes are sent.
func (c *chickService) FetchFiles(_ *pb.FetchFilesRequest, stream pb.ChickService_FetchFilesServer) error {
	id := chickOf(stream.Context())
	files, err := c.s.chicks.ChickFiles(id)
	if err != nil {
		return status.Error(codes.NotFound, err.Error())
	}
	entries, err := files.List()
	if errors.Is(err, hatchery.ErrTooLarge) {
		c.s.logger.Warn("chick files refused", "chick", id, "err", err)
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	if err != nil {
		c.s.logger.Warn("chick files not listed", "chick", id, "err", err)
		return status.Error(codes.Internal, err.Error())
	}
	var nfiles, total int64
	buf := make([]byte, wire.FetchChunkBytes)
	for _, e := range entries {
		if e.Dir {
			if err := stream.Send(&pb.FetchFilesResponse{Kind: &pb.FetchFilesResponse_Entry{Entry: wire.WorkspaceEntryToProto(e.Path, true, 0, false, e.ModTime)}}); err != nil {
				return err
			}
			continue
		}
		n, err := c.sendFile(stream, e, buf, wire.MaxFetchBytes-total)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since it was listed
		}
		if err != nil {
			return err
		}
		nfiles++
		total += n
		c.s.chicks.Touch(id)
	}
	c.s.logger.Info("chick files sent", "chick", id, "files", nfiles, "bytes", total)
	return stream.Send(&pb.FetchFilesResponse{Kind: &pb.FetchFilesResponse_Done{Done: &pb.FetchFilesDone{Files: nfiles, Bytes: total}}})
}

// sendFile sends one file's entry and content, at most limit bytes.
func (c *chickService) sendFile(stream pb.ChickService_FetchFilesServer, e hatchery.FileEntry, buf []byte, limit int64) (int64, error) {
	f, err := e.Open()
	if errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	if err != nil {
		return 0, status.Errorf(codes.Internal, "send %s: %v", e.Path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, status.Errorf(codes.Internal, "send %s: %v", e.Path, err)
	}
	size := st.Size()
	if size > limit {
		return 0, status.Error(codes.ResourceExhausted, hatchery.ErrTooLarge.Error())
	}
	if err := stream.Send(&pb.FetchFilesResponse{Kind: &pb.FetchFilesResponse_Entry{Entry: wire.WorkspaceEntryToProto(e.Path, false, size, st.Mode()&0o100 != 0, st.ModTime())}}); err != nil {
		return 0, err
	}
	for left := size; left > 0; {
		n, err := io.ReadFull(f, buf[:min(left, int64(len(buf)))])
		if err != nil {
			// Shorter than it was a moment ago: the chick would get a
			// torn file.
			return 0, status.Errorf(codes.Aborted, "send %s: it changed while being sent (%v)", e.Path, err)
		}
		if err := stream.Send(&pb.FetchFilesResponse{Kind: &pb.FetchFilesResponse_Data{Data: buf[:n]}}); err != nil {
			return 0, err
		}
		left -= int64(n)
	}
	return size, nil
}

// uploadReader reads the data messages of an upload stream.
type uploadReader struct {
	stream pb.ChickService_UploadFileServer
	buf    []byte
}

func (u *uploadReader) Read(p []byte) (int, error) {
	for len(u.buf) == 0 {
		m, err := u.stream.Recv()
		if err != nil {
			return 0, err
		}
		d, ok := m.GetKind().(*pb.UploadFileRequest_Data)
		if !ok {
			return 0, errors.New("upload: a second header")
		}
		u.buf = d.Data
	}
	n := copy(p, u.buf)
	u.buf = u.buf[n:]
	return n, nil
}

func (c *chickService) UploadFile(stream pb.ChickService_UploadFileServer) error {
	id := chickOf(stream.Context())
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	h := first.GetHeader()
	if h == nil {
		return status.Error(codes.InvalidArgument, "an upload starts with its header")
	}
	f, err := c.s.chicks.StoreFile(id, h.GetPath(), h.GetAttach(), h.GetTitle(), &uploadReader{stream: stream})
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	c.s.logger.Info("chick file stored", "chick", id, "path", f.RelPath, "bytes", f.Size, "attach", f.Attach)
	return stream.SendAndClose(&pb.UploadFileResponse{StoredPath: f.RelPath})
}

// InvokeHostTool runs a host tool for the calling chick, if
// chicks.hostTools allows it: a forbidden tool is PermissionDenied (the
// tool's server never hears of it); the tool's own failures are results
// with is_error.
func (c *chickService) InvokeHostTool(ctx context.Context, req *pb.InvokeHostToolRequest) (*pb.InvokeHostToolResponse, error) {
	id := chickOf(ctx)
	if c.s.hostTools == nil {
		return nil, status.Errorf(codes.PermissionDenied, "host tool %q is not available to chicks: Mother offers them none", req.GetTool())
	}
	a, err := c.s.chicks.Assignment(id)
	if err != nil {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	if g := c.s.hostToolGate(); g != nil {
		in, err := c.s.chicks.Get(id)
		if err != nil {
			return nil, status.Error(codes.NotFound, err.Error())
		}
		if sentence, ok := g.MayChickHostTool(ctx, in, req.GetTool()); !ok {
			c.s.logger.Warn("chick refused a host tool by roles", "chick", id, "tool", req.GetTool())
			return nil, status.Error(codes.PermissionDenied, sentence)
		}
	}
	text, isErr, err := c.s.hostTools.InvokeForChick(ctx, a.Channel, req.GetTool(), req.GetArgsJson())
	switch {
	case errors.Is(err, hosttools.ErrNotAllowed):
		c.s.logger.Warn("chick refused a host tool", "chick", id, "tool", req.GetTool())
		return nil, status.Error(codes.PermissionDenied, err.Error())
	case err != nil:
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &pb.InvokeHostToolResponse{Result: text, IsError: isErr}, nil
}
