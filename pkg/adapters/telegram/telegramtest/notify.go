package telegramtest

import (
	"regexp"
	"strings"
)

// usernameRe finds what Telegram takes for a mention of a username in
// shown text: @ not after a letter, digit or _, then 3 to 32 of them.
var usernameRe = regexp.MustCompile(`(^|[^\p{L}\p{N}_])@([A-Za-z0-9_]{3,32})`)

// Notifies lists whom text sent with parse mode (as the bot sent it)
// would notify in a group: "id:N" for a link to tg://user?id=N (a text
// mention) and "@name" for a username mention Telegram finds in the shown
// text (outside code, links to users and their labels). Nil: nobody.
func Notifies(text, parse string) []string {
	var out []string
	shown := text
	if parse == "MarkdownV2" {
		var ids []string
		shown, ids = scanMarkdownV2(text)
		for _, id := range ids {
			out = append(out, "id:"+id)
		}
	}
	for _, g := range usernameRe.FindAllStringSubmatch(shown, -1) {
		out = append(out, "@"+g[2])
	}
	return out
}

// NotifiesAny is Notifies over every version of m.
func NotifiesAny(m Message) []string {
	vs := m.Versions
	if len(vs) == 0 {
		vs = []Version{{Text: m.Text, Parse: m.Parse}}
	}
	var out []string
	for _, v := range vs {
		out = append(out, Notifies(v.Text, v.Parse)...)
	}
	return out
}

// scanMarkdownV2 returns the text a MarkdownV2 message shows outside code
// (escapes removed; a link to a user, label included, left out) and the
// user ids its tg://user links mention.
func scanMarkdownV2(s string) (shown string, ids []string) {
	var b strings.Builder
	label := -1 // where the current link's label starts in b
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case strings.HasPrefix(s[i:], "```"):
			end := strings.Index(s[i+3:], "```")
			if end < 0 {
				return b.String(), ids
			}
			b.WriteByte(' ')
			i += 3 + end + 2
		case c == '`':
			end := i + 1
			for end < len(s) && s[end] != '`' {
				if s[end] == '\\' {
					end++
				}
				end++
			}
			b.WriteByte(' ')
			i = end
		case c == '[' && label < 0:
			label = b.Len()
		case c == ']' && label >= 0 && i+1 < len(s) && s[i+1] == '(':
			end := i + 2
			var url strings.Builder
			for end < len(s) && s[end] != ')' {
				if s[end] == '\\' && end+1 < len(s) {
					end++
				}
				url.WriteByte(s[end])
				end++
			}
			u := url.String()
			if low := strings.ToLower(u); strings.HasPrefix(low, "tg://user?id=") {
				ids = append(ids, u[len("tg://user?id="):])
				// The label is the mention's text, not a mention of its own.
				cut := b.String()[:label]
				b.Reset()
				b.WriteString(cut)
				b.WriteByte(' ')
			}
			label = -1
			i = end
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), ids
}
