package nest_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/nest"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// callsFixture is a nest whose model calls are bounded small.
func callsFixture(t *testing.T) *fixture {
	return newFixture(t, 1<<30, func(_ *config.Config, _ *hatchery.Hatchery, o *nest.Options) {
		o.Calls = nest.CallLimits{MaxRequestBytes: 256 << 10, MaxImages: 2, MaxImageBytes: 64 << 10, MaxHeldBytes: 256 << 10, MaxPerChick: 1}
	})
}

// imagesCall is a model call with n images of size bytes each.
func imagesCall(n, size int) *pb.GenerateRequest {
	m := model.Message{Role: model.RoleUser, Content: "look"}
	for range n {
		m.Images = append(m.Images, model.Image{MimeType: "image/png", Data: bytes.Repeat([]byte{7}, size)})
	}
	return wire.RequestToProto(model.Request{Messages: []model.Message{m}, MaxOutputTokens: 8})
}

// callEnd is how a model call ended: nil once answered.
func callEnd(t *testing.T, f *fixture, id, tok string, req *pb.GenerateRequest) error {
	t.Helper()
	st, err := f.client.Generate(wire.Credentials(t.Context(), id, tok), req)
	if err != nil {
		return err
	}
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return errors.New("the call ended without its done")
		}
		if err != nil {
			return err
		}
		if m.GetDone() != nil {
			return nil
		}
	}
}

func TestModelCallsAreBoundedBeforeTheyReachAProvider(t *testing.T) {
	t.Parallel()
	f := callsFixture(t)
	id, tok := f.spawn(t)
	cases := []struct {
		name      string
		req       *pb.GenerateRequest
		code      codes.Code
		msg       string
		chickSide error
	}{
		{"larger than the nest reads", imagesCall(1, 1<<20), codes.ResourceExhausted, "larger than max", model.ErrInvalidRequest},
		{"too many images", imagesCall(3, 100), codes.InvalidArgument, "it carries 3 images, more than the 2 a call may have (chicks.calls.maxImages)", model.ErrInvalidRequest},
		{"images too large together", imagesCall(2, 40<<10), codes.InvalidArgument, "its images are 80 KiB, more than the 64 KiB a call may have (chicks.calls.maxImageBytes)", model.ErrInvalidRequest},
	}
	for _, c := range cases {
		err := callEnd(t, f, id, tok, c.req)
		if status.Code(err) != c.code || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %s with %q", c.name, err, c.code, c.msg)
		}
		if mapped, ok := wire.ModelErrorFromStatus(err); !ok || !errors.Is(mapped, c.chickSide) {
			t.Errorf("%s: the chick reads %v, want %v", c.name, mapped, c.chickSide)
		}
	}
	if got := f.fake.Requests(); len(got) != 0 {
		t.Errorf("the provider saw %d refused calls", len(got))
	}
	// The control: within every bound, answered, its images sent.
	f.fake.Push(ollamatest.Turn{Text: "a cat", PromptTokens: 10, OutputTokens: 2})
	if err := callEnd(t, f, id, tok, imagesCall(2, 30<<10)); err != nil {
		t.Fatalf("a call within the bounds: %v", err)
	}
	if got := f.fake.Requests(); len(got) != 1 || len(got[0].Messages[len(got[0].Messages)-1].Images) != 2 {
		t.Errorf("the provider saw %+v, want one call with two images", got)
	}
}

func TestAChicksModelCallsAreCountedBeforeTheyAreRead(t *testing.T) {
	t.Parallel()
	f := callsFixture(t)
	id, tok := f.spawn(t)
	f.fake.Push(ollamatest.Turn{Text: "slow", PromptTokens: 10, OutputTokens: 2, Delay: 3 * time.Second})
	first := make(chan error, 1)
	go func() { first <- callEnd(t, f, id, tok, imagesCall(1, 100)) }()
	for deadline := time.Now().Add(30 * time.Second); len(f.fake.Requests()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first call never reached the provider")
		}
	}
	// MaxPerChick 1: the second call of the chick is refused, unread,
	// as a transient error its agent retries.
	err := callEnd(t, f, id, tok, imagesCall(1, 100))
	mapped, _ := wire.ModelErrorFromStatus(err)
	if !model.IsTransient(mapped) || !strings.Contains(err.Error(), "chicks.maxModelCallsPerChick") {
		t.Errorf("a second call in flight: %v (the chick reads %v), want a transient refusal naming chicks.maxModelCallsPerChick", err, mapped)
	}
	if err := <-first; err != nil {
		t.Errorf("the first call: %v", err)
	}
	// Once the first has ended, the next is read.
	f.fake.Push(ollamatest.Turn{Text: "ok", PromptTokens: 10, OutputTokens: 2})
	if err := callEnd(t, f, id, tok, imagesCall(1, 100)); err != nil {
		t.Errorf("a call after the first ended: %v", err)
	}
}
