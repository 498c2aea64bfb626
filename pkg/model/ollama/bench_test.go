package ollama

import (
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// BenchmarkChat is one streamed call to a local fake: B/op shows what a
// call costs Mother's heap (the official client's stream allocates an
// 8 MB line buffer per call; Chat reads lines with a pooled buffer that
// grows only as far as a line needs).
func BenchmarkChat(b *testing.B) {
	fake := ollamatest.NewFunc(func(ollamatest.Request) ollamatest.Turn { return ollamatest.Turn{Text: "a short answer"} })
	defer fake.Close()
	p, err := New(fake.URL, nil)
	if err != nil {
		b.Fatal(err)
	}
	req := model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleUser, Content: "hello"}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Chat(b.Context(), req, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// TestChatReadsLinesLongerThanTheReadBuffer streams an answer whose line is
// larger than the pooled reader's 64 KiB, over the real socket.
func TestChatReadsLinesLongerThanTheReadBuffer(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 60_000) // 300 kB in one streamed line
	fake := ollamatest.NewFunc(func(ollamatest.Request) ollamatest.Turn { return ollamatest.Turn{Text: long} })
	defer fake.Close()
	p, err := New(fake.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second call reuses the pooled reader
		resp, err := p.Chat(t.Context(), model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Message.Content != long {
			t.Fatalf("answer of %d bytes, want %d", len(resp.Message.Content), len(long))
		}
	}
}
