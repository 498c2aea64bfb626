package nest_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// FuzzChickMessages plays a hostile chick against the real nest over real
// gRPC, with a real token: arbitrary Session messages, model requests and
// uploads, decoded from the fuzzer's bytes as the gRPC codec would. The
// nest must never panic (a panic in a handler kills the test binary);
// every answer is a gRPC status; a correctly sequenced event is stored and
// acknowledged whatever it holds; an upload lands inside the chick's own
// folder of the channel directory or is refused; and the chick can still
// join afterwards. (Results are sent as heartbeats: a stored result ends
// the chick, which would end the fuzzing too.)
func FuzzChickMessages(f *testing.F) {
	add := func(kind uint8, m proto.Message, payload []byte) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(kind, b, payload)
	}
	ts := timestamppb.New(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	add(0, &pb.SessionRequest{Kind: &pb.SessionRequest_Event{Event: &pb.AgentEvent{Time: ts, Kind: &pb.AgentEvent_ToolStart{ToolStart: &pb.ToolStart{Call: &pb.ToolCall{Label: "ls", ArgsJson: `{"command":"ls"}`}}}}}}, nil)
	add(0, &pb.SessionRequest{Kind: &pb.SessionRequest_Event{Event: &pb.AgentEvent{Time: &timestamppb.Timestamp{Seconds: 1 << 62}, Kind: &pb.AgentEvent_ToolEnd{ToolEnd: &pb.ToolEnd{Call: &pb.ToolCall{ArgsJson: "{"}, Duration: &durationpb.Duration{Seconds: -1 << 62, Nanos: 5}}}}}}, nil)
	add(0, &pb.SessionRequest{Kind: &pb.SessionRequest_Event{Event: &pb.AgentEvent{Kind: &pb.AgentEvent_RunEnd{RunEnd: &pb.RunEnd{StopReason: 77}}}}}, nil)
	add(0, &pb.SessionRequest{Kind: &pb.SessionRequest_Heartbeat{Heartbeat: &pb.Heartbeat{}}}, nil)
	add(0, &pb.SessionRequest{}, nil)
	add(1, &pb.GenerateRequest{System: "s", Messages: []*pb.ModelMessage{{Role: pb.Role_ROLE_USER, Content: "hi"}}}, nil)
	add(1, &pb.GenerateRequest{MaxOutputTokens: -1, Messages: []*pb.ModelMessage{{Role: 42, ToolCalls: []*pb.ModelToolCall{{ArgsJson: "]"}}}}, Tools: []*pb.ToolSpec{{ParametersJson: "x"}}}, nil)
	add(2, &pb.UploadFileHeader{Path: "outputs/report.txt", Size: 5}, []byte("hello"))
	add(2, &pb.UploadFileHeader{Path: "../../../../etc/passwd"}, []byte("root"))
	add(2, &pb.UploadFileHeader{Path: "/workspace/../x"}, []byte("x"))
	add(2, &pb.UploadFileHeader{Path: ".", Attach: true, Title: "\x00"}, nil)
	add(2, &pb.UploadFileHeader{Path: "a/./b/../../../c"}, []byte("c"))

	// The fuzzer sends far faster, and in all far more, than a chick may:
	// chicks.events' bounds are lifted here (flood_test.go tests them).
	fx := newFixtureConfig(f, 0, func(cfg *config.Config) {
		cfg.Chicks.Events.PerSecond, cfg.Chicks.Events.Burst, cfg.Chicks.Events.MaxBytes = 1<<30, 1<<30, "1024g"
	})
	id, tok := fx.spawn(f)
	parent := filepath.Dir(fx.chDir)
	own := filepath.Join("scratch", "chicks", id) + string(filepath.Separator)
	var stored uint64 // the last event sequence number the nest acked

	f.Fuzz(func(t *testing.T, kind uint8, msg, payload []byte) {
		ctx := wire.Credentials(t.Context(), id, tok)
		switch kind % 3 {
		case 0:
			var req pb.SessionRequest
			if proto.Unmarshal(msg, &req) != nil {
				return
			}
			if req.GetResult() != nil {
				req.Kind = &pb.SessionRequest_Heartbeat{Heartbeat: &pb.Heartbeat{}}
			}
			if ev := req.GetEvent(); ev != nil {
				ev.Seq = stored + 1
			}
			s, err := fx.client.Session(ctx)
			if err != nil {
				t.Fatalf("open session: %v", err)
			}
			if err := s.Send(&pb.SessionRequest{Kind: &pb.SessionRequest_Hello{Hello: &pb.SessionHello{}}}); err != nil {
				t.Fatalf("hello: %v", err)
			}
			first, err := s.Recv()
			if err != nil || first.GetAck() == nil {
				t.Fatalf("no ack after hello: %v %v", first, err)
			}
			stored = first.GetAck().GetSeq()
			if ev := req.GetEvent(); ev != nil {
				ev.Seq = stored + 1
			}
			if err := s.Send(&req); err != nil {
				t.Fatalf("send: %v", err)
			}
			if ev := req.GetEvent(); ev != nil {
				ack, err := s.Recv()
				if err != nil || ack.GetAck().GetSeq() != ev.Seq {
					t.Fatalf("event %v: answer %v, %v; want it stored and acked", ev, ack, err)
				}
				stored = ev.Seq
			}
			s.CloseSend()
			for {
				if _, err := s.Recv(); err != nil {
					if !errors.Is(err, io.EOF) {
						mustBeStatus(t, err)
					}
					break
				}
			}
		case 1:
			var req pb.GenerateRequest
			if proto.Unmarshal(msg, &req) != nil {
				return
			}
			s, err := fx.client.Generate(ctx, &req)
			if err != nil {
				mustBeStatus(t, err)
				break
			}
			for {
				if _, err := s.Recv(); err != nil {
					if !errors.Is(err, io.EOF) {
						mustBeStatus(t, err)
					}
					break
				}
			}
		case 2:
			var h pb.UploadFileHeader
			if proto.Unmarshal(msg, &h) != nil {
				return
			}
			up, err := fx.client.UploadFile(ctx)
			if err != nil {
				t.Fatalf("open upload: %v", err)
			}
			up.Send(&pb.UploadFileRequest{Kind: &pb.UploadFileRequest_Header{Header: &h}})
			if len(payload) > 0 {
				up.Send(&pb.UploadFileRequest{Kind: &pb.UploadFileRequest_Data{Data: payload}})
			}
			resp, err := up.CloseAndRecv()
			if err != nil {
				mustBeStatus(t, err)
				break
			}
			p := resp.GetStoredPath()
			if !strings.HasPrefix(filepath.Clean(p), own) {
				t.Fatalf("upload of %q stored at %q, outside %s", h.GetPath(), p, own)
			}
			if got, err := os.ReadFile(filepath.Join(fx.chDir, p)); err != nil || !bytes.Equal(got, payload) {
				t.Fatalf("upload of %q: stored %q (%v), want the %d bytes sent", h.GetPath(), got, err, len(payload))
			}
		}
		// Nothing was written outside the chick's own folder.
		ents, _ := os.ReadDir(parent)
		if len(ents) != 1 {
			t.Fatalf("%s holds %d entries, want only the channel directory", parent, len(ents))
		}
		filepath.WalkDir(fx.chDir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(fx.chDir, p)
				if !strings.HasPrefix(rel, own) {
					t.Fatalf("file %s outside the chick's folder", rel)
				}
			}
			return nil
		})
		// The chick is still itself.
		if _, err := fx.client.Join(ctx, &pb.JoinRequest{Version: "fuzz"}); err != nil {
			t.Fatalf("join after the message: %v", err)
		}
	})
}

// mustBeStatus fails unless err is a gRPC status the nest chose: not
// Unknown, Internal or Unavailable, which a panic, an unmapped error or a
// dropped connection would give.
func mustBeStatus(t *testing.T, err error) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("not a gRPC status: %v", err)
	}
	switch st.Code() {
	case codes.Unknown, codes.Internal, codes.Unavailable:
		t.Fatalf("a transport breakdown or an unanswered failure (%s), not a status the nest chose: %v", st.Code(), err)
	}
}
