package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"

	"github.com/mother-chat/mother/pkg/model"
)

var (
	_ model.Transcriber = (*Provider)(nil)
	_ model.Speaker     = (*Provider)(nil)
)

// maxTranscript bounds the answer read from a transcription (a minute of
// speech is about a kilobyte of text).
const maxTranscript = 1 << 20

// Transcribe sends the audio to POST {base}/audio/transcriptions as
// OpenAI's API takes it (whisper.cpp's server, faster-whisper-server,
// vLLM and OpenAI read the same form): a multipart form with the file
// (its name's extension tells the format), model, language when a hint is
// given, response_format json and temperature 0. It returns the text.
func (p *Provider) Transcribe(ctx context.Context, req model.TranscribeRequest) (string, error) {
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	fw, err := w.CreateFormFile("file", req.Filename)
	if err != nil {
		return "", err
	}
	fw.Write(req.Audio)
	w.WriteField("model", req.Model)
	if req.Language != "" {
		w.WriteField("language", req.Language)
	}
	w.WriteField("response_format", "json")
	w.WriteField("temperature", "0")
	if err := w.Close(); err != nil {
		return "", err
	}
	resp, err := p.audioCall(ctx, req.Model, "/audio/transcriptions", w.FormDataContentType(), body.Bytes())
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxTranscript))
	if err != nil {
		return "", p.netError(err)
	}
	var v struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.Text == nil {
		return "", fmt.Errorf("openai: %s: a transcription answer without its text: %.200s", p.where(), raw)
	}
	return strings.TrimSpace(*v.Text), nil
}

// Speak asks POST {base}/audio/speech for req.Text spoken in req.Format
// ("opus": OGG/Opus).
func (p *Provider) Speak(ctx context.Context, req model.SpeechRequest) (io.ReadCloser, error) {
	body, err := json.Marshal(map[string]any{"model": req.Model, "voice": req.Voice, "input": req.Text, "response_format": req.Format})
	if err != nil {
		return nil, err
	}
	resp, err := p.audioCall(ctx, req.Model, "/audio/speech", "application/json", body)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// audioCall posts body to path and returns a 2xx answer, or the error an
// error answer means (as Chat's are mapped).
func (p *Provider) audioCall(ctx context.Context, modelID, path, contentType string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, model.Wrap(model.ErrInvalidRequest, "openai: %s: %v", p.where(), err)
	}
	req.Header.Set("Content-Type", contentType)
	if p.key != "" {
		req.Header.Set("Authorization", "Bearer "+p.key)
	}
	p.setHeaders(req)
	resp, err := p.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, p.netError(err)
	}
	if resp.StatusCode >= http.StatusBadRequest {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		e := parseErrorBody(resp.StatusCode, raw)
		e.retry = retryAfter(resp.Header, p.clock.Now())
		return nil, p.fromServer(modelID, e, false)
	}
	return resp, nil
}
