package ollama_test

import (
	"testing"

	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/ollama"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

func TestShowWindowAndVision(t *testing.T) {
	fake := ollamatest.New(ollamatest.Turn{Text: "ok"})
	defer fake.Close()
	fake.SetContextLength(262144)
	fake.SetCapabilities("completion", "vision")
	p, err := ollama.New(fake.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := p.ContextWindow(t.Context(), "m"); err != nil || n != ollama.MaxTrainedWindow {
		t.Errorf("ContextWindow = %d, %v; want the trained length capped at %d", n, err, ollama.MaxTrainedWindow)
	}
	if ok, err := p.SupportsImages(t.Context(), "m"); err != nil || !ok {
		t.Errorf("SupportsImages = %v, %v", ok, err)
	}
	if _, err := p.Chat(t.Context(), model.Request{Model: "m", ContextWindow: 8192, Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := fake.Requests()[0].Options["num_ctx"]; got != float64(8192) {
		t.Errorf("num_ctx sent = %v, want 8192", got)
	}
}
