package nest

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/events"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

type adminService struct {
	pb.UnimplementedAdminServiceServer
	s *Server
}

func (s *Server) chickInfo(in hatchery.Info) *pb.ChickInfo {
	return &pb.ChickInfo{
		Id: in.ID, Channel: in.Channel, Tier: in.Tier, State: wire.ChickStateToProto(string(in.State)), CreatedAt: timestamppb.New(in.CreatedAt),
		TokensUsed: in.Usage.Total(), Host: in.Host, Goal: in.Goal, ContainerId: in.ContainerID, Outcome: in.Outcome,
		Version: s.chickVersion(in.ID),
	}
}

func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func (a *adminService) ListChicks(_ context.Context, req *pb.ListChicksRequest) (*pb.ListChicksResponse, error) {
	out := &pb.ListChicksResponse{}
	for _, in := range a.s.admin.List(req.GetAll()) {
		out.Chicks = append(out.Chicks, a.s.chickInfo(in))
	}
	return out, nil
}

// KillChick cancels, waits the grace, kills, and answers once the chick
// has ended (or the wait runs out, with its state then).
func (a *adminService) KillChick(ctx context.Context, req *pb.KillChickRequest) (*pb.KillChickResponse, error) {
	grace := a.s.killGrace
	if g := wire.DurationFromProto(req.GetGrace()); g > 0 {
		grace = g
	}
	before, _ := a.s.admin.Get(req.GetId())
	st, err := a.s.admin.Stop(req.GetId(), hatchery.ReasonKilled, "killed by the operator", grace)
	if err != nil {
		if errors.Is(err, hatchery.ErrUnknownChick) {
			return nil, status.Errorf(codes.NotFound, "no chick %q", req.GetId())
		}
		return nil, status.Error(codes.Internal, err.Error())
	}
	if st.Final() {
		in, _ := a.s.admin.Get(req.GetId())
		if !before.State.Final() {
			return &pb.KillChickResponse{State: wire.ChickStateToProto(string(st)), Message: in.Outcome + " (it was still queued)"}, nil
		}
		return &pb.KillChickResponse{State: wire.ChickStateToProto(string(st)), Message: "already ended: " + in.Outcome}, nil
	}
	a.s.logger.Info("operator kills chick", "chick", req.GetId(), "grace", grace)
	ended, err := a.s.admin.Ended(req.GetId())
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	waited := make(chan struct{})
	t := a.s.clock.AfterFunc(grace+30*time.Second, func() { close(waited) })
	defer t.Stop()
	select {
	case <-ended:
	case <-waited:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	in, _ := a.s.admin.Get(req.GetId())
	msg := in.Outcome
	if !in.State.Final() {
		msg = "still " + string(in.State) + " after the grace period; it will be killed"
	}
	return &pb.KillChickResponse{State: wire.ChickStateToProto(string(in.State)), Message: msg}, nil
}

type logWriter struct {
	stream pb.AdminService_ChickLogsServer
}

func (w logWriter) Write(p []byte) (int, error) {
	if err := w.stream.Send(&pb.ChickLogsResponse{Data: append([]byte(nil), p...)}); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (a *adminService) ChickLogs(req *pb.ChickLogsRequest, stream pb.AdminService_ChickLogsServer) error {
	err := a.s.admin.Logs(stream.Context(), req.GetId(), req.GetFollow(), logWriter{stream})
	if err != nil {
		if errors.Is(err, hatchery.ErrUnknownChick) {
			return status.Errorf(codes.NotFound, "no chick %q", req.GetId())
		}
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	return nil
}

// ChickEvents streams a chick's stored events, then (follow) each new one
// until the chick ends, and then the chick as it ended.
func (a *adminService) ChickEvents(req *pb.ChickEventsRequest, stream pb.AdminService_ChickEventsServer) error {
	ctx := stream.Context()
	err := a.s.admin.FollowEvents(ctx, req.GetId(), req.GetFollow(), func(se hatchery.StoredEvent) error {
		return stream.Send(&pb.ChickEventsResponse{Kind: &pb.ChickEventsResponse_Event{Event: wire.EventToProto(se.Seq, se.Event)}})
	})
	switch {
	case errors.Is(err, hatchery.ErrUnknownChick):
		return status.Errorf(codes.NotFound, "no chick %q", req.GetId())
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	case err != nil:
		return status.Error(codes.Internal, err.Error())
	}
	in, err := a.s.admin.Get(req.GetId())
	if err != nil || !in.State.Final() {
		return nil // without follow, a chick still alive
	}
	return stream.Send(&pb.ChickEventsResponse{Kind: &pb.ChickEventsResponse_Ended{Ended: a.s.chickInfo(in)}})
}

func (a *adminService) GetStatus(ctx context.Context, _ *pb.GetStatusRequest) (*pb.GetStatusResponse, error) {
	out := &pb.GetStatusResponse{Version: a.s.version, StartedAt: timestamppb.New(a.s.startedAt), ChickImage: a.s.image}
	for _, r := range a.s.adapterReports() {
		out.Adapters = append(out.Adapters, &pb.AdapterStatus{
			Name: r.Name, Type: r.Type, State: wire.AdapterStateToProto(string(r.Status.State)), Reconnects: r.Status.Reconnects,
			Since: timestamp(r.Status.Since), Error: r.Status.LastError,
		})
	}
	for _, in := range a.s.admin.List(false) {
		out.Chicks = append(out.Chicks, a.s.chickInfo(in))
		if in.State == hatchery.StateQueued {
			out.Queued++
		}
	}
	for _, b := range a.s.models.Budgets() {
		out.Budgets = append(out.Budgets, &pb.BudgetStatus{Scope: b.Scope, UsedTokens: b.Used, LimitTokens: b.Limit, UsedMicroUsd: b.UsedMicroUSD, LimitMicroUsd: b.LimitMicroUSD})
	}
	for i, e := range a.s.eventList() {
		if i == 5 {
			break
		}
		if !e.Next.IsZero() {
			out.NextEvents = append(out.NextEvents, eventInfo(e))
		}
	}
	if ps, ok := a.s.models.(ProviderHealth); ok {
		for _, st := range ps.ProviderStatuses() {
			out.Providers = append(out.Providers, &pb.ProviderStatus{Name: st.Name, Down: st.Down, Since: timestamp(st.Since), Until: timestamp(st.Until),
				Failures: int32(st.Failures), LastError: st.LastError, LastOk: timestamp(st.LastOK)})
		}
	}
	for _, h := range a.s.admin.Hosts(ctx) {
		out.Hosts = append(out.Hosts, &pb.HostStatus{
			Name: h.Name, Up: h.Up, Running: int32(h.Running), Capacity: int32(h.Capacity), Error: h.Err,
			Tiers: h.Tiers, EngineVersion: h.EngineVersion, Since: timestamp(h.Since), Incompatible: h.Incompatible,
		})
	}
	return out, nil
}

func eventInfo(e events.Info) *pb.EventInfo {
	out := &pb.EventInfo{File: e.File, Type: wire.EventTypeToProto(string(e.Type)), Channel: e.Channel, Schedule: e.Schedule, Text: e.Text}
	if !e.Next.IsZero() {
		out.NextRun = timestamppb.New(e.Next)
	}
	return out
}

func (a *adminService) ListEvents(context.Context, *pb.ListEventsRequest) (*pb.ListEventsResponse, error) {
	out := &pb.ListEventsResponse{}
	for _, e := range a.s.eventList() {
		out.Events = append(out.Events, eventInfo(e))
	}
	return out, nil
}

// defaultUsageDays is GetUsage's span when the request names none.
const defaultUsageDays = 7

// maxUsageDays bounds GetUsage's span: a ledger file is read per day.
const maxUsageDays = 366

// GetUsage sums the usage ledger of the last days (momctl usage).
func (a *adminService) GetUsage(_ context.Context, req *pb.GetUsageRequest) (*pb.GetUsageResponse, error) {
	ur, ok := a.s.models.(UsageReporter)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "this Mother keeps no usage ledger")
	}
	days := int(req.GetDays())
	switch {
	case days == 0:
		days = defaultUsageDays
	case days < 0 || days > maxUsageDays:
		return nil, status.Errorf(codes.InvalidArgument, "days must be 1 to %d, not %d", maxUsageDays, days)
	}
	u, err := ur.Usage(days, req.GetBy())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	row := func(r broker.UsageRow) *pb.UsageRow {
		return &pb.UsageRow{Key: r.Key, Calls: r.Calls, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CostMicroUsd: r.CostMicroUSD}
	}
	out := &pb.GetUsageResponse{From: u.From, To: u.To, By: u.By, Total: row(u.Total)}
	for _, r := range u.Rows {
		out.Rows = append(out.Rows, row(r))
	}
	return out, nil
}

// ListTools lists the host tool servers, their state and their tools.
func (a *adminService) ListTools(context.Context, *pb.ListToolsRequest) (*pb.ListToolsResponse, error) {
	out := &pb.ListToolsResponse{}
	if a.s.servers == nil {
		return out, nil
	}
	for _, st := range a.s.servers.Status() {
		info := &pb.ToolServerInfo{Name: st.Name, State: wire.ToolServerStateToProto(string(st.State)), Error: st.Error, Transport: wire.ToolTransportToProto(st.Transport),
			Restarts: int32(st.Restarts), Since: timestamppb.New(st.Since)}
		if !st.NextAttempt.IsZero() {
			info.NextAttempt = timestamppb.New(st.NextAttempt)
		}
		for _, t := range st.Tools {
			info.Tools = append(info.Tools, &pb.ToolSpec{Name: t.Qualified, Description: t.Description, ParametersJson: string(t.Schema)})
		}
		out.Servers = append(out.Servers, info)
	}
	return out, nil
}
