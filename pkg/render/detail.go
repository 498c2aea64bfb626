package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/model"
)

// Bold wraps s in the dialect's bold markers.
func Bold(d Dialect, s string) string {
	if d == Slack || d == Telegram || d == WhatsApp {
		return "*" + s + "*"
	}
	return "**" + s + "**"
}

// Italic wraps s in the dialect's italic markers.
func Italic(d Dialect, s string) string {
	if d == Slack || d == Telegram || d == WhatsApp {
		return "_" + s + "_"
	}
	return "*" + s + "*"
}

// Plain makes literal text safe and inert for the dialect: Slack's & < >
// escaped (its <!channel> and <@U123> with them), Telegram's MarkdownV2
// escaped and its @username broken. Discord and WhatsApp text needs
// neither: their adapters post it allowing no mentions.
func Plain(d Dialect, s string) string {
	switch d {
	case Slack:
		return slackEscape(s)
	case Telegram:
		return telegramPlain(s)
	}
	return s
}

// ToolDetail formats a finished tool call for the detail thread: name,
// label, duration, outcome, arguments and result, in at most limit runes.
// Long arguments and results keep their head and tail.
func ToolDetail(d Dialect, ev agent.Event, limit int) string {
	var head strings.Builder
	head.WriteString(Bold(d, Plain(d, ev.ToolName)))
	if ev.Label != "" && ev.Label != ev.ToolName {
		head.WriteString(" · " + Plain(d, oneLine(ev.Label)))
	}
	head.WriteString(" · " + Plain(d, FormatDuration(ev.Duration))) // "1.2s": a . Telegram wants escaped
	if ev.IsError {
		head.WriteString(" · " + Bold(d, "error"))
	}
	args := compactJSON(ev.Args)
	result := strings.TrimRight(ev.Result, "\n")
	if result == "" {
		result = "(no output)"
	}
	// Room for the two code blocks and their labels.
	overhead := Len(head.String()) + 40
	room := limit - overhead
	argRoom := min(Len(args), max(room/4, 80))
	if args == "" || args == "{}" {
		argRoom = 0
	}
	resRoom := room - argRoom
	var b strings.Builder
	b.WriteString(head.String())
	if argRoom > 0 {
		b.WriteString("\n" + codeBlock(d, "json", headTail(args, argRoom)))
	}
	if resRoom > 20 {
		b.WriteString("\n" + codeBlock(d, "", headTail(result, resRoom)))
	}
	return Truncate(b.String(), limit)
}

// Usage formats a run's token usage for the detail thread.
func Usage(d Dialect, u model.Usage, reason agent.StopReason, errText, answeredBy string) string {
	s := Italic(d, fmt.Sprintf("Usage: %s tokens in, %s out", thousands(u.InputTokens), thousands(u.OutputTokens)))
	if answeredBy != "" {
		s += " · " + Italic(d, "answered by fallback "+Plain(d, answeredBy))
	}
	if reason != "" && reason != agent.StopDone {
		s += " · " + Italic(d, "ended: "+string(reason))
		if errText != "" {
			s += " (" + Plain(d, oneLine(Truncate(errText, 200))) + ")"
		}
	}
	return s
}

// FormatDuration shows a tool's duration: "850ms", "1.2s", "2m05s".
func FormatDuration(dur time.Duration) string {
	switch {
	case dur < time.Second:
		return fmt.Sprintf("%dms", dur.Milliseconds())
	case dur < time.Minute:
		return fmt.Sprintf("%.1fs", dur.Seconds())
	default:
		m := int(dur / time.Minute)
		s := int((dur % time.Minute) / time.Second)
		return fmt.Sprintf("%dm%02ds", m, s)
	}
}

func codeBlock(d Dialect, lang, body string) string {
	// A fence inside the body would end the block early.
	body = strings.ReplaceAll(body, "```", "`\u200b``")
	if d == Slack {
		return "```\n" + slackEscape(body) + "\n```"
	}
	if d == WhatsApp {
		return "```\n" + body + "\n```"
	}
	if d == Telegram {
		return "```" + lang + "\n" + TelegramCodeEscape(body) + "\n```"
	}
	return "```" + lang + "\n" + body + "\n```"
}

// headTail keeps the first third and the last two thirds of n runes of s,
// with a marker saying how much was cut.
func headTail(s string, n int) string {
	rs := []rune(s)
	if len(rs) <= n {
		return s
	}
	marker := fmt.Sprintf("\n… (%d characters cut) …\n", len(rs)-n+40)
	keep := n - Len(marker)
	if keep < 10 {
		return string(rs[:max(n, 0)])
	}
	h := keep / 3
	return string(rs[:h]) + marker + string(rs[len(rs)-(keep-h):])
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func thousands(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
