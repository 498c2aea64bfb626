package render

import (
	"fmt"
	"strings"
	"testing"
)

// checkParts verifies the invariants of Split: every part fits, no part
// leaves a code block open, and the parts hold all the text.
func checkParts(t *testing.T, in string, parts []string, limit int) {
	t.Helper()
	for i, p := range parts {
		if Len(p) > limit {
			t.Errorf("part %d has %d runes, limit %d", i, Len(p), limit)
		}
		fences := 0
		for _, l := range strings.Split(p, "\n") {
			if isFence(l) {
				fences++
			}
		}
		if fences%2 != 0 {
			t.Errorf("part %d leaves a code block open:\n%s", i, p)
		}
	}
	// The parts hold exactly the input's text, in order (fences added to
	// close and reopen blocks, and whitespace at the cuts, aside).
	if got, want := normalize(strings.Join(parts, "\n")), normalize(in); got != want {
		t.Errorf("parts do not hold the input's text:\n got %.200q\nwant %.200q", got, want)
	}
}

func normalize(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if isFence(l) {
			continue
		}
		b.WriteString(strings.Join(strings.Fields(l), ""))
	}
	return b.String()
}

func TestSplitShortIsOnePart(t *testing.T) {
	if got := Split("hello", 1900); len(got) != 1 || got[0] != "hello" {
		t.Errorf("Split(hello) = %q", got)
	}
	if got := Split("  \n", 1900); len(got) != 0 {
		t.Errorf("Split(blank) = %q, want none", got)
	}
}

func TestSplitParagraphs(t *testing.T) {
	var paras []string
	for i := range 30 {
		paras = append(paras, fmt.Sprintf("Paragraph %d: %s", i, strings.Repeat("word ", 20)))
	}
	in := strings.Join(paras, "\n\n")
	parts := Split(in, 500)
	if len(parts) < 5 {
		t.Fatalf("got %d parts, want several", len(parts))
	}
	checkParts(t, in, parts, 500)
	for i, p := range parts {
		if !strings.HasPrefix(p, "Paragraph ") {
			t.Errorf("part %d does not start at a paragraph: %.40q", i, p)
		}
	}
}

func TestSplitKeepsCodeBlocksClosed(t *testing.T) {
	var code []string
	for i := range 200 {
		code = append(code, fmt.Sprintf("line %03d := compute(%d) // @mario **x**", i, i))
	}
	in := "Intro text.\n\n```go\n" + strings.Join(code, "\n") + "\n```\n\nAfter the code."
	parts := Split(in, 1900)
	if len(parts) < 4 {
		t.Fatalf("got %d parts, want at least 4", len(parts))
	}
	checkParts(t, in, parts, 1900)
	for i, p := range parts[1:] {
		if strings.Contains(p, "line ") && !strings.HasPrefix(p, "```go\n") && !strings.Contains(p, "\n```go\n") {
			t.Errorf("part %d continues code without reopening the block with its language:\n%.80s", i+1, p)
		}
	}
	if !strings.HasSuffix(parts[len(parts)-1], "After the code.") {
		t.Errorf("last part = %q", parts[len(parts)-1])
	}
}

func TestSplitLongLine(t *testing.T) {
	in := strings.Repeat("abcdefghij ", 500)
	parts := Split(in, 300)
	checkParts(t, in, parts, 300)
	nospace := strings.Repeat("x", 1000)
	parts = Split(nospace, 300)
	checkParts(t, nospace, parts, 300)
}

func TestSplitLongLineInCode(t *testing.T) {
	in := "```\n" + strings.Repeat("y", 700) + "\n```"
	parts := Split(in, 300)
	checkParts(t, in, parts, 300)
}

func TestSplitMultibyte(t *testing.T) {
	in := strings.Repeat("äöü€ ", 1000)
	parts := Split(in, 1900)
	checkParts(t, in, parts, 1900)
}

func BenchmarkSplit(b *testing.B) {
	in := strings.Repeat("Some text with **bold** and `code`.\n\n```go\nx := 1\n```\n\n", 500)
	for b.Loop() {
		Split(in, 1900)
	}
}
