package openai_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/openai/openaitest"
)

// TestCountTokensByTokenize: vLLM's POST /tokenize, at the server's root,
// counts the chat a call would send (system prompt, messages, tools, the
// generation prompt); a server that answers as llama.cpp does or has no
// /tokenize is not asked again; one that fails is.
func TestCountTokensByTokenize(t *testing.T) {
	req := model.Request{Model: "qwen", System: "be brief",
		Messages: []model.Message{
			{Role: model.RoleUser, Content: "list the files"},
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "t1", Name: "bash", Args: json.RawMessage(`{"command":"ls"}`)}}},
			{Role: model.RoleTool, ToolCallID: "t1", ToolName: "bash", Content: "a.txt"},
		},
		Tools: []model.ToolSpec{{Name: "bash", Description: "run", Parameters: json.RawMessage(`{"type":"object"}`)}},
	}
	t.Run("vllm", func(t *testing.T) {
		fake := openaitest.New()
		defer fake.Close()
		fake.SetTokenize(func(openaitest.Request) openaitest.Tokenize { return openaitest.Tokenize{Count: 1234} })
		n, err := newProvider(t, fake).CountTokens(t.Context(), req)
		if err != nil || n != 1234 {
			t.Fatalf("count %d, %v; want 1234", n, err)
		}
		got := fake.TokenizeRequests()
		if len(got) != 1 || len(fake.Requests()) != 0 {
			t.Fatalf("%d tokenize and %d chat requests, want 1 and 0", len(got), len(fake.Requests()))
		}
		r := got[0]
		if r.Model != "qwen" || r.System() != "be brief" || len(r.Messages) != 4 || len(r.Tools) != 1 || string(r.Extra["add_generation_prompt"]) != "true" {
			t.Errorf("tokenize request %s", r.Body)
		}
		if _, ok := r.Extra["max_tokens"]; ok || r.Stream {
			t.Errorf("tokenize request %s carries a call's fields", r.Body)
		}
	})
	for _, tc := range []struct {
		name string
		t    openaitest.Tokenize
		// asked is how many requests two counts make.
		asked int
	}{
		{"llama.cpp", openaitest.Tokenize{LlamaCpp: true}, 1},
		{"none", openaitest.Tokenize{Status: http.StatusNotFound}, 1},
		{"failing", openaitest.Tokenize{Status: http.StatusInternalServerError}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := openaitest.New()
			defer fake.Close()
			fake.SetTokenize(func(openaitest.Request) openaitest.Tokenize { return tc.t })
			p := newProvider(t, fake)
			for range 2 {
				if n, err := p.CountTokens(t.Context(), req); err == nil {
					t.Fatalf("count %d, want an error", n)
				}
			}
			if got := len(fake.TokenizeRequests()); got != tc.asked {
				t.Errorf("%d tokenize requests, want %d", got, tc.asked)
			}
		})
	}
	t.Run("no route", func(t *testing.T) {
		fake := openaitest.New() // 404 as OpenAI
		defer fake.Close()
		p := newProvider(t, fake)
		_, err := p.CountTokens(t.Context(), req)
		if err == nil || errors.Is(err, model.ErrUnreachable) {
			t.Errorf("count from a server without /tokenize: %v", err)
		}
	})
}
