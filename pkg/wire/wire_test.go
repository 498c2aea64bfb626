package wire

import (
	"errors"
	"testing"

	"github.com/mother-chat/mother/pkg/model"
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
