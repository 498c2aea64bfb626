package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/mother-chat/mother/pkg/model"
)

// MaxTrainedWindow caps a window taken from a model's trained context
// length (llama.cpp's n_ctx_train): the trained length is not what the
// server holds (llama-server's -c), and a model trained for 256k tokens
// planned for as such would overflow a server started with 8k. The
// window a server reports it holds (vLLM's max_model_len, llama.cpp's
// /props n_ctx, LM Studio's loaded length) and a configured one are used
// as they are. The Ollama provider caps its trained lengths the same way.
const MaxTrainedWindow = 32768

// ContextWindow is the model's window in tokens, the first of: the
// model's configured ContextWindow; what the server reports (GET
// {base}/models: vLLM's and SGLang's max_model_len, OpenRouter's
// context_length, llama.cpp's meta; for llama.cpp, GET /props's
// default_generation_settings.n_ctx, the window the server was started
// with; LM Studio's GET /api/v0/models/{model}: loaded_context_length,
// else max_context_length); Options.ContextWindow; DefaultContextWindow.
// The answer is cached per model. It fails only when the server cannot be
// reached.
func (p *Provider) ContextWindow(ctx context.Context, name string) (int, error) {
	if mc := p.models[name]; mc.window > 0 {
		return mc.window, nil
	}
	p.mu.Lock()
	n, ok := p.windows[name]
	p.mu.Unlock()
	if ok {
		return n, nil
	}
	n, err := p.askWindow(ctx, name)
	if err != nil {
		return 0, err
	}
	if n <= 0 {
		n = p.window
	}
	p.mu.Lock()
	p.windows[name] = n
	p.mu.Unlock()
	return n, nil
}

// askWindow asks the server for name's window; 0 when it does not say.
func (p *Provider) askWindow(ctx context.Context, name string) (int, error) {
	entries, err := p.modelList(ctx)
	if err != nil && !isAnswer(err) {
		return 0, p.listError(ctx, err)
	}
	var found *modelEntry
	for i := range entries {
		if entries[i].ID == name {
			found = &entries[i]
		}
	}
	// llama-server serves its one model whatever the request names.
	if found == nil && len(entries) == 1 && entries[0].Meta != nil {
		found = &entries[0]
	}
	if found != nil && found.Meta == nil {
		if n := found.window(); n > 0 {
			return n, nil
		}
	}
	// llama.cpp (or a server whose list did not say): /props tells the
	// window the server holds.
	if n := p.propsWindow(ctx); n > 0 {
		return n, nil
	}
	if found != nil {
		if n := found.window(); n > 0 {
			return n, nil
		}
	}
	return p.lmStudioWindow(ctx, name), nil
}

// ListModels lists the models GET {base}/models reports, in its order
// (for `mother setup`).
func (p *Provider) ListModels(ctx context.Context) ([]ModelInfo, error) {
	entries, err := p.modelList(ctx)
	if err != nil {
		return nil, p.listError(ctx, err)
	}
	out := make([]ModelInfo, 0, len(entries))
	for _, e := range entries {
		out = append(out, ModelInfo{ID: e.ID, ContextWindow: e.window()})
	}
	return out, nil
}

// modelEntry is a model object of GET /models, as the servers fill it:
//
//	vLLM, SGLang: {"id", "object": "model", "owned_by", "max_model_len"}
//	llama.cpp:    {"id", "object": "model", "owned_by": "llamacpp",
//	               "meta": {"n_ctx_train", "n_vocab", ...}}
//	OpenRouter:   {"id", "name", "context_length", ...}
//	OpenAI, LM Studio: {"id", "object": "model", "owned_by"}
type modelEntry struct {
	ID            string `json:"id"`
	MaxModelLen   num    `json:"max_model_len"`
	ContextLength num    `json:"context_length"`
	Meta          *struct {
		NCtx      num `json:"n_ctx"` // some builds report the window held too
		NCtxTrain num `json:"n_ctx_train"`
	} `json:"meta"`
}

// window is what the entry says of the model's window; 0 for nothing.
func (e modelEntry) window() int {
	switch {
	case e.MaxModelLen > 0:
		return int(e.MaxModelLen)
	case e.ContextLength > 0:
		return int(e.ContextLength)
	case e.Meta != nil && e.Meta.NCtx > 0:
		return int(e.Meta.NCtx)
	case e.Meta != nil && e.Meta.NCtxTrain > 0:
		return min(int(e.Meta.NCtxTrain), MaxTrainedWindow)
	}
	return 0
}

// num is a number member that may be null, a string or missing (read as
// 0): a field one server fills in is not worth failing another's list.
type num int

func (n *num) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(bytes.TrimSpace(b)), `"`)
	if f, err := strconv.ParseFloat(s, 64); err == nil && f > 0 {
		*n = num(f)
	}
	return nil
}

// modelList is GET {base}/models's list. Entries that do not decode are left
// out.
func (p *Provider) modelList(ctx context.Context) ([]modelEntry, error) {
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := p.getJSON(ctx, p.base+"/models", &list); err != nil {
		return nil, err
	}
	entries := make([]modelEntry, 0, len(list.Data))
	for _, raw := range list.Data {
		var e modelEntry
		if json.Unmarshal(raw, &e) == nil && e.ID != "" {
			entries = append(entries, e)
		}
	}
	return entries, nil
}

// root is the server's root, the base without its /v1: where llama.cpp's
// /props and LM Studio's /api/v0 are.
func (p *Provider) root() string { return strings.TrimSuffix(p.base, "/v1") }

// propsWindow is llama.cpp's GET /props default_generation_settings.n_ctx
// (0 from a server without it).
func (p *Provider) propsWindow(ctx context.Context) int {
	var props struct {
		Settings struct {
			NCtx num `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	if p.getJSON(ctx, p.root()+"/props", &props) != nil {
		return 0
	}
	return int(props.Settings.NCtx)
}

// lmStudioWindow is LM Studio's GET /api/v0/models/{model}: the length the
// model is loaded with, else its maximum (0 from a server without it).
func (p *Provider) lmStudioWindow(ctx context.Context, name string) int {
	var m struct {
		Loaded num `json:"loaded_context_length"`
		Max    num `json:"max_context_length"`
	}
	if p.getJSON(ctx, p.root()+"/api/v0/models/"+url.PathEscape(name), &m) != nil {
		return 0
	}
	if m.Loaded > 0 {
		return int(m.Loaded)
	}
	return int(m.Max)
}

// getJSON GETs u with the endpoint's key and headers and decodes the
// answer into v. An error answer is a *serverError.
func (p *Provider) getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if p.key != "" {
		req.Header.Set("Authorization", "Bearer "+p.key)
	}
	p.setHeaders(req)
	resp, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// OpenRouter's list of every model is about a megabyte.
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		e := parseErrorBody(resp.StatusCode, body)
		return &e
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%s: %w", u, err)
	}
	return nil
}

// isAnswer reports whether err is the server answering (an error status,
// a body that does not decode) rather than not being reached.
func isAnswer(err error) bool {
	var se *serverError
	var je *json.SyntaxError
	var te *json.UnmarshalTypeError
	return errors.As(err, &se) || errors.As(err, &je) || errors.As(err, &te)
}

// listError maps an error of GET /models.
func (p *Provider) listError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var se *serverError
	if !errors.As(err, &se) {
		if isAnswer(err) {
			return fmt.Errorf("openai: %s: the model list: %v", p.where(), err)
		}
		return p.netError(err)
	}
	switch {
	case se.status == http.StatusUnauthorized || se.status == http.StatusForbidden:
		return p.fromServer("", *se, false)
	case transientStatus(se.status):
		return &model.TransientError{Err: fmt.Errorf("openai: %s: the model list: %w", p.where(), &StatusError{Code: se.status, Msg: se.msg})}
	}
	return fmt.Errorf("openai: %s: the model list: HTTP %d: %s", p.where(), se.status, se.msg)
}

// Ping lists the server's models: it answers, or it does not.
func (p *Provider) Ping(ctx context.Context) error {
	_, err := p.ListModels(ctx)
	return err
}
