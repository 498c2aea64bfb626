package wire

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/model"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// TestTransientErrorRoundTrip: a transient error crosses the wire as one,
// with its message said once.
func TestTransientErrorRoundTrip(t *testing.T) {
	in := &model.TransientError{Err: errors.New("ollama: HTTP 503: busy")}
	out, ok := ModelErrorFromStatus(ModelErrorToStatus(in))
	if !ok || !model.IsTransient(out) || out.Error() != in.Error() {
		t.Errorf("ModelErrorFromStatus(ModelErrorToStatus(%q)) = %q (transient %v), want the same transient error", in, out, model.IsTransient(out))
	}
}

// TestDurationFromProto: what a peer sends as a duration becomes one, or 0
// when it is not valid or does not fit time.Duration.
func TestDurationFromProto(t *testing.T) {
	for _, c := range []struct {
		name string
		in   *durationpb.Duration
		want time.Duration
	}{
		{"left out", nil, 0},
		{"1.5s", durationpb.New(1500 * time.Millisecond), 1500 * time.Millisecond},
		{"negative", durationpb.New(-time.Nanosecond), -time.Nanosecond},
		{"largest", durationpb.New(math.MaxInt64), math.MaxInt64},
		{"smallest", durationpb.New(math.MinInt64), math.MinInt64},
		{"overflow by nanos", &durationpb.Duration{Seconds: 9223372036, Nanos: 999999999}, 0},
		{"overflow by seconds", &durationpb.Duration{Seconds: 1 << 40}, 0},
		{"signs differ", &durationpb.Duration{Seconds: 1, Nanos: -1}, 0},
		{"nanos out of range", &durationpb.Duration{Nanos: 2e9}, 0},
	} {
		if got := DurationFromProto(c.in); got != c.want {
			t.Errorf("%s: DurationFromProto(%v) = %v, want %v", c.name, c.in, got, c.want)
		}
	}
}

// TestStopReasonFromProto: a stop reason this build does not know (a
// newer chick's) is an error, never a success; none stays none.
func TestStopReasonFromProto(t *testing.T) {
	for in, want := range map[pb.StopReason]agent.StopReason{
		pb.StopReason_STOP_REASON_UNSPECIFIED: "",
		pb.StopReason_STOP_REASON_DONE:        agent.StopDone,
		pb.StopReason_STOP_REASON_BUDGET:      agent.StopBudget,
		pb.StopReason(99):                     agent.StopError,
	} {
		if got := StopReasonFromProto(in); got != want {
			t.Errorf("StopReasonFromProto(%v) = %q, want %q", in, got, want)
		}
	}
	for _, r := range agentStopReasons {
		if got := StopReasonFromProto(StopReasonToProto(r)); got != r {
			t.Errorf("StopReasonFromProto(StopReasonToProto(%q)) = %q", r, got)
		}
	}
}

// TestModelErrorsRoundTrip: each error a chick branches on crosses the wire
// as itself, with its message.
func TestModelErrorsRoundTrip(t *testing.T) {
	for _, kind := range []error{model.ErrBudgetExhausted, model.ErrContextOverflow, model.ErrModelNotFound, model.ErrUnreachable, model.ErrInvalidRequest} {
		in := model.Wrap(kind, "ollama: tool %q: bad schema", "read")
		out, ok := ModelErrorFromStatus(ModelErrorToStatus(in))
		if !ok || !errors.Is(out, kind) || !strings.Contains(out.Error(), `tool "read": bad schema`) {
			t.Errorf("%v: crossed as %v (ok %v)", kind, out, ok)
		}
	}
}
