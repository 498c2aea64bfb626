package main

import (
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/openai/openaitest"
	"github.com/mother-chat/mother/pkg/store"
)

// Mother on OpenAI-compatible servers (issue 33), through the binary and
// the real client library against a wire-level fake of the
// chat-completions API: no Ollama anywhere (MOTHER_OLLAMA_URL points at a
// port nothing listens on).

// writeConfig writes data/config.json from v.
func writeConfig(t *testing.T, data string, v map[string]any) {
	t.Helper()
	b, _ := json.MarshalIndent(v, "", "  ")
	if err := os.WriteFile(filepath.Join(data, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

const openaiKey = "sk-vllm-TESTKEY-0123456789"

// deadURL is an http:// address on loopback that nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// TestTerminalOnOpenAIProvider: Mother's model is a vLLM endpoint. Its
// reasoning_content never reaches the terminal or the context; a tool
// call streamed in fragments is made; the key goes as a bearer token; an
// answer without usage is estimated.
func TestTerminalOnOpenAIProvider(t *testing.T) {
	t.Parallel()
	fake := openaitest.NewFunc(func(r openaitest.Request) openaitest.Turn {
		for _, m := range r.Messages {
			if m.Role == "tool" {
				return openaitest.Turn{Text: "Nothing is scheduled, and hello from vLLM.", NoUsage: true}
			}
		}
		return openaitest.Turn{Reasoning: "The user greets me. SECRET-REASONING: check the events first.",
			Calls: []openaitest.Call{{Name: "list_events", Args: map[string]any{"label": "Looking at the events"}}}}
	})
	defer fake.Close()
	fake.SetKey(openaiKey)
	fake.SetModels(openaitest.Model{ID: "Qwen/Qwen3-14B", MaxModelLen: 40960})
	data := t.TempDir()
	writeConfig(t, data, map[string]any{
		"providers": map[string]any{"openai": map[string]any{"vllm": map[string]any{"baseURL": fake.BaseURL(), "apiKeyEnv": "VLLM_KEY"}}},
		"model":     map[string]any{"provider": "openai:vllm", "id": "Qwen/Qwen3-14B"},
	})
	r := runMother(t, "hello there\n", []string{"MOTHER_OLLAMA_URL=" + deadURL(t), "VLLM_KEY=" + openaiKey}, "--cli", "--log-level", "info", data)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "Nothing is scheduled, and hello from vLLM.") || strings.Contains(r.stdout, "SECRET-REASONING") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d chat requests, want 2", len(reqs))
	}
	for _, req := range reqs {
		if req.Header.Get("Authorization") != "Bearer "+openaiKey || req.Model != "Qwen/Qwen3-14B" || !req.Stream {
			t.Errorf("request: model %q, auth %q, stream %v", req.Model, req.Header.Get("Authorization"), req.Stream)
		}
	}
	var sawCall, sawResult bool
	for _, m := range reqs[1].Messages {
		if m.Role == "assistant" && len(m.ToolCalls) == 1 && m.ToolCalls[0].Function.Name == "list_events" {
			sawCall = true
		}
		if m.Role == "tool" && strings.Contains(m.Text(), "No events") {
			sawResult = true
		}
		if strings.Contains(string(m.Content), "SECRET-REASONING") {
			t.Errorf("the reasoning went back to the model: %s", m.Content)
		}
	}
	if !sawCall || !sawResult {
		t.Errorf("the second request lacks the call or its result: %+v", reqs[1].Messages)
	}
	for _, rec := range readContext(t, data) {
		if rec.Type == store.RecordMessage && strings.Contains(rec.Message.Content, "SECRET-REASONING") {
			t.Errorf("context.jsonl holds the reasoning: %+v", rec.Message)
		}
	}
	// The second answer had no usage: it was estimated, not taken as 0.
	if !strings.Contains(r.stderr, `msg="run ended"`) || strings.Contains(r.stderr, "tokens_out=0 ") {
		t.Errorf("Mother's run log:\n%s", r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, openaiKey) {
		t.Error("the key was printed")
	}
}

// TestTerminalFallbacks: Mother's model on an endpoint that answers 503
// has a fallback. Each 503 sends the call to the fallback and the
// terminal says which answered; after two in a row the endpoint is skipped
// for the cool-down (not even asked), and momctl status shows it down. A
// primary that is not listening at all falls back the same way.
func TestTerminalFallbacks(t *testing.T) {
	t.Parallel()
	primary := openaitest.NewFunc(func(openaitest.Request) openaitest.Turn {
		return openaitest.Turn{Status: 503, Error: "The server is overloaded", ErrorType: "ServiceUnavailableError", RetryAfter: "30"}
	})
	defer primary.Close()
	var mu sync.Mutex
	answers := 0
	backup := openaitest.NewFunc(func(openaitest.Request) openaitest.Turn {
		mu.Lock()
		defer mu.Unlock()
		answers++
		return openaitest.Turn{Text: "backup answer " + string(rune('0'+answers))}
	})
	defer backup.Close()
	data := t.TempDir()
	writeConfig(t, data, map[string]any{
		"providers": map[string]any{
			"openai": map[string]any{
				"primary": map[string]any{"baseURL": primary.BaseURL()},
				"backup":  map[string]any{"baseURL": backup.BaseURL()},
			},
			"cooldown": "10m",
		},
		"model": map[string]any{"provider": "openai:primary", "id": "big", "fallbacks": []any{map[string]any{"provider": "openai:backup", "model": "small"}}},
		"grpc":  map[string]any{"listen": freePort(t)},
	})
	p := startMotherBinary(t, motherBin, data, []string{"MOTHER_OLLAMA_URL=" + deadURL(t)})
	for i, want := range []string{"backup answer 1", "backup answer 2", "backup answer 3"} {
		io.WriteString(p.stdin, "question "+string(rune('1'+i))+"\n")
		p.waitOut(t, want, time.Minute)
	}
	if n := len(primary.Requests()); n != 2 {
		t.Errorf("the primary was asked %d times, want 2 (then skipped while it cools down)", n)
	}
	out := p.out()
	if strings.Count(out, "(answered by fallback openai:backup/small)") != 3 {
		t.Errorf("the terminal should say three times which model answered:\n%s", out)
	}
	st, code := momctl(t, data, "status")
	if code != 0 || !strings.Contains(st, "MODEL PROVIDERS") || !strings.Contains(st, "openai:primary") || !strings.Contains(st, "DOWN, skipped for") ||
		!strings.Contains(st, "overloaded") {
		t.Errorf("momctl status (exit %d):\n%s", code, st)
	}
	if !strings.Contains(p.errs(), "model call goes to a fallback") {
		t.Errorf("Mother's log does not say she fell back:\n%s", p.errs())
	}
	p.stdin.Close()
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.errs())
	}

	// A primary nothing listens on.
	data2 := t.TempDir()
	writeConfig(t, data2, map[string]any{
		"providers": map[string]any{"openai": map[string]any{"gone": map[string]any{"baseURL": deadURL(t) + "/v1"}, "backup": map[string]any{"baseURL": backup.BaseURL()}}},
		"model":     map[string]any{"provider": "openai:gone", "id": "big", "fallbacks": []any{map[string]any{"provider": "openai:backup", "model": "small"}}},
	})
	r := runMother(t, "anyone there?\n", []string{"MOTHER_OLLAMA_URL=" + deadURL(t)}, "--cli", data2)
	if r.code != 0 || !strings.Contains(r.stdout, "backup answer") || !strings.Contains(r.stdout, "(answered by fallback openai:backup/small)") {
		t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestChickOnOpenAITier: with no Ollama, Mother and a chick tier both on
// OpenAI-compatible endpoints; the tier's own endpoint answers 503, so
// the broker sends the chick's calls to the tier's fallback, whose tool
// call (in fragments) runs in the container; the chick's usage line says
// which model answered, and the budgets count its tokens.
func TestChickOnOpenAITier(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	main := openaitest.NewFunc(func(r openaitest.Request) openaitest.Turn {
		switch r.Model {
		case motherModel:
			for _, m := range r.Messages {
				if m.Role == "tool" {
					return openaitest.Turn{Text: "A chick is on it."}
				}
			}
			return openaitest.Turn{Calls: []openaitest.Call{{Name: "spawn_chick", Args: map[string]any{"label": "delegating", "goal": "Compute 6*7 in the shell."}}}}
		case chickModel:
			return openaitest.Turn{Status: 503, Error: "no capacity", RetryAfter: "5"}
		}
		return openaitest.Turn{Status: 404, Error: "The model `" + r.Model + "` does not exist.", ErrorType: "NotFoundError", ErrorCode: 404}
	})
	defer main.Close()
	spare := openaitest.NewFunc(func(r openaitest.Request) openaitest.Turn {
		for _, m := range r.Messages {
			if m.Role == "tool" {
				return openaitest.Turn{Reasoning: "CHICK-REASONING", Text: "Chick says: " + strings.Join(strings.Fields(m.Text()), " ")}
			}
		}
		return openaitest.Turn{Calls: []openaitest.Call{{Name: "bash", Args: map[string]any{"label": "compute", "command": "echo result=$((6*7))"}}}}
	})
	defer spare.Close()
	data, _ := chickData(t, api, map[string]any{
		"providers": map[string]any{"openai": map[string]any{
			"gpu":   map[string]any{"baseURL": main.BaseURL()},
			"spare": map[string]any{"baseURL": spare.BaseURL()},
		}},
		"model": map[string]any{"provider": "openai:gpu", "id": motherModel},
	})
	// The tier, on the endpoint, with its fallback (chickData's tier is
	// rewritten).
	b, _ := os.ReadFile(filepath.Join(data, "config.json"))
	var cfg map[string]any
	json.Unmarshal(b, &cfg)
	cfg["chicks"].(map[string]any)["tiers"] = map[string]any{"local": map[string]any{"provider": "openai:gpu", "model": chickModel, "description": "the test tier",
		"fallbacks": []any{map[string]any{"provider": "openai:spare", "model": "spare-m"}}}}
	writeConfig(t, data, cfg)

	p := startChickMother(t, data, []string{"MOTHER_OLLAMA_URL=" + deadURL(t)})
	io.WriteString(p.stdin, "please compute it\n")
	p.waitOut(t, "Chick says: result=42", 2*time.Minute)
	p.waitOut(t, "answered by fallback openai:spare/spare-m", time.Minute)
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, p.out(), p.errs())
	}
	if strings.Contains(p.out(), "CHICK-REASONING") {
		t.Errorf("the chick's reasoning was shown:\n%s", p.out())
	}
	if n := len(spare.Requests()); n < 2 {
		t.Errorf("the fallback answered %d of the chick's calls", n)
	}
	// The budgets counted the fallback's tokens under the tier.
	ledger, _ := filepath.Glob(filepath.Join(data, "chicks", "usage", "*.jsonl"))
	var settled int64
	for _, f := range ledger {
		for _, line := range readLines(t, f) {
			var e struct {
				Kind string `json:"kind"`
				Tier string `json:"tier"`
				In   int64  `json:"in"`
			}
			if json.Unmarshal([]byte(line), &e) == nil && e.Kind == "" && e.Tier == "local" {
				settled += e.In
			}
		}
	}
	if settled == 0 {
		t.Errorf("the usage ledger counts no input tokens for the chick's calls (%v)", ledger)
	}
}
