package termtext

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "hello, wörld ✓", "hello, wörld ✓"},
		{"newline and tab", "a\tb\nc", "a\tb\nc"},
		{"window title by BEL", "\x1b]0;pwned\x07 ok", "^[]0;pwned^G ok"},
		{"window title by ST", "\x1b]2;pwned\x1b\\ ok", "^[]2;pwned^[\\ ok"},
		{"clear screen", "\x1b[2Jgone", "^[[2Jgone"},
		{"clipboard", "\x1b]52;c;cm0gLXJmIH4K\x07", "^[]52;c;cm0gLXJmIH4K^G"},
		{"C1 CSI", "\u009b31mred", "^[[31mred"},
		{"C1 OSC and ST", "\u009d0;t\u009c", "^[]0;t^[\\"},
		{"DCS", "\x1bPq#0\x1b\\", "^[Pq#0^[\\"},
		{"APC PM SOS", "\x1b_a\x1b^b\x1bXc", "^[_a^[^b^[Xc"},
		{"unterminated OSC keeps the rest", "\x1b]0;title and then the text", "^[]0;title and then the text"},
		{"CR and backspace", "safe\rEVIL\b", "safe^MEVIL^H"},
		{"NUL and DEL", "a\x00b\x7f", "a^@b^?"},
		{"lone C1 byte", "a\x9b2Jb", "a\uFFFD2Jb"},
		{"truncated UTF-8", "a\xc2", "a\uFFFD"},
		{"U+FFFD itself", "\uFFFD", "\uFFFD"},
		{"caret text stays", "^[[2J", "^[[2J"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := String(tt.in); got != tt.want {
				t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got := String(tt.want); got != tt.want {
				t.Errorf("String(%q) = %q, not idempotent", tt.want, got)
			}
			if Clean(tt.in) != (tt.in == tt.want) {
				t.Errorf("Clean(%q) = %v, want %v", tt.in, Clean(tt.in), tt.in == tt.want)
			}
		})
	}
}

// inert reports what in s a terminal would obey: a C0 control but
// newline and tab, DEL, a C1 control, or a byte that is not UTF-8.
func inert(s string) string {
	if !utf8.ValidString(s) {
		return "invalid UTF-8"
	}
	for _, r := range s {
		if r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r <= 0x9f {
			return fmt.Sprintf("control %U", r)
		}
	}
	return ""
}

func FuzzString(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b]0;pwned\x07", "\x1b[2J", "\u009b31m", "\x9b", "a\xc2", "\x1b]52;c;QQ==\x1b\\", "\r\n\t\x00\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := String(s)
		if why := inert(got); why != "" {
			t.Fatalf("String(%q) = %q: %s", s, got, why)
		}
		if strings.ContainsAny(got, "\x1b\x07") {
			t.Fatalf("String(%q) = %q holds ESC or BEL", s, got)
		}
		if again := String(got); again != got {
			t.Fatalf("String(String(%q)) = %q, want %q", s, again, got)
		}
		if !Clean(got) {
			t.Fatalf("Clean(String(%q)) = false", s)
		}
		if Clean(s) && got != s {
			t.Fatalf("String(%q) = %q changed clean text", s, got)
		}
		// What a terminal shows is kept: every printable rune of s is in
		// the output, in order.
		want := []rune{}
		for i := 0; i < len(s); {
			r, size := utf8.DecodeRuneInString(s[i:])
			i += size
			if !(r == utf8.RuneError && size == 1) && (r >= 0x20 && r < 0x7f || r > 0x9f || r == '\n' || r == '\t') {
				want = append(want, r)
			}
		}
		rest := got
		for _, r := range want {
			i := strings.IndexRune(rest, r)
			if i < 0 {
				t.Fatalf("String(%q) = %q lost %q", s, got, r)
			}
			rest = rest[i+utf8.RuneLen(r):]
		}
		// In pieces, through a Writer, it is the same.
		var b bytes.Buffer
		w := NewWriter(&b)
		for i := 0; i < len(s); i += 3 {
			w.Write([]byte(s[i:min(i+3, len(s))]))
		}
		w.Flush()
		if b.String() != got {
			t.Fatalf("Writer in 3-byte pieces wrote %q, String %q", b.String(), got)
		}
	})
}

func TestWriterSplitsAnywhere(t *testing.T) {
	in := "ok \u00e9\u009b2J\x1b]0;t\x07 ✓ \U0001F425 end\n"
	want := String(in)
	for cut := range len(in) + 1 {
		var b bytes.Buffer
		w := NewWriter(&b)
		if n, err := w.Write([]byte(in[:cut])); err != nil || n != cut {
			t.Fatalf("Write = %d, %v", n, err)
		}
		w.Write([]byte(in[cut:]))
		w.Flush()
		if b.String() != want {
			t.Errorf("cut at %d: wrote %q, want %q", cut, b.String(), want)
		}
	}
}

func TestWriterFlushIncomplete(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	w.Write([]byte("a\xe2\x82"))
	if b.String() != "a" {
		t.Fatalf("before Flush: %q, want %q", b.String(), "a")
	}
	w.Flush()
	if want := String("a\xe2\x82"); b.String() != want {
		t.Fatalf("after Flush: %q, want %q", b.String(), want)
	}
}

func TestJSON(t *testing.T) {
	v := map[string]string{"label": "\x1b]0;pwned\x07 \u009b2J \x7f done ✓", "bad": "a\x9bb"}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("\u009b")) {
		t.Fatalf("encoding/json now escapes C1 itself (%q): JSON may be unneeded", raw)
	}
	got := JSON(raw)
	if why := inert(string(got)); why != "" {
		t.Errorf("JSON(%q) = %q: %s", raw, got, why)
	}
	var back map[string]string
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("JSON(%q) = %q is not JSON: %v", raw, got, err)
	}
	if back["label"] != v["label"] {
		t.Errorf("label read back %q, want %q", back["label"], v["label"])
	}
	if back["bad"] != "a\uFFFDb" {
		t.Errorf("bad read back %q, want %q", back["bad"], "a\uFFFDb")
	}
}

func FuzzJSON(f *testing.F) {
	f.Add("\x1b]0;pwned\x07\u009b\x7f")
	f.Add("a\x9bb")
	f.Fuzz(func(t *testing.T, s string) {
		raw, _ := json.Marshal(map[string]string{"s": s})
		got := JSON(raw)
		if why := inert(string(got)); why != "" {
			t.Fatalf("JSON(%q) = %q: %s", raw, got, why)
		}
		var back, want map[string]string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("JSON(%q) = %q is not JSON: %v", raw, got, err)
		}
		json.Unmarshal(raw, &want)
		if back["s"] != want["s"] {
			t.Fatalf("JSON changed the value: %q, want %q", back["s"], want["s"])
		}
	})
}
