package ollamatest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
)

// rawChunks posts a chat request to s over a plain TCP connection and
// returns the HTTP chunks of the answer's body as they came, framing kept.
func rawChunks(t *testing.T, s *Server) []string {
	t.Helper()
	conn, err := net.Dial("tcp", s.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"model":"qwen3:14b","messages":[{"role":"user","content":"hi"}]}`
	fmt.Fprintf(conn, "POST /api/chat HTTP/1.1\r\nHost: fake\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	br := bufio.NewReader(conn)
	chunked := false
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.EqualFold(strings.TrimSpace(l), "Transfer-Encoding: chunked") {
			chunked = true
		}
		if l == "\r\n" {
			break
		}
	}
	if !chunked {
		t.Fatal("the answer is not chunked")
	}
	var chunks []string
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(l), 16, 64)
		if err != nil {
			t.Fatalf("chunk size %q: %v", l, err)
		}
		if n == 0 {
			return chunks
		}
		data := make([]byte, n+2) // and its CRLF
		if _, err := io.ReadFull(br, data); err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, string(data[:n]))
	}
}

// TestRawAnswerCutsEveryLine: a raw turn's lines arrive whole and in order,
// and each line is cut by a chunk boundary strictly inside it (never at
// its start or end), at places that differ from line to line.
func TestRawAnswerCutsEveryLine(t *testing.T) {
	t.Parallel()
	lines := []string{
		`{"model":"qwen3:14b","created_at":"2026-01-01T00:00:00.1Z","message":{"role":"assistant","content":"\u003cthi"},"done":false}`,
		`{"model":"qwen3:14b","created_at":"2026-01-01T00:00:00.2Z","message":{"role":"assistant","content":"nk\u003e"},"done":false}`,
		`{"model":"qwen3:14b","created_at":"2026-01-01T00:00:00.3Z","message":{"role":"assistant","content":"\n"},"done":false}`,
		`{"model":"qwen3:14b","created_at":"2026-01-01T00:00:00.4Z","message":{"role":"assistant","content":"ok"},"done":false}`,
		`{"model":"qwen3:14b","created_at":"2026-01-01T00:00:00.5Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":3,"eval_count":4}`,
	}
	s := New(Turn{Raw: lines})
	defer s.Close()
	chunks := rawChunks(t, s)
	if got, want := strings.Join(chunks, ""), strings.Join(lines, "\n")+"\n"; got != want {
		t.Fatalf("body:\n got %q\nwant %q", got, want)
	}
	cuts := map[int]bool{} // chunk ends, as offsets into the body
	off := 0
	for _, c := range chunks {
		off += len(c)
		cuts[off] = true
	}
	start := 0
	where := map[int]bool{} // each line's cut, as a share of its length in percent
	for i, l := range lines {
		end := start + len(l) // the line's newline is at end
		inside := -1
		for o := start + 1; o < end; o++ {
			if cuts[o] {
				inside = o
			}
		}
		if inside < 0 {
			t.Errorf("line %d reached the client in one piece", i+1)
		} else {
			where[(inside-start)*100/len(l)] = true
		}
		start = end + 1
	}
	if len(where) < 3 {
		t.Errorf("lines cut at %v of their length: want the place to vary", where)
	}
	// Truncate leaves out the done line.
	s.Push(Turn{Raw: lines, Truncate: true})
	if got, want := strings.Join(rawChunks(t, s), ""), strings.Join(lines[:4], "\n")+"\n"; got != want {
		t.Errorf("truncated body:\n got %q\nwant %q", got, want)
	}
}
