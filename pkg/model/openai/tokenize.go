package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/mother-chat/mother/pkg/model"
)

// vLLM counts a chat's prompt tokens without running the model: POST
// /tokenize at the server's root, with the messages and tools of a chat
// request, answers {"count", "max_model_len", "tokens"}. The count is the
// server's own tokenizer over the model's chat template, so it is the
// prompt a call of the same request sends. llama.cpp's /tokenize takes
// text only ("content") and answers {"tokens": []} to a chat; OpenAI and
// most gateways have no /tokenize. Once a server shows it has none, it is
// not asked again.

// errNoTokenize: the server has no chat /tokenize.
var errNoTokenize = errors.New("the server does not count a chat's tokens")

type tokenizeRequest struct {
	Model               string        `json:"model"`
	Messages            []wireMessage `json:"messages"`
	Tools               []wireTool    `json:"tools,omitempty"`
	AddGenerationPrompt bool          `json:"add_generation_prompt"`
}

// CountTokens implements model.TokenCounter with vLLM's POST /tokenize.
func (p *Provider) CountTokens(ctx context.Context, req model.Request) (int, error) {
	if p.noTokenize.Load() {
		return 0, errNoTokenize
	}
	tools, err := toTools(req.Tools)
	if err != nil {
		return 0, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tokenizeRequest{Model: req.Model, Messages: toMessages(req.System, req.Messages), Tools: tools, AddGenerationPrompt: true}); err != nil {
		return 0, model.Wrap(model.ErrInvalidRequest, "openai: %v", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, p.root()+"/tokenize", &buf)
	if err != nil {
		return 0, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	if p.key != "" {
		hr.Header.Set("Authorization", "Bearer "+p.key)
	}
	p.setHeaders(hr)
	resp, err := p.http.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, p.netError(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, p.netError(err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
		p.noTokenize.Store(true)
		return 0, errNoTokenize
	default:
		e := parseErrorBody(resp.StatusCode, body)
		return 0, fmt.Errorf("%s: tokenize: HTTP %d: %s", p.where(), resp.StatusCode, e.msg)
	}
	var v struct {
		Count *int `json:"count"`
	}
	if json.Unmarshal(body, &v) != nil || v.Count == nil {
		// llama.cpp's answer to a chat, or no tokenizer at all.
		p.noTokenize.Store(true)
		return 0, errNoTokenize
	}
	if *v.Count <= 0 {
		return 0, fmt.Errorf("%s: tokenize counted %d tokens", p.where(), *v.Count)
	}
	return *v.Count, nil
}
