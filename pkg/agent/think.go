package agent

import "strings"

// Thinking models (qwen3, deepseek-r1) write their thoughts between
// <think> and </think>. A server that knows the model parses them out
// (Ollama's "thinking" field); one that does not, or an older version, or
// a template that already opened the block in the prompt, leaves them in
// the answer's text. None of it may reach a channel or the stored
// context: StripThinking removes it from a whole answer, and thinkFilter
// from a stream of deltas.

const (
	openThink  = "<think>"
	closeThink = "</think>"
)

// StripThinking returns text without its thinking: every closed
// <think>…</think> block (empty ones too), a block left open at the end
// (a stream cut off while the model was still thinking: all of it is
// thought), and, when the text has a </think> without an opening tag
// before it (the chat template opened the block), everything up to that
// tag. The whitespace the blocks leave at the start is trimmed.
func StripThinking(text string) string {
	if !strings.Contains(text, openThink) && !strings.Contains(text, closeThink) {
		return text
	}
	// An orphan close: the template opened the block, so the thoughts
	// start at the very beginning of the text.
	if c := strings.Index(text, closeThink); c >= 0 {
		if o := strings.Index(text, openThink); o < 0 || o > c {
			text = text[c+len(closeThink):]
		}
	}
	var b strings.Builder
	for {
		o := strings.Index(text, openThink)
		if o < 0 {
			b.WriteString(text)
			break
		}
		b.WriteString(text[:o])
		rest := text[o+len(openThink):]
		c := strings.Index(rest, closeThink)
		if c < 0 {
			break // open to the end: all thought
		}
		text = rest[c+len(closeThink):]
	}
	// A stray close tag after a block is markup too.
	out := strings.ReplaceAll(b.String(), closeThink, "")
	return strings.TrimLeft(out, " \t\r\n")
}

// thinkFilter splits a stream of answer text into what may be shown and
// what is thought. It holds back the end of a delta that could be the
// start of a tag cut by a chunk boundary ("<thi" | "nk>"), so a tag is
// never shown in pieces. A </think> with no opening tag before it (the
// template opened the block) cannot be told from an answer until it
// arrives, so the start of a message is held until it is clear: up to a
// tag, the end of the message, or maxEarly bytes, past which a text
// without a tag is taken for an answer. Only deltas wait; no channel
// shows them as they come.
type thinkFilter struct {
	decided bool   // the start of the message has been passed on
	early   string // the start of the message, held
	in      bool   // inside a block
	held    string // a possible tag prefix, not yet decided
	started bool   // visible text has been passed on (leading space trimmed)
}

// maxEarly bounds the start of a message held for an orphan </think>.
const maxEarly = 8 << 10

// feed takes the next delta and returns what may be shown and whether
// any of it was thought.
func (f *thinkFilter) feed(delta string) (visible string, thought bool) {
	if f.decided {
		return f.scan(delta)
	}
	f.early += delta
	o, c := strings.Index(f.early, openThink), strings.Index(f.early, closeThink)
	switch {
	case c >= 0 && (o < 0 || o > c):
		// An orphan close: everything before it was thought.
		rest := f.early[c+len(closeThink):]
		f.early, f.decided = "", true
		visible, _ = f.scan(rest)
		return visible, true
	case o >= 0 || len(f.early) > maxEarly:
		s := f.early
		f.early, f.decided = "", true
		return f.scan(s)
	}
	return "", false
}

// scan passes delta through the block state.
func (f *thinkFilter) scan(delta string) (visible string, thought bool) {
	s := f.held + delta
	f.held = ""
	var out strings.Builder
	for s != "" {
		tag := openThink
		if f.in {
			tag = closeThink
		}
		if i := strings.Index(s, tag); i >= 0 {
			if f.in {
				thought = thought || i > 0
			} else {
				out.WriteString(s[:i])
				thought = true // an opened block is thinking, even if empty
			}
			f.in = !f.in
			s = s[i+len(tag):]
			continue
		}
		// No whole tag: keep back a suffix that may begin one.
		keep := partialSuffix(s, tag)
		body := s[:len(s)-keep]
		if f.in {
			thought = thought || body != ""
		} else {
			out.WriteString(body)
		}
		f.held = s[len(s)-keep:]
		break
	}
	visible = out.String()
	if !f.started {
		visible = strings.TrimLeft(visible, " \t\r\n")
		f.started = visible != ""
	}
	return visible, thought
}

// flush returns text held back at the end of the stream: a partial tag
// that never completed is answer text (outside a block) or thought.
func (f *thinkFilter) flush() string {
	var early string
	if !f.decided {
		early, _ = f.scan(f.early)
		f.early, f.decided = "", true
	}
	s := f.held
	f.held = ""
	if f.in {
		return early
	}
	if !f.started {
		s = strings.TrimLeft(s, " \t\r\n")
	}
	return early + s
}

// partialSuffix is the length of the longest suffix of s that is a proper
// prefix of tag.
func partialSuffix(s, tag string) int {
	for n := min(len(tag)-1, len(s)); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}
