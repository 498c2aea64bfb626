package termtext

import (
	"io"
	"sync"
	"unicode/utf8"
)

// Writer passes what is written through String to the writer under it,
// for output that arrives in pieces (a container's log, a table): a
// character split between two writes is held until its end arrives.
// Flush writes a character left incomplete. It is safe for
// concurrent use.
type Writer struct {
	mu      sync.Mutex
	w       io.Writer
	pending []byte // the start of a UTF-8 sequence, at most 3 bytes
	buf     []byte // the held character and the next write, joined
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write implements io.Writer. It reports len(p) once the inert form of
// p (but an incomplete last character, held) is written.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	data := p
	if len(w.pending) > 0 {
		data = append(append(w.buf[:0], w.pending...), p...)
		w.buf = data[:0] // reused by the next write that follows a held character
		w.pending = w.pending[:0]
	}
	// Hold an incomplete character at the end.
	cut := len(data)
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				cut = i
			}
			break
		}
	}
	w.pending = append(w.pending, data[cut:]...)
	out := String(string(data[:cut]))
	if _, err := io.WriteString(w.w, out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes an incomplete character held from the last write (as
// U+FFFD, one for each byte, as String does).
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) == 0 {
		return nil
	}
	out := String(string(w.pending))
	w.pending = w.pending[:0]
	_, err := io.WriteString(w.w, out)
	return err
}
