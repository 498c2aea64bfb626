package termtext

import (
	"bytes"
	"fmt"
	"io"
	"unicode/utf8"
)

// JSON is encoded JSON with every control character but newline and tab
// written as a \u escape. encoding/json and slog's JSON handler escape the
// C0 controls (ESC is \u001b) but write DEL and U+0080 to U+009F as they
// are, and U+009B is CSI to a terminal. A byte that is not UTF-8 (a lone
// 0x9B is CSI on an 8-bit terminal) becomes \ufffd. Outside its strings
// JSON is printable ASCII, so each escape lands in a string, whose value
// it keeps.
func JSON(b []byte) []byte {
	if !bytes.ContainsFunc(b, func(r rune) bool { return needs(r) || r == utf8.RuneError }) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, `\ufffd`...)
		case needs(r):
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}

// jsonWriter passes each write through JSON.
type jsonWriter struct{ w io.Writer }

// NewJSONWriter returns a writer that passes each write through JSON: for
// a log handler that writes one whole record per write (slog's do).
func NewJSONWriter(w io.Writer) io.Writer { return jsonWriter{w} }

func (j jsonWriter) Write(p []byte) (int, error) {
	if _, err := j.w.Write(JSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
