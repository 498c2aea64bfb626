package agent

import (
	"strings"
	"testing"
)

func TestStripThinking(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"none", "Paris.", "Paris."},
		{"closed", "<think>\nThe user asks.\n</think>\n\nParis.", "Paris."},
		{"empty block", "<think>\n\n</think>\n\nParis.", "Paris."},
		{"unclosed", "<think>\nLet me think about this and", ""},
		{"answer then unclosed", "Paris.<think>more", "Paris."},
		{"orphan close", "The template opened it.\n</think>\n\nParis.", "Paris."},
		{"two blocks", "<think>a</think>One.<think>b</think> Two.", "One. Two."},
		{"stray close after block", "<think>a</think>Paris.</think>", "Paris."},
		{"only thinking", "<think>hmm</think>\n\n", ""},
		{"a tag is always markup", "Use <think> tags? <think>no</think>yes", "Use yes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := StripThinking(tc.in); got != tc.want {
				t.Errorf("StripThinking(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestThinkFilterEveryChunking streams each text cut at every pair of
// points: what is shown never holds a tag or a thought, and it is what
// StripThinking makes of the whole, an orphan close included.
func TestThinkFilterEveryChunking(t *testing.T) {
	for _, text := range []string{
		"<think>\nreasoning here\n</think>\n\nParis is the capital.",
		"<think>\n\n</think>\n\nParis.",
		"<think>cut off while thinking",
		"no thinking at all <thin",
		"a < b and <t not a tag",
		"<think>x</think>One.<think>y</think> Two.",
		"reasoning opened by the template\n</think>\n\nParis.",
	} {
		want := StripThinking(text)
		wantThought := strings.Contains(text, openThink) || strings.Contains(text, closeThink)
		for i := 0; i <= len(text); i++ {
			for j := i; j <= len(text); j++ {
				var f thinkFilter
				var shown strings.Builder
				thought := false
				for _, part := range []string{text[:i], text[i:j], text[j:]} {
					v, th := f.feed(part)
					shown.WriteString(v)
					thought = thought || th
				}
				shown.WriteString(f.flush())
				got := shown.String()
				if strings.Contains(got, "<think") || strings.Contains(got, "</think") || strings.Contains(got, "reasoning") {
					t.Fatalf("%q cut at %d,%d: shown %q", text, i, j, got)
				}
				// StripThinking trims around removed blocks in the
				// middle; the stream only at the start.
				if strings.Join(strings.Fields(got), " ") != strings.Join(strings.Fields(want), " ") {
					t.Fatalf("%q cut at %d,%d: shown %q, want %q", text, i, j, got, want)
				}
				if thought != wantThought {
					t.Fatalf("%q cut at %d,%d: thought = %v", text, i, j, thought)
				}
			}
		}
	}
}
