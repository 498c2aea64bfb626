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

var eventTypes = map[agent.EventType]pb.AgentEventType{
	agent.EventMessageStart:    pb.AgentEventType_AGENT_EVENT_TYPE_MESSAGE_START,
	agent.EventMessageDelta:    pb.AgentEventType_AGENT_EVENT_TYPE_MESSAGE_DELTA,
	agent.EventMessageEnd:      pb.AgentEventType_AGENT_EVENT_TYPE_MESSAGE_END,
	agent.EventToolStart:       pb.AgentEventType_AGENT_EVENT_TYPE_TOOL_START,
	agent.EventToolEnd:         pb.AgentEventType_AGENT_EVENT_TYPE_TOOL_END,
	agent.EventCompactionStart: pb.AgentEventType_AGENT_EVENT_TYPE_COMPACTION_START,
	agent.EventCompactionEnd:   pb.AgentEventType_AGENT_EVENT_TYPE_COMPACTION_END,
	agent.EventRunEnd:          pb.AgentEventType_AGENT_EVENT_TYPE_RUN_END,
	agent.EventRetry:           pb.AgentEventType_AGENT_EVENT_TYPE_RETRY,
}

// EventToProto converts an agent event with its sequence number.
func EventToProto(seq uint64, ev agent.Event) *pb.AgentEvent {
	out := &pb.AgentEvent{
		Seq: seq, Type: eventTypes[ev.Type], Text: ev.Text, ToolCallId: ev.ToolCallID, ToolName: ev.ToolName,
		Label: ev.Label, ArgsJson: string(ev.Args), Result: ev.Result, IsError: ev.IsError,
		DurationMs: ev.Duration.Milliseconds(), StopReason: string(ev.StopReason), Error: ev.Err, Attempt: int32(ev.Attempt),
	}
	if !ev.Time.IsZero() {
		out.Time = timestamppb.New(ev.Time)
	}
	if ev.Usage != (model.Usage{}) {
		out.Usage = &pb.Usage{InputTokens: ev.Usage.InputTokens, OutputTokens: ev.Usage.OutputTokens}
	}
	return out
}

// EventFromProto converts back. It comes from a chick, so nothing in it
// is trusted: an unknown type becomes none, arguments that are not JSON
// are dropped, and a time outside years 1-9999 (which could not be stored)
// and a duration too long for time.Duration are left out.
func EventFromProto(p *pb.AgentEvent) agent.Event {
	ev := agent.Event{
		Text: p.GetText(), ToolCallID: p.GetToolCallId(), ToolName: p.GetToolName(), Label: p.GetLabel(),
		Result: p.GetResult(), IsError: p.GetIsError(), Duration: durationFromMs(p.GetDurationMs()),
		StopReason: agent.StopReason(p.GetStopReason()), Err: p.GetError(), Attempt: int(p.GetAttempt()),
	}
	for k, v := range eventTypes {
		if v == p.GetType() {
			ev.Type = k
		}
	}
	if t := p.GetTime(); t != nil && t.CheckValid() == nil {
		ev.Time = t.AsTime()
	}
	if a := p.GetArgsJson(); a != "" && json.Valid([]byte(a)) {
		ev.Args = json.RawMessage(a)
	}
	if u := p.GetUsage(); u != nil {
		ev.Usage = model.Usage{InputTokens: u.GetInputTokens(), OutputTokens: u.GetOutputTokens()}
	}
	return ev
}

// durationFromMs converts milliseconds from the wire; a value that would
// overflow time.Duration (about 292 years) becomes 0.
func durationFromMs(ms int64) time.Duration {
	const limit = math.MaxInt64 / int64(time.Millisecond)
	if ms > limit || ms < -limit {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// MessageToProto converts a model message.
func MessageToProto(m model.Message) *pb.ModelMessage {
	out := &pb.ModelMessage{Role: string(m.Role), Content: m.Content, ToolCallId: m.ToolCallID, ToolName: m.ToolName, IsError: m.IsError}
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
	m := model.Message{Role: model.Role(p.GetRole()), Content: p.GetContent(), ToolCallID: p.GetToolCallId(), ToolName: p.GetToolName(), IsError: p.GetIsError()}
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
		out.Tools = append(out.Tools, &pb.ToolSpec{Name: t.Name, Description: t.Description, ParametersJson: string(t.Parameters)})
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

// DoneToProto converts a model answer.
func DoneToProto(r model.Response) *pb.GenerateDone {
	return &pb.GenerateDone{
		Message:    MessageToProto(r.Message),
		Usage:      &pb.Usage{InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens},
		StopReason: r.StopReason,
	}
}

// DoneFromProto converts back.
func DoneFromProto(p *pb.GenerateDone) model.Response {
	r := model.Response{StopReason: p.GetStopReason()}
	if p.GetMessage() != nil {
		r.Message = MessageFromProto(p.GetMessage())
	}
	if u := p.GetUsage(); u != nil {
		r.Usage = model.Usage{InputTokens: u.GetInputTokens(), OutputTokens: u.GetOutputTokens()}
	}
	return r
}

// Status codes the broker's errors travel as.
const (
	codeBudget    = codes.ResourceExhausted
	codeOverflow  = codes.OutOfRange
	codeNotFound  = codes.NotFound
	codeUpstream  = codes.FailedPrecondition
	codeTransient = codes.Aborted
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
		return model.Wrap(model.ErrBudgetExhausted, "%s", msg), true
	case codeOverflow:
		return model.Wrap(model.ErrContextOverflow, "%s", msg), true
	case codeNotFound:
		return model.Wrap(model.ErrModelNotFound, "%s", msg), true
	case codeUpstream:
		return model.Wrap(model.ErrUnreachable, "%s", msg), true
	case codeTransient:
		// The message already reads "transient: ..." from Mother's side.
		return &model.TransientError{Err: errors.New(strings.TrimPrefix(msg, "transient: "))}, true
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return err, false
	}
	return errors.New(msg), true
}
