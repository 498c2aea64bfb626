package openaitest

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// post sends body to the fake's chat endpoint.
func post(t *testing.T, s *Server, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(s.BaseURL()+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestStreamShape: the answer is server-sent events, data lines of
// chunks, the usage chunk with no choices when asked, then [DONE].
func TestStreamShape(t *testing.T) {
	s := New(Turn{Text: "hello", Calls: []Call{{Name: "a", Args: map[string]any{"x": 1}}, {Name: "b"}}, ArgsChunk: 2})
	defer s.Close()
	resp := post(t, s, `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) < 4 || lines[len(lines)-1] != "data: [DONE]" {
		t.Fatalf("lines = %q", lines)
	}
	var indexes []int
	for _, l := range lines[:len(lines)-1] {
		var c struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Index int `json:"index"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				Prompt int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if !strings.HasPrefix(l, "data: ") || json.Unmarshal([]byte(strings.TrimPrefix(l, "data: ")), &c) != nil || c.Object != "chat.completion.chunk" {
			t.Fatalf("line %q is not a chunk", l)
		}
		for _, ch := range c.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				indexes = append(indexes, tc.Index)
			}
		}
	}
	// The opening fragments of calls 0 and 1, then the pieces of their
	// arguments in turn: {"x":1} in four pieces of two bytes, {} in one.
	if got, want := fmtInts(indexes), fmtInts([]int{0, 1, 0, 1, 0, 0, 0}); got != want {
		t.Errorf("fragment indexes %s, want %s", got, want)
	}
	last := lines[len(lines)-2]
	if !strings.Contains(last, `"choices":[]`) || !strings.Contains(last, `"usage"`) {
		t.Errorf("usage line %q", last)
	}
}

func fmtInts(v []int) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestNotStreamed(t *testing.T) {
	s := New(Turn{Text: "whole", Calls: []Call{{Name: "a"}}})
	defer s.Close()
	resp := post(t, s, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`)
	var c struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Content   string            `json:"content"`
				ToolCalls []json.RawMessage `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	if c.Object != "chat.completion" || len(c.Choices) != 1 || c.Choices[0].Message.Content != "whole" ||
		len(c.Choices[0].Message.ToolCalls) != 1 || c.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("answer = %+v", c)
	}
	if r := s.Requests()[0]; r.LastUser() != "hi" || r.Stream {
		t.Errorf("request = %+v", r)
	}
}

func TestKeyAndUnknownModel(t *testing.T) {
	s := New()
	defer s.Close()
	s.SetModels(Model{ID: "known"})
	resp := post(t, s, `{"model":"other","stream":true,"messages":[]}`)
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    int    `json:"code"`
		} `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != http.StatusNotFound || e.Error.Message != "The model `other` does not exist." || e.Error.Type != "NotFoundError" || e.Error.Code != 404 {
		t.Errorf("unknown model: %d %+v", resp.StatusCode, e)
	}
	s.SetKey("k")
	if resp := post(t, s, `{"model":"known","messages":[]}`); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no key: %d", resp.StatusCode)
	}
}
