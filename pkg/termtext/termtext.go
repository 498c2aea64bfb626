// Package termtext makes text inert on a terminal. Text a chick or a
// model wrote (tool labels, results, file names, titles, outcomes) is
// printed by the terminal chat, by momctl and in Mother's log; a control
// character in it would be obeyed by the terminal: a window title set, the
// screen cleared, the clipboard written (OSC 52).
//
// String shows every control character visibly, in caret notation, and
// keeps everything else:
//
//   - newline and tab stay as they are;
//   - the other C0 controls are ^@ to ^_ (ESC is ^[, BEL ^G, CR ^M);
//   - DEL is ^?;
//   - the C1 controls (U+0080 to U+009F) are written as their 7-bit form,
//     ^[ and a letter: U+009B (CSI) is ^[[, U+009D (OSC) ^[], U+0090
//     (DCS) ^[P, U+009C (ST) ^[\;
//   - bytes that are not UTF-8 are U+FFFD (a lone byte 0x9B is CSI on an
//     8-bit terminal).
//
// So a whole escape sequence (CSI, OSC, DCS, APC, PM, SOS, ended by BEL,
// by ST or not at all) is shown as the plain text it is, "^[]0;pwned^G",
// and nothing of it reaches the terminal as a control. Nothing is
// removed: the operator sees what was sent, an unterminated sequence
// cannot swallow the text after it, and no parser of ECMA-48 has to be
// right about where a sequence ends. The result is printable, and String
// of it is itself (idempotent).
package termtext

import (
	"strings"
	"unicode/utf8"
)

// Clean reports whether s is printed by String as it is: valid UTF-8
// with no control character but newline and tab.
func Clean(s string) bool {
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if needs(rune(b)) {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || needs(r) {
			return false
		}
		i += size
	}
	return true
}

// String is s with its control characters shown visibly (see the package
// comment).
func String(s string) string {
	if Clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
			continue
		}
		appendRune(&b, r)
	}
	return b.String()
}

// needs reports whether r is shown in caret notation.
func needs(r rune) bool {
	return r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r <= 0x9f
}

// appendRune writes r, or its caret form.
func appendRune(b *strings.Builder, r rune) {
	switch {
	case !needs(r):
		b.WriteRune(r)
	case r == 0x7f:
		b.WriteString("^?")
	case r < 0x20:
		b.WriteByte('^')
		b.WriteByte(byte(r) + 0x40)
	default: // C1: ESC and the letter 0x40 below
		b.WriteString("^[")
		b.WriteByte(byte(r - 0x40))
	}
}
