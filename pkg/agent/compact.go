package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mother-chat/mother/pkg/model"
)

// SummaryPrefix starts the user-role message that carries a compaction
// summary at the head of a compacted history.
const SummaryPrefix = "[Summary of the earlier conversation]\n"

// SummaryMessage is the message carrying a compaction summary.
func SummaryMessage(summary string) model.Message {
	return model.Message{Role: model.RoleUser, Content: SummaryPrefix + summary}
}

// IsSummary reports whether m carries a compaction summary.
func IsSummary(m model.Message) bool {
	return m.Role == model.RoleUser && strings.HasPrefix(m.Content, SummaryPrefix)
}

// Token estimates. Providers count exactly only after a call; before one,
// the agent estimates conservatively (about 4 bytes a token for text).
const (
	tokensPerImage   = 1600
	tokensPerMessage = 4
)

// EstimateText approximates the tokens of s.
func EstimateText(s string) int { return (len(s) + 3) / 4 }

// EstimateMessages approximates the tokens msgs take in a request.
func EstimateMessages(msgs []model.Message) int {
	n := 0
	for _, m := range msgs {
		n += tokensPerMessage + EstimateText(m.Content) + tokensPerImage*len(m.Images)
		for _, c := range m.ToolCalls {
			n += tokensPerMessage + EstimateText(c.Name) + EstimateText(string(c.Args))
		}
	}
	return n
}

// EstimateRequest approximates the tokens of a whole request.
func EstimateRequest(req model.Request) int {
	n := EstimateText(req.System) + EstimateMessages(req.Messages)
	for _, t := range req.Tools {
		n += EstimateText(t.Name) + EstimateText(t.Description) + EstimateText(string(t.Parameters))
	}
	return n
}

// ErrNothingToCompact means the history has no older part to summarise:
// what is left is the latest exchange, which compaction never drops.
var ErrNothingToCompact = errors.New("nothing left to compact: the latest exchange alone is too large")

// SplitForCompaction returns the index where a history is cut: history[:i]
// is summarised, history[i:] kept verbatim. It keeps about keepRecent
// tokens, never starts the kept part with a tool result (a tool call and
// its results stay together), never keeps a leading summary message (a new
// summary replaces it), and always summarises something when it can. It
// returns 0 when nothing can be summarised.
func SplitForCompaction(history []model.Message, keepRecent int) int {
	n := len(history)
	if n == 0 {
		return 0
	}
	// Walk back from the end while the kept part stays within keepRecent.
	cut := n
	kept := 0
	for cut > 0 {
		t := EstimateMessages(history[cut-1 : cut])
		if kept+t > keepRecent && cut < n {
			break
		}
		kept += t
		cut--
	}
	// Keep the latest exchange at least: move the cut back to a turn start.
	cut = turnStart(history, cut)
	if cut == 0 {
		// Everything fits in keepRecent (or the history is one exchange):
		// summarise all but the last exchange.
		cut = turnStart(history, lastTurn(history))
	}
	if cut == 1 && IsSummary(history[0]) {
		// Only the old summary would go: nothing new to summarise.
		return 0
	}
	return cut
}

// turnStart moves i back past tool results to the assistant message whose
// calls they answer, so the kept part starts at a user or assistant
// message with its results intact.
func turnStart(h []model.Message, i int) int {
	for i > 0 && i < len(h) && h[i].Role == model.RoleTool {
		i--
	}
	return i
}

// lastTurn is the index of the last user message that starts an exchange,
// or the last assistant message when there is none after the first.
func lastTurn(h []model.Message) int {
	for i := len(h) - 1; i > 0; i-- {
		if h[i].Role == model.RoleUser && !IsSummary(h[i]) {
			return i
		}
	}
	for i := len(h) - 1; i > 0; i-- {
		if h[i].Role == model.RoleAssistant {
			return i
		}
	}
	return 0
}

// summarySystem instructs the model that writes compaction summaries.
const summarySystem = `You compress conversations. Summarise the conversation you are given for the assistant who will continue it without seeing it again.
Keep: who asked for what, decisions and answers given, facts learned, files and paths touched, commands that worked or failed, open tasks and next steps, preferences people stated.
Keep names, @usernames, ids, paths, numbers and dates exact. Use short markdown bullet points, at most about 400 words. Do not continue the conversation or answer it.`

// Per-message caps in the transcript given to the summariser: tool output
// is mostly noise once acted upon.
const (
	transcriptMessageChars = 2000
	transcriptToolChars    = 800
)

// Compact implements Compactor with the agent's own model: the older part
// of the history (see SplitForCompaction) is summarised, in chunks if it is
// long, and the recent part kept verbatim. Model calls retry transient
// errors like the loop's.
func (a *Agent) Compact(ctx context.Context, history []model.Message) ([]model.Message, string, error) {
	cut := SplitForCompaction(history, a.cfg.KeepRecentTokens)
	if cut == 0 {
		return nil, "", ErrNothingToCompact
	}
	older, kept := history[:cut], history[cut:]
	prev := ""
	if IsSummary(older[0]) {
		prev = strings.TrimPrefix(older[0].Content, SummaryPrefix)
		older = older[1:]
	}
	chunks := chunkTranscript(older, a.cfg.CompactChunkTokens*4)
	summary := prev
	for i, chunk := range chunks {
		var b strings.Builder
		if summary != "" {
			b.WriteString("Summary of what came before:\n")
			b.WriteString(summary)
			b.WriteString("\n\nThe conversation continues:\n")
		}
		b.WriteString(chunk)
		b.WriteString("\n\nWrite the summary of everything above now.")
		req := model.Request{
			Model:           a.cfg.Model,
			System:          summarySystem,
			Messages:        []model.Message{{Role: model.RoleUser, Content: b.String()}},
			MaxOutputTokens: 1500,
			ContextWindow:   a.cfg.ContextWindow,
			// A summary needs no thinking, which would spend its 1500
			// tokens before the first word of it.
			Think: model.ThinkOff,
		}
		resp, err := a.call(ctx, req, nil, nil)
		if err != nil {
			return nil, "", fmt.Errorf("summarise part %d of %d: %w", i+1, len(chunks), err)
		}
		s := strings.TrimSpace(StripThinking(resp.Message.Content))
		if s == "" {
			return nil, "", fmt.Errorf("summarise part %d of %d: the model returned an empty summary", i+1, len(chunks))
		}
		summary = s
	}
	return append([]model.Message(nil), kept...), summary, nil
}

// chunkTranscript renders msgs as a plain transcript, cut into pieces of
// at most maxChars at message boundaries (a single longer message is its
// own piece, clipped).
func chunkTranscript(msgs []model.Message, maxChars int) []string {
	if maxChars <= 0 {
		maxChars = 64000
	}
	var chunks []string
	var b strings.Builder
	for _, m := range msgs {
		line := transcriptLine(m)
		if b.Len() > 0 && b.Len()+len(line) > maxChars {
			chunks = append(chunks, b.String())
			b.Reset()
		}
		if len(line) > maxChars {
			line = clip(line, maxChars)
		}
		b.WriteString(line)
	}
	if b.Len() > 0 {
		chunks = append(chunks, b.String())
	}
	return chunks
}

func transcriptLine(m model.Message) string {
	var b strings.Builder
	switch m.Role {
	case model.RoleTool:
		status := "result"
		if m.IsError {
			status = "error"
		}
		fmt.Fprintf(&b, "[tool %s %s] %s\n", m.ToolName, status, clip(m.Content, transcriptToolChars))
	case model.RoleAssistant:
		if strings.TrimSpace(m.Content) != "" {
			fmt.Fprintf(&b, "[assistant] %s\n", clip(m.Content, transcriptMessageChars))
		}
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, "[assistant calls %s] %s\n", c.Name, clip(string(c.Args), transcriptToolChars))
		}
	default:
		fmt.Fprintf(&b, "[user] %s\n", clip(m.Content, transcriptMessageChars))
	}
	if len(m.Images) > 0 {
		fmt.Fprintf(&b, "(%d image(s) attached)\n", len(m.Images))
	}
	return b.String()
}

// clip cuts s to at most max bytes (at a rune boundary) with a marker.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf(" [... %d characters cut]", len(s)-cut)
}
