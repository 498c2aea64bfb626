// Package wire converts between the protobuf messages of proto/mother/v1
// and Mother's domain types (agent events, model requests and answers), in
// one place, and maps model errors to gRPC status codes and back. Both
// sides of the nest (Mother and the chick) use it; it links no Docker and
// no chat platform.
package wire

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/model"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// Metadata keys every ChickService call carries.
const (
	// MDAuthorization holds "Bearer <token>".
	MDAuthorization = "authorization"
	// MDChickID names the chick the token is claimed for.
	MDChickID = "x-mother-chick-id"
)

// OutputsDir is the workspace folder (relative to the chick's workspace)
// whose files a chick sends back to Mother as outputs at the end.
const OutputsDir = "outputs"

// Credentials returns ctx carrying a chick's id and token.
func Credentials(ctx context.Context, chickID, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, MDAuthorization, "Bearer "+token, MDChickID, chickID)
}

// FromIncoming reads the chick id and token of a call.
func FromIncoming(ctx context.Context) (chickID, token string) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(MDChickID); len(v) > 0 {
		chickID = v[0]
	}
	if v := md.Get(MDAuthorization); len(v) > 0 {
		token, _ = strings.CutPrefix(v[0], "Bearer ")
	}
	return chickID, token
}

// EventToProto converts an agent event with its sequence number. Each kind
// carries its own payload; fields an event of that kind does not have are
// not sent. An event without a known type travels without a payload.
func EventToProto(seq uint64, ev agent.Event) *pb.AgentEvent {
	out := &pb.AgentEvent{Seq: seq}
	if !ev.Time.IsZero() {
		out.Time = timestamppb.New(ev.Time)
	}
	switch ev.Type {
	case agent.EventMessageStart:
		out.Kind = &pb.AgentEvent_MessageStart{MessageStart: &pb.MessageStart{}}
	case agent.EventMessageDelta:
		out.Kind = &pb.AgentEvent_MessageDelta{MessageDelta: &pb.MessageDelta{Text: ev.Text}}
	case agent.EventThinking:
		out.Kind = &pb.AgentEvent_MessageThinking{MessageThinking: &pb.MessageThinking{}}
	case agent.EventMessageEnd:
		out.Kind = &pb.AgentEvent_MessageEnd{MessageEnd: &pb.MessageEnd{Text: ev.Text, Usage: usageToProto(ev.Usage)}}
	case agent.EventToolStart:
		out.Kind = &pb.AgentEvent_ToolStart{ToolStart: &pb.ToolStart{Call: toolCallToProto(ev)}}
	case agent.EventToolEnd:
		out.Kind = &pb.AgentEvent_ToolEnd{ToolEnd: &pb.ToolEnd{
			Call: toolCallToProto(ev), Result: ev.Result, IsError: ev.IsError, Duration: DurationToProto(ev.Duration),
		}}
	case agent.EventCompactionStart:
		out.Kind = &pb.AgentEvent_CompactionStart{CompactionStart: &pb.CompactionStart{Reason: ev.Text}}
	case agent.EventCompactionEnd:
		out.Kind = &pb.AgentEvent_CompactionEnd{CompactionEnd: &pb.CompactionEnd{
			Summary: ev.Text, Result: ev.Result, IsError: ev.IsError, Error: ev.Err,
		}}
	case agent.EventRunEnd:
		out.Kind = &pb.AgentEvent_RunEnd{RunEnd: &pb.RunEnd{
			StopReason: StopReasonToProto(ev.StopReason), Usage: usageToProto(ev.Usage), Error: ev.Err,
		}}
	case agent.EventRetry:
		out.Kind = &pb.AgentEvent_Retry{Retry: &pb.Retry{
			Attempt: int32(ev.Attempt), Error: ev.Err, Wait: DurationToProto(ev.Duration),
		}}
	}
	return out
}

func toolCallToProto(ev agent.Event) *pb.ToolCall {
	return &pb.ToolCall{Id: ev.ToolCallID, Name: ev.ToolName, Label: ev.Label, ArgsJson: string(ev.Args)}
}

// EventFromProto converts back. It comes from a chick, so nothing in it
// is trusted: an unknown payload becomes an event without a type,
// arguments that are not JSON are dropped, and a time outside years
// 1-9999 (which could not be stored) and a duration that is not valid or
// too long for time.Duration are left out.
func EventFromProto(p *pb.AgentEvent) agent.Event {
	var ev agent.Event
	if t := p.GetTime(); t != nil && t.CheckValid() == nil {
		ev.Time = t.AsTime()
	}
	switch k := p.GetKind().(type) {
	case *pb.AgentEvent_MessageStart:
		ev.Type = agent.EventMessageStart
	case *pb.AgentEvent_MessageDelta:
		ev.Type, ev.Text = agent.EventMessageDelta, k.MessageDelta.GetText()
	case *pb.AgentEvent_MessageThinking:
		ev.Type = agent.EventThinking
	case *pb.AgentEvent_MessageEnd:
		ev.Type, ev.Text, ev.Usage = agent.EventMessageEnd, k.MessageEnd.GetText(), usageFromProto(k.MessageEnd.GetUsage())
	case *pb.AgentEvent_ToolStart:
		ev.Type = agent.EventToolStart
		toolCallFromProto(&ev, k.ToolStart.GetCall())
	case *pb.AgentEvent_ToolEnd:
		e := k.ToolEnd
		ev.Type, ev.Result, ev.IsError, ev.Duration = agent.EventToolEnd, e.GetResult(), e.GetIsError(), DurationFromProto(e.GetDuration())
		toolCallFromProto(&ev, e.GetCall())
	case *pb.AgentEvent_CompactionStart:
		ev.Type, ev.Text = agent.EventCompactionStart, k.CompactionStart.GetReason()
	case *pb.AgentEvent_CompactionEnd:
		e := k.CompactionEnd
		ev.Type, ev.Text, ev.Result, ev.IsError, ev.Err = agent.EventCompactionEnd, e.GetSummary(), e.GetResult(), e.GetIsError(), e.GetError()
	case *pb.AgentEvent_RunEnd:
		e := k.RunEnd
		ev.Type, ev.StopReason, ev.Usage, ev.Err = agent.EventRunEnd, StopReasonFromProto(e.GetStopReason()), usageFromProto(e.GetUsage()), e.GetError()
	case *pb.AgentEvent_Retry:
		e := k.Retry
		ev.Type, ev.Attempt, ev.Err, ev.Duration = agent.EventRetry, int(e.GetAttempt()), e.GetError(), DurationFromProto(e.GetWait())
	}
	return ev
}

func toolCallFromProto(ev *agent.Event, c *pb.ToolCall) {
	ev.ToolCallID, ev.ToolName, ev.Label = c.GetId(), c.GetName(), c.GetLabel()
	if a := c.GetArgsJson(); a != "" && json.Valid([]byte(a)) {
		ev.Args = json.RawMessage(a)
	}
}

func usageToProto(u model.Usage) *pb.Usage {
	if u == (model.Usage{}) {
		return nil
	}
	return &pb.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
}

func usageFromProto(u *pb.Usage) model.Usage {
	return model.Usage{InputTokens: u.GetInputTokens(), OutputTokens: u.GetOutputTokens()}
}

// DurationToProto converts a duration for the wire; zero is left out.
func DurationToProto(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

// DurationFromProto converts a duration from the wire. Left out, not
// valid (seconds and nanos of different signs, nanos out of range), or
// too long for time.Duration (about 292 years): 0.
func DurationFromProto(p *durationpb.Duration) time.Duration {
	if p == nil || p.CheckValid() != nil {
		return 0
	}
	// CheckValid keeps seconds and nanos of one sign and nanos below a
	// second, so the sum overflows only by flipping its sign.
	const maxSeconds = math.MaxInt64 / int64(time.Second)
	sec := p.GetSeconds()
	if sec > maxSeconds || sec < -maxSeconds {
		return 0
	}
	d := time.Duration(sec)*time.Second + time.Duration(p.GetNanos())
	if (sec > 0 && d < 0) || (sec < 0 && d > 0) {
		return 0
	}
	return d
}

// MessageToProto converts a model message.
func MessageToProto(m model.Message) *pb.ModelMessage {
	out := &pb.ModelMessage{Role: roles.toProto(string(m.Role)), Content: m.Content, ToolCallId: m.ToolCallID, ToolName: m.ToolName, IsError: m.IsError}
	for _, img := range m.Images {
		out.Images = append(out.Images, &pb.ModelImage{MimeType: img.MimeType, Data: img.Data})
	}
	for _, tc := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, &pb.ModelToolCall{Id: tc.ID, Name: tc.Name, ArgsJson: string(tc.Args)})
	}
	return out
}

// MessageFromProto converts back.
func MessageFromProto(p *pb.ModelMessage) model.Message {
	m := model.Message{Role: model.Role(roles.name(p.GetRole())), Content: p.GetContent(), ToolCallID: p.GetToolCallId(), ToolName: p.GetToolName(), IsError: p.GetIsError()}
	for _, img := range p.GetImages() {
		m.Images = append(m.Images, model.Image{MimeType: img.GetMimeType(), Data: img.GetData()})
	}
	for _, tc := range p.GetToolCalls() {
		args := json.RawMessage(tc.GetArgsJson())
		if !json.Valid(args) {
			args = json.RawMessage("{}")
		}
		m.ToolCalls = append(m.ToolCalls, model.ToolCall{ID: tc.GetId(), Name: tc.GetName(), Args: args})
	}
	return m
}

// RequestToProto converts a model request (the model id is the broker's
// choice, not the chick's, so it is not sent).
func RequestToProto(r model.Request) *pb.GenerateRequest {
	out := &pb.GenerateRequest{System: r.System, MaxOutputTokens: int32(r.MaxOutputTokens)}
	for _, m := range r.Messages {
		out.Messages = append(out.Messages, MessageToProto(m))
	}
	for _, t := range r.Tools {
		out.Tools = append(out.Tools, ToolSpecToProto(t))
	}
	return out
}

// RequestFromProto converts back.
func RequestFromProto(p *pb.GenerateRequest) model.Request {
	r := model.Request{System: p.GetSystem(), MaxOutputTokens: int(p.GetMaxOutputTokens())}
	for _, m := range p.GetMessages() {
		r.Messages = append(r.Messages, MessageFromProto(m))
	}
	for _, t := range p.GetTools() {
		params := json.RawMessage(t.GetParametersJson())
		if len(params) == 0 || !json.Valid(params) {
			params = json.RawMessage(`{"type":"object"}`)
		}
		r.Tools = append(r.Tools, model.ToolSpec{Name: t.GetName(), Description: t.GetDescription(), Parameters: params})
	}
	return r
}

// ToolSpecToProto converts a tool's description.
func ToolSpecToProto(t model.ToolSpec) *pb.ToolSpec {
	return &pb.ToolSpec{Name: t.Name, Description: t.Description, ParametersJson: string(t.Parameters)}
}

// DoneToProto converts a model answer.
func DoneToProto(r model.Response) *pb.GenerateDone {
	return &pb.GenerateDone{
		Message:            MessageToProto(r.Message),
		Usage:              &pb.Usage{InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens},
		ProviderStopReason: r.StopReason,
	}
}

// DoneFromProto converts back.
func DoneFromProto(p *pb.GenerateDone) model.Response {
	r := model.Response{StopReason: p.GetProviderStopReason()}
	if p.GetMessage() != nil {
		r.Message = MessageFromProto(p.GetMessage())
	}
	if u := p.GetUsage(); u != nil {
		r.Usage = model.Usage{InputTokens: u.GetInputTokens(), OutputTokens: u.GetOutputTokens()}
	}
	return r
}

// grpcTooLarge starts gRPC's refusal of a message longer than the
// receiver's MaxRecvMsgSize.
const grpcTooLarge = "grpc: received message larger than max"

// Status codes the broker's errors travel as.
const (
	codeBudget    = codes.ResourceExhausted
	codeOverflow  = codes.OutOfRange
	codeNotFound  = codes.NotFound
	codeUpstream  = codes.FailedPrecondition
	codeTransient = codes.Aborted
	codeInvalid   = codes.InvalidArgument
)

// ModelErrorToStatus maps a model error for the wire.
func ModelErrorToStatus(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case errors.Is(err, model.ErrBudgetExhausted):
		return status.Error(codeBudget, msg)
	case errors.Is(err, model.ErrContextOverflow):
		return status.Error(codeOverflow, msg)
	case errors.Is(err, model.ErrModelNotFound):
		return status.Error(codeNotFound, msg)
	case errors.Is(err, model.ErrUnreachable):
		return status.Error(codeUpstream, msg)
	case errors.Is(err, model.ErrInvalidRequest):
		return status.Error(codeInvalid, msg)
	case model.IsTransient(err):
		return status.Error(codeTransient, msg)
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, msg)
	}
	return status.Error(codes.Unknown, msg)
}

// ModelErrorFromStatus maps a broker error back to the model sentinels.
// ok is false for errors that are not the broker's answer (the connection
// to Mother failed): callers retry those.
func ModelErrorFromStatus(err error) (mapped error, ok bool) {
	st, isStatus := status.FromError(err)
	if !isStatus {
		return err, false
	}
	msg := st.Message()
	switch st.Code() {
	case codeBudget:
		if strings.HasPrefix(msg, grpcTooLarge) {
			// gRPC's own refusal of a call longer than the nest reads
			// (chicks.calls.maxRequestBytes), not the budget.
			return model.Wrap(model.ErrInvalidRequest, "model call refused unread, larger than Mother reads (chicks.calls.maxRequestBytes): %s", strings.TrimPrefix(msg, "grpc: ")), true
		}
		return model.Wrap(model.ErrBudgetExhausted, "%s", msg), true
	case codeOverflow:
		return model.Wrap(model.ErrContextOverflow, "%s", msg), true
	case codeNotFound:
		return model.Wrap(model.ErrModelNotFound, "%s", msg), true
	case codeUpstream:
		return model.Wrap(model.ErrUnreachable, "%s", msg), true
	case codeInvalid:
		return model.Wrap(model.ErrInvalidRequest, "%s", msg), true
	case codeTransient:
		// The message already reads "transient: ..." from Mother's side.
		return &model.TransientError{Err: errors.New(strings.TrimPrefix(msg, "transient: "))}, true
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return err, false
	}
	return errors.New(msg), true
}
