package ollama

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"

	"github.com/ollama/ollama/api"
)

// The official client's stream (api.Client.Chat) allocates an 8 MB line
// buffer for every call, which a Pi pays in zeroed pages and GC cycles on
// every model call. chatStream is the same /api/chat exchange with the
// same official request and response types, the same error values
// (api.StatusError, api.AuthorizationError) and the same 8 MB line limit,
// but it reads lines through a pooled 64 KiB reader and grows a line
// buffer only as far as a line needs. Requests that need the official
// client's request signing (ollama.com, OLLAMA_AUTH) still go through it.

// maxLine is the official client's limit on one streamed line.
const maxLine = 8 << 20

var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

// needsSigning mirrors when the official client signs a request.
func needsSigning(u *url.URL) bool {
	if u.Hostname() == "ollama.com" {
		return true
	}
	v, err := strconv.ParseBool(os.Getenv("OLLAMA_AUTH"))
	return err == nil && v
}

// chatStream posts req to /api/chat and calls fn for each streamed
// response, as api.Client.Chat does.
func chatStream(ctx context.Context, hc *http.Client, base *url.URL, req *api.ChatRequest, fn func(api.ChatResponse) error) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, base.JoinPath("/api/chat").String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/x-ndjson")
	hreq.Header.Set("User-Agent", "mother (ollama api)")
	resp, err := hc.Do(hreq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	br := readers.Get().(*bufio.Reader)
	br.Reset(resp.Body)
	defer func() {
		br.Reset(nil)
		readers.Put(br)
	}()
	var long []byte // a line longer than the reader's buffer
	lines := 0
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long)+len(chunk) > maxLine {
				return bufio.ErrTooLong
			}
			long = append(long, chunk...)
			continue
		}
		line := chunk
		if long != nil {
			line = append(long, chunk...)
			long = nil
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > maxLine {
			return bufio.ErrTooLong
		}
		if len(line) > 0 {
			lines++
			if ferr := chatLine(resp, line, fn); ferr != nil {
				return ferr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if lines == 0 && resp.StatusCode >= http.StatusBadRequest {
					return api.StatusError{StatusCode: resp.StatusCode, Status: resp.Status}
				}
				return nil
			}
			return err
		}
	}
}

// chatLine handles one line as the official client's stream does: an
// error object or a status of 400 and above is an error, else a response.
func chatLine(resp *http.Response, line []byte, fn func(api.ChatResponse) error) error {
	var e struct {
		Error     string `json:"error,omitempty"`
		SigninURL string `json:"signin_url,omitempty"`
	}
	if err := json.Unmarshal(line, &e); err != nil {
		if resp.StatusCode >= http.StatusBadRequest {
			return api.StatusError{StatusCode: resp.StatusCode, Status: resp.Status, ErrorMessage: string(line)}
		}
		return errors.New(string(line))
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return api.AuthorizationError{StatusCode: resp.StatusCode, Status: resp.Status, SigninURL: e.SigninURL}
	case resp.StatusCode >= http.StatusBadRequest:
		return api.StatusError{StatusCode: resp.StatusCode, Status: resp.Status, ErrorMessage: e.Error}
	case e.Error != "":
		return errors.New(e.Error)
	}
	var r api.ChatResponse
	if err := json.Unmarshal(line, &r); err != nil {
		return fmt.Errorf("ollama: response line: %w", err)
	}
	return fn(r)
}
