package wire

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
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
	seedProto(f,
		&pb.SessionRequest{Kind: &pb.SessionRequest_Hello{Hello: &pb.SessionHello{LastSentSeq: 7}}},
		&pb.SessionRequest{Kind: &pb.SessionRequest_Event{Event: &pb.AgentEvent{Seq: 1, Type: pb.AgentEventType_AGENT_EVENT_TYPE_TOOL_START, Time: now, ToolName: "bash", Label: "ls", ArgsJson: `{"command":"ls"}`}}},
		&pb.SessionRequest{Kind: &pb.SessionRequest_Event{Event: &pb.AgentEvent{Seq: 2, Type: pb.AgentEventType(99), ArgsJson: `{"unterminated`, DurationMs: -1}}},
		&pb.SessionRequest{Kind: &pb.SessionRequest_Event{Event: &pb.AgentEvent{Seq: 3, Time: &timestamppb.Timestamp{Seconds: 1 << 60}}}},
		&pb.SessionRequest{Kind: &pb.SessionRequest_Event{Event: &pb.AgentEvent{Seq: 4, Time: &timestamppb.Timestamp{Seconds: -1 << 40, Nanos: -5}}}},
		&pb.SessionRequest{Kind: &pb.SessionRequest_Event{Event: &pb.AgentEvent{Seq: 5, Usage: &pb.Usage{InputTokens: -3, OutputTokens: 1 << 62}}}},
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
		if ev.Type != "" {
			if _, known := eventTypes[ev.Type]; !known {
				t.Fatalf("unknown event type %q", ev.Type)
			}
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

// FuzzEventRoundTrip: every event a chick's agent can emit arrives at
// Mother as the same event (nothing the renderers use is lost on the way).
func FuzzEventRoundTrip(f *testing.F) {
	f.Add(uint8(0), "hello", "call_1", "bash", "listing", `{"command":"ls"}`, "out", true, int64(1500), int64(1_700_000_000), int64(10), int64(20), "done", "", 2)
	f.Add(uint8(3), "", "", "", "", "", "", false, int64(0), int64(0), int64(0), int64(0), "", "boom", 0)
	f.Add(uint8(8), "retrying", "", "", "", "", "", false, int64(2000), int64(1_800_000_000), int64(0), int64(0), "", "503 from upstream", 3)
	types := []agent.EventType{
		agent.EventMessageStart, agent.EventMessageDelta, agent.EventMessageEnd, agent.EventToolStart, agent.EventToolEnd,
		agent.EventCompactionStart, agent.EventCompactionEnd, agent.EventRunEnd, agent.EventRetry,
	}
	f.Fuzz(func(t *testing.T, typ uint8, text, callID, tool, label, args, result string, isErr bool, durMs, unix, in, out int64, stop, errText string, attempt int) {
		ev := agent.Event{
			Type: types[int(typ)%len(types)], Text: text, ToolCallID: callID, ToolName: tool, Label: label,
			Result: result, IsError: isErr, Duration: time.Duration(durMs%(1<<40)) * time.Millisecond,
			Usage: model.Usage{InputTokens: in, OutputTokens: out}, StopReason: agent.StopReason(stop), Err: errText, Attempt: attempt,
		}
		if json.Valid([]byte(args)) {
			ev.Args = json.RawMessage(args)
		}
		if unix > 0 {
			ev.Time = time.Unix(unix%253402300799, 0).UTC() // within years 1970-9999
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
			{Role: "user", Content: "hi"},
			{Role: "assistant", ToolCalls: []*pb.ModelToolCall{{Id: "1", Name: "bash", ArgsJson: `{"command":"ls"}`}}},
			{Role: "tool", ToolCallId: "1", ToolName: "bash", Content: "a b", IsError: true},
		}, Tools: []*pb.ToolSpec{{Name: "bash", ParametersJson: `{"type":"object"}`}}},
		&pb.GenerateRequest{MaxOutputTokens: -5, Messages: []*pb.ModelMessage{
			{Role: "system", ToolCalls: []*pb.ModelToolCall{{ArgsJson: `{"a":`}}, Images: []*pb.ModelImage{{MimeType: "image/png", Data: []byte{0, 1}}}},
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
