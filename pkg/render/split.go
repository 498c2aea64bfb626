package render

import (
	"strings"
	"unicode/utf8"
)

// Split cuts platform text into parts of at most limit runes each. It cuts
// between paragraphs where it can, else between lines, else between words,
// and never leaves a code block open: a block that spans parts is closed at
// the end of one and reopened (with its language) at the start of the next.
// Empty text gives no parts.
func Split(s string, limit int) []string {
	s = strings.TrimRight(s, "\n ")
	if s == "" {
		return nil
	}
	if limit < 40 {
		limit = 40
	}
	if utf8.RuneCountInString(s) <= limit {
		return []string{s}
	}
	sp := &splitter{limit: limit}
	for _, l := range strings.Split(s, "\n") {
		sp.add(l)
	}
	sp.flush(len(sp.cur))
	return sp.out
}

type splitLine struct {
	text string
	n    int // runes in text
	// fence is the opening fence this line is inside of (after the line is
	// read), "" outside code.
	fence string
	// open is the fence that was open before this line.
	open string
}

type splitter struct {
	limit int
	out   []string
	cur   []splitLine
	// curLen is the joined length of cur (without a closing fence).
	curLen int
	fence  string // the currently open fence line ("```go"), "" if none
}

// setCur replaces the current lines and recomputes their length.
func (sp *splitter) setCur(ls []splitLine) {
	sp.cur = ls
	sp.curLen = 0
	for i, l := range ls {
		if i > 0 {
			sp.curLen++
		}
		sp.curLen += l.n
	}
}

// appendCur adds a line to the current part.
func (sp *splitter) appendCur(l splitLine) {
	if len(sp.cur) > 0 {
		sp.curLen++
	}
	sp.curLen += l.n
	sp.cur = append(sp.cur, l)
}

// size is the rune length of lines joined with newlines, plus the closing
// fence needed when the last line leaves a block open.
func (sp *splitter) size(ls []splitLine) int {
	n := 0
	for i, l := range ls {
		if i > 0 {
			n++
		}
		n += l.n
	}
	if len(ls) > 0 && ls[len(ls)-1].fence != "" {
		n += 4 // "\n```"
	}
	return n
}

func isFence(l string) bool {
	t := strings.TrimLeft(l, " ")
	return len(l)-len(t) <= 3 && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~"))
}

func (sp *splitter) add(text string) {
	open := sp.fence
	if isFence(text) {
		if sp.fence == "" {
			sp.fence = strings.TrimLeft(text, " ")
		} else {
			sp.fence = ""
		}
	}
	l := splitLine{text: text, n: utf8.RuneCountInString(text), fence: sp.fence, open: open}
	// A line that alone cannot fit is cut into pieces first.
	room := sp.limit - 4 - utf8.RuneCountInString(open) - 1
	if l.n > room {
		for _, piece := range cutLine(text, room) {
			sp.push(splitLine{text: piece, n: utf8.RuneCountInString(piece), fence: l.fence, open: open})
		}
		return
	}
	sp.push(l)
}

func (sp *splitter) push(l splitLine) {
	next := sp.curLen + l.n
	if len(sp.cur) > 0 {
		next++
	}
	if l.fence != "" {
		next += 4 // the closing fence this part would need
	}
	if next <= sp.limit {
		sp.appendCur(l)
		return
	}
	sp.flush(sp.breakAt())
	sp.appendCur(l)
	for sp.size(sp.cur) > sp.limit && len(sp.cur) > 1 {
		sp.flush(len(sp.cur) - 1)
	}
}

// breakAt picks how many of the current lines go into the next part: after
// the last blank line outside code in the second half, else all of them.
func (sp *splitter) breakAt() int {
	n := len(sp.cur)
	// upto[i] is the joined length of the first i lines.
	upto := make([]int, n+1)
	for i, l := range sp.cur {
		upto[i+1] = upto[i] + l.n
		if i > 0 {
			upto[i+1]++
		}
	}
	half := upto[n] / 2
	for i := n - 1; i > 0; i-- {
		l := sp.cur[i]
		if l.open == "" && l.fence == "" && strings.TrimSpace(l.text) == "" {
			if upto[i] >= half {
				return i + 1
			}
			break
		}
		// The end of a code block is a good place too.
		if l.open != "" && l.fence == "" && upto[i+1] >= half {
			return i + 1
		}
	}
	return n
}

// flush emits the first k current lines as a part, closing an open code
// block, and keeps the rest (reopening the block) as the next part's start.
func (sp *splitter) flush(k int) {
	if k <= 0 || len(sp.cur) == 0 {
		return
	}
	head, rest := sp.cur[:k], append([]splitLine(nil), sp.cur[k:]...)
	var b strings.Builder
	for i, l := range head {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l.text)
	}
	last := head[len(head)-1]
	if last.fence != "" {
		b.WriteString("\n```")
	}
	if part := strings.Trim(b.String(), "\n"); strings.TrimSpace(part) != "" {
		sp.out = append(sp.out, part)
	}
	// Drop blank lines at the start of the next part.
	for len(rest) > 0 && rest[0].open == "" && strings.TrimSpace(rest[0].text) == "" {
		rest = rest[1:]
	}
	var next []splitLine
	if last.fence != "" {
		next = append(next, splitLine{text: last.fence, n: utf8.RuneCountInString(last.fence), fence: last.fence})
	}
	sp.setCur(append(next, rest...))
}

// cutLine cuts one long line into pieces of at most n runes, at spaces
// where possible.
func cutLine(s string, n int) []string {
	if n < 1 {
		n = 1
	}
	var out []string
	rs := []rune(s)
	for len(rs) > n {
		cut := n
		for i := n; i > n/2; i-- {
			if rs[i] == ' ' {
				cut = i
				break
			}
		}
		out = append(out, strings.TrimRight(string(rs[:cut]), " "))
		rs = rs[cut:]
		for len(rs) > 0 && rs[0] == ' ' {
			rs = rs[1:]
		}
	}
	if len(rs) > 0 {
		out = append(out, string(rs))
	}
	return out
}
