package fallback_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/fallback"
	"github.com/mother-chat/mother/pkg/model/ollama"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// The chain is tested over the wire: each target is the real Ollama
// provider on its own fake server (or on a port nothing listens on).

func provider(t *testing.T, url string) model.Provider {
	t.Helper()
	p, err := ollama.New(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// deadURL is a loopback address nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

func ask(t *testing.T, c *fallback.Chain) (model.Response, error) {
	t.Helper()
	return c.Chat(t.Context(), model.Request{Model: "ignored", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}, nil)
}

func TestUnreachableGoesToTheNext(t *testing.T) {
	second := ollamatest.New(ollamatest.Turn{Text: "from the fallback"}, ollamatest.Turn{Text: "again"})
	defer second.Close()
	h := fallback.NewHealth(clock.Real{}, time.Minute, 2)
	c := fallback.New(h, 0,
		fallback.Target{Name: "openai:vllm", Model: "big", Provider: provider(t, deadURL(t))},
		fallback.Target{Name: "ollama", Model: "small", Provider: provider(t, second.URL)})
	resp, err := ask(t, c)
	if err != nil || resp.Message.Content != "from the fallback" || resp.AnsweredBy != "ollama/small" {
		t.Fatalf("resp %+v, err %v", resp, err)
	}
	if reqs := second.Requests(); len(reqs) != 1 || reqs[0].Model != "small" {
		t.Errorf("the fallback got %+v", reqs)
	}
	st := h.Statuses()
	if len(st) != 2 || st[1].Name != "openai:vllm" || st[1].Failures != 1 || st[1].Down || !strings.Contains(st[1].LastError, "127.0.0.1") {
		t.Errorf("statuses %+v", st)
	}
}

// TestOverloadedCoolsDown: 503s send calls to the fallback; after two in
// a row the primary is skipped until the cool-down ends, then tried
// again, and once it answers it is up.
func TestOverloadedCoolsDown(t *testing.T) {
	first := ollamatest.New(
		ollamatest.Turn{Status: 503, Error: "server busy, please try again.  maximum pending requests exceeded"},
		ollamatest.Turn{Status: 503, Error: "server busy"},
		ollamatest.Turn{Text: "the primary is back"},
	)
	defer first.Close()
	second := ollamatest.NewFunc(func(ollamatest.Request) ollamatest.Turn { return ollamatest.Turn{Text: "fallback"} })
	defer second.Close()
	clk := clock.NewFake(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	h := fallback.NewHealth(clk, time.Minute, 2)
	var fellBack []string
	c := fallback.New(h, 0,
		fallback.Target{Name: "ollama", Model: "qwen3:30b-a3b", Provider: provider(t, first.URL)},
		fallback.Target{Name: "openai:openrouter", Model: "qwen/qwen3-30b", Provider: provider(t, second.URL)})
	c.OnFallback = func(from, to fallback.Target, err error) {
		fellBack = append(fellBack, from.String()+" -> "+to.String()+": "+err.Error())
	}
	for i := range 2 {
		resp, err := ask(t, c)
		if err != nil || resp.AnsweredBy != "openai:openrouter/qwen/qwen3-30b" {
			t.Fatalf("call %d: %+v %v", i, resp, err)
		}
	}
	if len(fellBack) != 2 || !strings.Contains(fellBack[0], "HTTP 503") {
		t.Errorf("fallbacks heard: %q", fellBack)
	}
	st := h.Statuses()
	if !st[0].Down || st[0].Name != "ollama" || !st[0].Until.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("the primary should be down for a minute: %+v", st)
	}
	// Cooling down: not even asked.
	if _, err := ask(t, c); err != nil {
		t.Fatal(err)
	}
	if n := len(first.Requests()); n != 2 {
		t.Errorf("the primary was asked %d times while cooling down, want 2", n)
	}
	clk.Advance(time.Minute)
	resp, err := ask(t, c)
	if err != nil || resp.Message.Content != "the primary is back" || resp.AnsweredBy != "" {
		t.Fatalf("after the cool-down: %+v %v", resp, err)
	}
	if st := h.Statuses(); st[0].Down || st[0].Failures != 0 || st[0].LastOK.IsZero() {
		t.Errorf("the primary should be up again: %+v", st)
	}
}

func TestSilentPrimaryTimesOutToTheNext(t *testing.T) {
	first := ollamatest.New(ollamatest.Turn{Text: "too late", Delay: 30 * time.Second})
	defer first.Close()
	second := ollamatest.New(ollamatest.Turn{Text: "in time"})
	defer second.Close()
	h := fallback.NewHealth(clock.Real{}, time.Minute, 2)
	c := fallback.New(h, 300*time.Millisecond,
		fallback.Target{Name: "ollama", Model: "slow", Provider: provider(t, first.URL)},
		fallback.Target{Name: "anthropic", Model: "claude", Provider: provider(t, second.URL)})
	start := time.Now()
	resp, err := ask(t, c)
	if err != nil || resp.Message.Content != "in time" || resp.AnsweredBy != "anthropic/claude" {
		t.Fatalf("%+v %v", resp, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s: the first-token limit was not applied", d)
	}
	if st := h.Statuses(); !strings.Contains(st[1].LastError, "said nothing for 300ms") {
		t.Errorf("statuses %+v", st)
	}
}

func TestNoFallbackForTheRequestsOwnErrors(t *testing.T) {
	first := ollamatest.New()
	first.SetModels("other")
	defer first.Close()
	second := ollamatest.New(ollamatest.Turn{Text: "should not be asked"})
	defer second.Close()
	h := fallback.NewHealth(clock.Real{}, time.Minute, 2)
	c := fallback.New(h, time.Second,
		fallback.Target{Name: "ollama", Model: "missing", Provider: provider(t, first.URL)},
		fallback.Target{Name: "ollama2", Model: "m", Provider: provider(t, second.URL)})
	if _, err := ask(t, c); !errors.Is(err, model.ErrModelNotFound) {
		t.Errorf("err %v, want model not found", err)
	}
	if n := len(second.Requests()); n != 0 {
		t.Errorf("the fallback was asked %d times", n)
	}
}

func TestEveryTargetFailing(t *testing.T) {
	second := ollamatest.New(ollamatest.Turn{Status: 529, Error: "overloaded"})
	defer second.Close()
	h := fallback.NewHealth(clock.Real{}, time.Minute, 2)
	c := fallback.New(h, 0,
		fallback.Target{Name: "a", Model: "m1", Provider: provider(t, deadURL(t))},
		fallback.Target{Name: "b", Model: "m2", Provider: provider(t, second.URL)})
	_, err := ask(t, c)
	if !errors.Is(err, model.ErrUnreachable) || !model.IsTransient(err) && !errors.Is(err, model.ErrUnreachable) {
		t.Errorf("err %v: want the first target's kind", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "a/m1") || !strings.Contains(msg, "b/m2") || !strings.Contains(msg, "529") {
		t.Errorf("err %q should name every target's failure", msg)
	}
}
