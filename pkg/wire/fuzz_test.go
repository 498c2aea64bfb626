package wire

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/model"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// storedEvent is how the hatchery writes a chick's event to events.jsonl.
type storedEvent struct {
	Seq   uint64      `json:"seq"`
	Event agent.Event `json:"event"`
}

func seedProto(f *testing.F, msgs ...proto.Message) {
	for _, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzSessionRequest decodes arbitrary bytes as a chick's Session message,
// as the nest's gRPC codec would, and converts what it carries the way the
// nest does. Whatever a hostile chick sends: no panic; an event converts
// to one Mother can store (events.jsonl) and render (a known type or none,
// arguments that are valid JSON or absent), and converting it again gives
// the same event.
func FuzzSessionRequest(f *testing.F) {
	now := timestamppb.New(time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC))
	event := func(e *pb.AgentEvent) *pb.SessionRequest {
		return &pb.SessionRequest{Kind: &pb.SessionRequest_Event{Event: e}}
	}
	seedProto(f,
		&pb.SessionRequest{Kind: &pb.SessionRequest_Hello{Hello: &pb.SessionHello{LastSentSeq: 7}}},
		event(&pb.AgentEvent{Seq: 1, Time: now, Kind: &pb.AgentEvent_ToolStart{ToolStart: &pb.ToolStart{Call: &pb.ToolCall{Name: "bash", Label: "ls", ArgsJson: `{"command":"ls"}`}}}}),
		event(&pb.AgentEvent{Seq: 2, Kind: &pb.AgentEvent_ToolEnd{ToolEnd: &pb.ToolEnd{Call: &pb.ToolCall{ArgsJson: `{"unterminated`}, Duration: &durationpb.Duration{Nanos: -1}}}}),
		event(&pb.AgentEvent{Seq: 3, Time: &timestamppb.Timestamp{Seconds: 1 << 60}}),
		event(&pb.AgentEvent{Seq: 4, Time: &timestamppb.Timestamp{Seconds: -1 << 40, Nanos: -5}}),
		event(&pb.AgentEvent{Seq: 5, Kind: &pb.AgentEvent_RunEnd{RunEnd: &pb.RunEnd{StopReason: 99, Usage: &pb.Usage{InputTokens: -3, OutputTokens: 1 << 62}}}}),
		event(&pb.AgentEvent{Seq: 6, Kind: &pb.AgentEvent_Retry{Retry: &pb.Retry{Attempt: -1, Wait: &durationpb.Duration{Seconds: 9223372036, Nanos: 999999999}}}}),
		event(&pb.AgentEvent{Seq: 7, Kind: &pb.AgentEvent_MessageEnd{MessageEnd: &pb.MessageEnd{Text: "hi"}}}),
		&pb.SessionRequest{Kind: &pb.SessionRequest_Result{Result: &pb.ChickResult{Text: "done", OutputFiles: []string{"../../etc/passwd"}}}},
		&pb.SessionRequest{Kind: &pb.SessionRequest_Heartbeat{Heartbeat: &pb.Heartbeat{SentAt: now}}},
	)
	f.Add([]byte{0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		var req pb.SessionRequest
		if proto.Unmarshal(data, &req) != nil {
			return // the gRPC codec refuses it before the nest sees it
		}
		p := req.GetEvent()
		if p == nil {
			return
		}
		ev := EventFromProto(p)
		if _, err := json.Marshal(storedEvent{Seq: p.GetSeq(), Event: ev}); err != nil {
			t.Fatalf("event %v converts to one Mother cannot store: %v", p, err)
		}
		if ev.Args != nil && !json.Valid(ev.Args) {
			t.Fatalf("Args %q is not JSON", ev.Args)
		}
		if ev.Type != "" && !slices.Contains(agentEventTypes, ev.Type) {
			t.Fatalf("unknown event type %q", ev.Type)
		}
		if ev.StopReason != "" && !slices.Contains(agentStopReasons, ev.StopReason) {
			t.Fatalf("unknown stop reason %q", ev.StopReason)
		}
		again := EventFromProto(EventToProto(p.GetSeq(), ev))
		if !reflect.DeepEqual(normEvent(again), normEvent(ev)) {
			t.Fatalf("converting again changed the event:\n got %+v\nwant %+v", again, ev)
		}
	})
}

// normEvent makes events comparable (time zones and monotonic readings
// differ, an empty Args may be nil).
func normEvent(ev agent.Event) agent.Event {
	if !ev.Time.IsZero() {
		ev.Time = ev.Time.UTC()
	}
	if len(ev.Args) == 0 {
		ev.Args = nil
	}
	return ev
}

var (
	agentEventTypes = []agent.EventType{
		agent.EventMessageStart, agent.EventMessageDelta, agent.EventMessageEnd, agent.EventToolStart, agent.EventToolEnd,
		agent.EventCompactionStart, agent.EventCompactionEnd, agent.EventRunEnd, agent.EventRetry, agent.EventThinking,
	}
	agentStopReasons = []agent.StopReason{
		agent.StopDone, agent.StopAborted, agent.StopMaxTurns, agent.StopToolErrors, agent.StopBudget, agent.StopError,
		agent.StopRepeating, agent.StopUnusable,
	}
)

// FuzzEventRoundTrip: every event a chick's agent can emit arrives at
// Mother as the same event (nothing the renderers use is lost on the way).
// Each kind has the fields the agent sets on it (pkg/agent's emit calls);
// the wire carries exactly those.
func FuzzEventRoundTrip(f *testing.F) {
	f.Add(uint8(4), "hello", "call_1", "bash", "listing", `{"command":"ls"}`, "out", true, int64(1500*time.Millisecond), int64(1_700_000_000), int64(10), int64(20), uint8(0), "", int32(2))
	f.Add(uint8(3), "", "", "", "", "", "", false, int64(0), int64(0), int64(0), int64(0), uint8(5), "boom", int32(0))
	f.Add(uint8(8), "retrying", "", "", "", "", "", false, int64(2*time.Second), int64(1_800_000_000), int64(0), int64(0), uint8(0), "503 from upstream", int32(3))
	f.Add(uint8(7), "", "", "", "", "", "", false, int64(0), int64(1_800_000_000), int64(5), int64(6), uint8(2), "gave up", int32(0))
	f.Add(uint8(6), "summary", "", "", "", "", "3 kept", true, int64(-1), int64(1), int64(0), int64(0), uint8(0), "compaction failed", int32(0))
	f.Add(uint8(9), "thoughts never travel", "", "", "", "", "", false, int64(0), int64(1_800_000_000), int64(0), int64(0), uint8(0), "", int32(0))
	f.Add(uint8(7), "", "", "", "", "", "", false, int64(0), int64(1_800_000_000), int64(5), int64(6), uint8(6), "the same list_events call four times in a row", int32(0))
	f.Fuzz(func(t *testing.T, typ uint8, text, callID, tool, label, args, result string, isErr bool, dur, unix, in, out int64, stop uint8, errText string, attempt int32) {
		ev := agent.Event{Type: agentEventTypes[int(typ)%len(agentEventTypes)]}
		if unix > 0 {
			ev.Time = time.Unix(unix%253402300799, 0).UTC() // within years 1970-9999
		}
		usage := model.Usage{InputTokens: in, OutputTokens: out}
		call := func() {
			ev.ToolCallID, ev.ToolName, ev.Label = callID, tool, label
			if json.Valid([]byte(args)) {
				ev.Args = json.RawMessage(args)
			}
		}
		switch ev.Type {
		case agent.EventMessageDelta, agent.EventCompactionStart:
			ev.Text = text
		case agent.EventMessageEnd:
			ev.Text, ev.Usage = text, usage
		case agent.EventToolStart:
			call()
		case agent.EventToolEnd:
			call()
			ev.Result, ev.IsError, ev.Duration = result, isErr, time.Duration(dur)
		case agent.EventCompactionEnd:
			ev.Text, ev.Result, ev.IsError, ev.Err = text, result, isErr, errText
		case agent.EventRunEnd:
			ev.StopReason, ev.Usage, ev.Err = agentStopReasons[int(stop)%len(agentStopReasons)], usage, errText
		case agent.EventRetry:
			ev.Attempt, ev.Err, ev.Duration = int(attempt), errText, time.Duration(dur)
		}
		p := EventToProto(9, ev)
		b, err := proto.Marshal(p)
		if err != nil {
			return // not valid UTF-8: the chick's own marshalling refuses to send it
		}
		var back pb.AgentEvent
		if err := proto.Unmarshal(b, &back); err != nil {
			t.Fatalf("unmarshal what was marshalled: %v", err)
		}
		got := EventFromProto(&back)
		if !reflect.DeepEqual(normEvent(got), normEvent(ev)) {
			t.Fatalf("event changed on the wire:\n got %+v\nwant %+v", got, ev)
		}
	})
}

// FuzzGenerateRequest decodes arbitrary bytes as a chick's model request,
// as the broker receives it. Whatever arrives: no panic, every tool's
// parameters and every tool call's arguments are valid JSON (the
// providers embed them verbatim), the request encodes as JSON, and
// converting it again changes nothing.
func FuzzGenerateRequest(f *testing.F) {
	seedProto(f,
		&pb.GenerateRequest{System: "you are a chick", MaxOutputTokens: 100, Messages: []*pb.ModelMessage{
			{Role: pb.Role_ROLE_USER, Content: "hi"},
			{Role: pb.Role_ROLE_ASSISTANT, ToolCalls: []*pb.ModelToolCall{{Id: "1", Name: "bash", ArgsJson: `{"command":"ls"}`}}},
			{Role: pb.Role_ROLE_TOOL, ToolCallId: "1", ToolName: "bash", Content: "a b", IsError: true},
		}, Tools: []*pb.ToolSpec{{Name: "bash", ParametersJson: `{"type":"object"}`}}},
		&pb.GenerateRequest{MaxOutputTokens: -5, Messages: []*pb.ModelMessage{
			{Role: 9, ToolCalls: []*pb.ModelToolCall{{ArgsJson: `{"a":`}}, Images: []*pb.ModelImage{{MimeType: "image/png", Data: []byte{0, 1}}}},
		}, Tools: []*pb.ToolSpec{{Name: "x", ParametersJson: `[1,2`}, {}}},
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		var p pb.GenerateRequest
		if proto.Unmarshal(data, &p) != nil {
			return
		}
		r := RequestFromProto(&p)
		for _, tl := range r.Tools {
			if !json.Valid(tl.Parameters) {
				t.Fatalf("tool %q parameters %q are not JSON", tl.Name, tl.Parameters)
			}
		}
		for _, m := range r.Messages {
			for _, c := range m.ToolCalls {
				if !json.Valid(c.Args) {
					t.Fatalf("tool call %q arguments %q are not JSON", c.Name, c.Args)
				}
			}
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("request does not encode: %v", err)
		}
		again := RequestFromProto(RequestToProto(r))
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("converting again changed the request:\n got %+v\nwant %+v", again, r)
		}
	})
}
