// Package render turns the standard markdown Mother's models write into what
// chat platforms display: Discord markdown and Slack mrkdwn. It parses the
// markdown with goldmark and walks the syntax tree, so code blocks and
// inline code pass through untouched while bold, italic, strikethrough,
// links, lists, headings, quotes and tables are rewritten for the platform.
//
// What it renders is inert: text notifies nobody, whoever wrote it (Mother's
// model, or a chick whose words she relays). Slack's <!channel>, <!here>,
// <!subteam^…> and <@U…> are escaped to literal text, Telegram's tg://
// links keep only their text and @username is broken with a zero-width
// space, and @username never becomes a platform mention. Only the
// mentions Mother's own code adds (chat.Mention, passed beside the text)
// become live. It also splits
// long texts at a platform's limit without breaking a code block (Split),
// and formats tool details and usage for the detail thread.
package render

import (
	"bytes"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"

	"github.com/mother-chat/mother/pkg/chat"
)

// Dialect is a platform's text format.
type Dialect int

// Dialects.
const (
	// Discord markdown: close to CommonMark (**bold**, *italic*, ~~strike~~,
	// [text](url), # headings up to level 3, lists, > quotes, code).
	Discord Dialect = iota
	// Slack mrkdwn: *bold*, _italic_, ~strike~, <url|text>, no headings or
	// lists (rendered as bold lines and bullets), & < > escaped.
	Slack
	// Telegram MarkdownV2: *bold*, _italic_, ~strike~, [text](url), code
	// fences as in CommonMark; no headings or lists (bold lines and
	// bullets); every other _*[]()~`>#+-=|{}.! escaped with a backslash,
	// and ` and \ escaped inside code. MarkdownV2 rather than HTML keeps
	// the ``` fences Split and runview know.
	Telegram
	// WhatsApp: *bold*, _italic_, ~strike~, `inline code`, ``` blocks
	// (no language tag: WhatsApp would print it), "- " and "1. " lists,
	// "> " quotes; no headings (bold lines) and no links with a label
	// ("label (url)"). WhatsApp has no escape character, so nothing is
	// escaped. @username of a chat.Mention becomes @<phone number>, which
	// the adapter lists as a mention.
	WhatsApp
)

func (d Dialect) String() string {
	switch d {
	case Slack:
		return "slack"
	case Telegram:
		return "telegram"
	case WhatsApp:
		return "whatsapp"
	}
	return "discord"
}

var mdParser = goldmark.New(goldmark.WithExtensions(east.Strikethrough, east.Table, east.TaskList, east.Linkify)).Parser()

// ToDiscord converts standard markdown to Discord markdown; the Text of
// each of Mother's mentions becomes <@id>.
func ToDiscord(markdown string, mentions []chat.Mention) string {
	return Convert(Discord, markdown, mentions)
}

// ToSlack converts standard markdown to Slack mrkdwn; the Text of each of
// Mother's mentions becomes <@id>.
func ToSlack(markdown string, mentions []chat.Mention) string {
	return Convert(Slack, markdown, mentions)
}

// ToTelegram converts standard markdown to Telegram MarkdownV2 (parse_mode
// "MarkdownV2"); the Text of each of Mother's mentions becomes a mention
// by id, [@username](tg://user?id=ID).
func ToTelegram(markdown string, mentions []chat.Mention) string {
	return Convert(Telegram, markdown, mentions)
}

// ToWhatsApp converts standard markdown to WhatsApp's formatting; the
// Text of each of Mother's mentions becomes @<phone number> (their ids
// are phone-number JIDs, 4915112345678@s.whatsapp.net).
func ToWhatsApp(markdown string, mentions []chat.Mention) string {
	return Convert(WhatsApp, markdown, mentions)
}

// Convert converts standard markdown to the dialect. The result notifies
// nobody but the mentions listed, which Mother's own code adds (nil for
// what a model or a chick wrote).
func Convert(d Dialect, markdown string, mentions []chat.Mention) string {
	src := []byte(markdown)
	doc := mdParser.Parse(text.NewReader(src), parser.WithContext(parser.NewContext()))
	r := &renderer{d: d, src: src, users: mentionIndex(mentions)}
	lines := r.blocks(doc)
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l.text)
	}
	return strings.TrimRight(b.String(), "\n ")
}

// line is one output line; code lines are never re-indented.
type line struct {
	text string
	code bool
}

type renderer struct {
	d     Dialect
	src   []byte
	users map[string]string
}

// mentionIndex maps the lower-cased names of Mother's mentions to ids.
func mentionIndex(mentions []chat.Mention) map[string]string {
	m := make(map[string]string, len(mentions))
	for _, u := range mentions {
		if u.ID == "" {
			continue
		}
		k := strings.ToLower(strings.TrimPrefix(u.Text(), "@"))
		if _, dup := m[k]; !dup {
			m[k] = u.ID
		}
	}
	return m
}

// blocks renders the block children of n, separated by blank lines (or
// not, for tight lists).
func (r *renderer) blocks(n ast.Node) []line {
	var out []line
	tight := false
	if l, ok := n.(*ast.ListItem); ok {
		if p, ok := l.Parent().(*ast.List); ok {
			tight = p.IsTight
		}
	}
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		ls := r.block(c)
		if len(ls) == 0 {
			continue
		}
		if len(out) > 0 && !tight {
			out = append(out, line{})
		}
		out = append(out, ls...)
	}
	return out
}

func (r *renderer) block(n ast.Node) []line {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		return textLines(r.inlines(n))
	case *ast.Heading:
		t := strings.TrimSpace(r.inlines(n))
		if r.d == Slack || r.d == Telegram || r.d == WhatsApp {
			return []line{{text: "*" + t + "*"}}
		}
		if n.Level <= 3 {
			return []line{{text: strings.Repeat("#", n.Level) + " " + t}}
		}
		return []line{{text: "**" + t + "**"}}
	case *ast.FencedCodeBlock:
		lang := ""
		if r.d == Discord || r.d == Telegram {
			lang = string(n.Language(r.src))
		}
		return r.codeBlock(lang, n.Lines())
	case *ast.CodeBlock:
		return r.codeBlock("", n.Lines())
	case *ast.Blockquote:
		inner := r.blocks(n)
		for i := range inner {
			if (r.d == Telegram || r.d == WhatsApp) && strings.HasPrefix(inner[i].text, ">") {
				// MarkdownV2 has one quote level: a nested quote's
				// lines stay quoted once (a second '>' would be a
				// reserved character left unescaped). WhatsApp
				// shows one level too.
				continue
			}
			inner[i].text = strings.TrimRight("> "+inner[i].text, " ")
		}
		return inner
	case *ast.List:
		return r.list(n)
	case *ast.ThematicBreak:
		return []line{{text: "───"}}
	case *ast.HTMLBlock:
		var b strings.Builder
		ls := n.Lines()
		for i := 0; i < ls.Len(); i++ {
			seg := ls.At(i)
			b.Write(seg.Value(r.src))
		}
		if n.HasClosure() {
			b.Write(n.ClosureLine.Value(r.src))
		}
		return textLines(r.escape(strings.TrimRight(b.String(), "\n")))
	case *extast.Table:
		return r.table(n)
	default:
		if n.Type() == ast.TypeBlock {
			return r.blocks(n)
		}
		return textLines(r.inlines(n))
	}
}

func textLines(s string) []line {
	parts := strings.Split(s, "\n")
	out := make([]line, len(parts))
	for i, p := range parts {
		out[i] = line{text: p}
	}
	return out
}

func (r *renderer) codeBlock(lang string, segs *text.Segments) []line {
	out := []line{{text: "```" + lang, code: true}}
	var body strings.Builder
	for i := 0; i < segs.Len(); i++ {
		seg := segs.At(i)
		body.Write(seg.Value(r.src))
	}
	content := strings.TrimSuffix(body.String(), "\n")
	switch r.d {
	case Slack:
		content = slackEscape(content)
	case Telegram:
		content = TelegramCodeEscape(content)
	}
	if content != "" || segs.Len() > 0 {
		for _, l := range strings.Split(content, "\n") {
			out = append(out, line{text: l, code: true})
		}
	}
	return append(out, line{text: "```", code: true})
}

func (r *renderer) list(l *ast.List) []line {
	var out []line
	num := l.Start
	depth := 0
	for p := l.Parent(); p != nil; p = p.Parent() {
		if _, ok := p.(*ast.List); ok {
			depth++
		}
	}
	for item := l.FirstChild(); item != nil; item = item.NextSibling() {
		var marker string
		switch {
		case l.IsOrdered() && r.d == Telegram:
			marker = strconv.Itoa(num) + "\\. "
			num++
		case l.IsOrdered():
			marker = strconv.Itoa(num) + ". "
			num++
		case (r.d == Slack || r.d == Telegram) && depth%2 == 1:
			marker = "◦ "
		case r.d == Slack || r.d == Telegram:
			marker = "• "
		default:
			marker = "- "
		}
		indent := strings.Repeat(" ", utf8.RuneCountInString(marker))
		if r.d == Slack {
			indent = "    "
		}
		inner := r.blocks(item)
		if len(inner) == 0 {
			inner = []line{{}}
		}
		if len(out) > 0 && !l.IsTight {
			out = append(out, line{})
		}
		for i, il := range inner {
			switch {
			case i == 0 && il.code:
				out = append(out, line{text: strings.TrimRight(marker, " ")}, il)
			case i == 0:
				out = append(out, line{text: marker + r.unquoted(il.text)})
			case il.code || il.text == "":
				out = append(out, il)
			default:
				out = append(out, line{text: indent + r.unquoted(il.text)})
			}
		}
	}
	return out
}

// unquoted is a line of a list item as it goes after the item's marker or
// indent. MarkdownV2 quotes only lines that start with '>', so a quote
// inside a list item loses its quoting there and its '>' is escaped (an
// unescaped one mid-line is a reserved character Telegram refuses).
func (r *renderer) unquoted(text string) string {
	if r.d == Telegram && strings.HasPrefix(text, ">") {
		return "\\" + text
	}
	return text
}

func (r *renderer) table(t *extast.Table) []line {
	var rows [][]string
	header := 0
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		var cells []string
		for c := row.FirstChild(); c != nil; c = c.NextSibling() {
			cells = append(cells, strings.TrimSpace(r.plain(c)))
		}
		if _, ok := row.(*extast.TableHeader); ok {
			header = 1
		}
		rows = append(rows, cells)
	}
	var widths []int
	for _, row := range rows {
		for i, c := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	out := []line{{text: "```", code: true}}
	for ri, row := range rows {
		var b strings.Builder
		for i, c := range row {
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(c)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)))
			}
		}
		txt := b.String()
		switch r.d {
		case Slack:
			txt = slackEscape(txt)
		case Telegram:
			txt = TelegramCodeEscape(txt)
		}
		out = append(out, line{text: strings.TrimRight(txt, " "), code: true})
		if ri == 0 && header == 1 {
			var sep []string
			for _, w := range widths {
				sep = append(sep, strings.Repeat("-", max(w, 1)))
			}
			out = append(out, line{text: strings.Join(sep, "  "), code: true})
		}
	}
	return append(out, line{text: "```", code: true})
}

// plain is the text of n's inlines without formatting (table cells).
func (r *renderer) plain(n ast.Node) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			b.Write(util.UnescapePunctuations(c.Segment.Value(r.src)))
		case *ast.String:
			b.Write(c.Value)
		case *ast.AutoLink:
			b.Write(c.Label(r.src))
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// inlines renders the inline children of n.
func (r *renderer) inlines(n ast.Node) string {
	var b strings.Builder
	var run bytes.Buffer // consecutive text, converted together
	flush := func() {
		if run.Len() > 0 {
			b.WriteString(r.text(run.String()))
			run.Reset()
		}
	}
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Text:
			run.Write(c.Segment.Value(r.src))
			if c.HardLineBreak() || c.SoftLineBreak() {
				flush()
				b.WriteByte('\n')
			}
			continue
		case *ast.String:
			run.Write(c.Value)
			continue
		}
		flush()
		b.WriteString(r.inline(c))
	}
	flush()
	return b.String()
}

func (r *renderer) inline(n ast.Node) string {
	switch n := n.(type) {
	case *ast.CodeSpan:
		var body bytes.Buffer
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			if t, ok := c.(*ast.Text); ok {
				body.Write(t.Segment.Value(r.src))
			} else if s, ok := c.(*ast.String); ok {
				body.Write(s.Value)
			}
		}
		return r.codeSpan(body.String())
	case *ast.Emphasis:
		inner := r.inlines(n)
		switch {
		case (r.d == Slack || r.d == Telegram || r.d == WhatsApp) && n.Level >= 2:
			return "*" + inner + "*"
		case r.d == Slack || r.d == Telegram || r.d == WhatsApp:
			return "_" + inner + "_"
		case n.Level >= 2:
			return "**" + inner + "**"
		default:
			return "*" + inner + "*"
		}
	case *extast.Strikethrough:
		if r.d == Slack || r.d == Telegram || r.d == WhatsApp {
			return "~" + r.inlines(n) + "~"
		}
		return "~~" + r.inlines(n) + "~~"
	case *ast.Link:
		return r.link(string(n.Destination), r.inlines(n))
	case *ast.Image:
		alt := r.plain(n)
		if alt == "" {
			alt = "image"
		}
		return r.link(string(n.Destination), r.text(alt))
	case *ast.AutoLink:
		label := string(n.Label(r.src))
		if r.d == Slack && n.AutoLinkType == ast.AutoLinkURL && hasScheme(string(n.URL(r.src))) {
			return "<" + slackEscape(string(n.URL(r.src))) + ">"
		}
		return r.escape(label)
	case *ast.RawHTML:
		var b strings.Builder
		for i := 0; i < n.Segments.Len(); i++ {
			seg := n.Segments.At(i)
			b.Write(seg.Value(r.src))
		}
		return r.escape(b.String())
	case *extast.TaskCheckBox:
		if n.IsChecked {
			return "☑ "
		}
		return "☐ "
	default:
		return r.inlines(n)
	}
}

func (r *renderer) link(url, label string) string {
	if r.d == Slack {
		// Only a URL with a scheme becomes a link: <!channel|x> or
		// <@U123|x> would be a mention, and &, <, > in the URL are
		// escaped so that it cannot end early.
		if !hasScheme(url) {
			if label == "" || label == slackEscape(url) {
				return slackEscape(url)
			}
			return label + " (" + slackEscape(url) + ")"
		}
		esc := strings.ReplaceAll(slackEscape(url), "|", "%7C")
		if label == "" || label == slackEscape(url) {
			return "<" + esc + ">"
		}
		return "<" + esc + "|" + label + ">"
	}
	if r.d == Telegram && telegramUserLink(url) {
		if label == "" {
			return telegramPlain(url)
		}
		return label
	}
	if r.d == Telegram {
		if label == "" || label == TelegramEscape(url) {
			return TelegramEscape(url)
		}
		return "[" + label + "](" + strings.NewReplacer(`\`, `\\`, `)`, `\)`).Replace(url) + ")"
	}
	if r.d == WhatsApp {
		if label == "" || label == url {
			return url
		}
		return label + " (" + url + ")"
	}
	if label == "" || label == url {
		return url
	}
	return "[" + label + "](" + url + ")"
}

func (r *renderer) codeSpan(body string) string {
	if r.d == Slack {
		return "`" + slackEscape(body) + "`"
	}
	if r.d == Telegram {
		return "`" + TelegramCodeEscape(body) + "`"
	}
	if r.d == WhatsApp {
		// One backtick each side; WhatsApp has no longer fences or
		// escapes, and a backtick inside would end the span.
		return "`" + strings.ReplaceAll(body, "`", "'") + "`"
	}
	fence := "`"
	for strings.Contains(body, fence) {
		fence += "`"
	}
	if strings.HasPrefix(body, "`") || strings.HasSuffix(body, "`") {
		body = " " + body + " "
	}
	return fence + body + fence
}

// text converts plain text: mentions, and the dialect's escaping.
func (r *renderer) text(s string) string {
	switch r.d {
	case Slack:
		s = string(util.UnescapePunctuations([]byte(s)))
		s = slackEscape(s)
	case Telegram:
		return r.telegramText(string(util.UnescapePunctuations([]byte(s))))
	case WhatsApp:
		return r.whatsappText(string(util.UnescapePunctuations([]byte(s))))
	}
	return r.mentions(s)
}

// escape applies the dialect's escaping to literal text (raw HTML).
func (r *renderer) escape(s string) string {
	return Plain(r.d, s)
}

// mentions replaces the @username of Mother's mentions with <@id>. A
// mention starts at a word boundary; trailing dots and dashes are tried
// off ("@mario.").
func (r *renderer) mentions(s string) string {
	return r.scanMentions(s, func(p string) string { return p }, func(_, id string) string { return "<@" + id + ">" })
}

// telegramText escapes text for MarkdownV2 and turns the @username of
// Mother's mentions into a mention by id, [@username](tg://user?id=ID),
// which reaches users without a public username too; every other
// @username is broken (BreakMentions).
func (r *renderer) telegramText(s string) string {
	return r.scanMentions(s, telegramPlain, func(name, id string) string {
		return "[@" + TelegramEscape(name) + "](tg://user?id=" + id + ")"
	})
}

// whatsappText turns the @username of Mother's mentions into @<phone
// number>, the digits of the user's JID, which is how WhatsApp writes a
// mention (the adapter lists those JIDs, and only those, as the
// message's mentions).
func (r *renderer) whatsappText(s string) string {
	return r.scanMentions(s, func(p string) string { return p }, func(name, id string) string {
		if num, _, ok := strings.Cut(id, "@"); ok && num != "" {
			return "@" + num
		}
		return "@" + name
	})
}

// scanMentions rewrites s: each of Mother's mentions through mention, the
// text between through plain.
func (r *renderer) scanMentions(s string, plain func(string) string, mention func(name, id string) string) string {
	if len(r.users) == 0 || !strings.Contains(s, "@") {
		return plain(s)
	}
	var b strings.Builder
	from := 0 // start of the plain text not yet written
	for i := 0; i < len(s); {
		if s[i] != '@' || (i > 0 && isNameByte(s[i-1])) {
			i++
			continue
		}
		j := i + 1
		for j < len(s) && isNameByte(s[j]) {
			j++
		}
		name := s[i+1 : j]
		id := ""
		for name != "" {
			if v, ok := r.users[strings.ToLower(name)]; ok {
				id = v
				break
			}
			last := name[len(name)-1]
			if last != '.' && last != '-' && last != '_' {
				break
			}
			name = name[:len(name)-1]
		}
		if id == "" {
			i++
			continue
		}
		b.WriteString(plain(s[from:i]))
		b.WriteString(mention(name, id))
		i += 1 + len(name)
		from = i
	}
	b.WriteString(plain(s[from:]))
	return b.String()
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// slackEscape escapes &, < and > as Slack requires. Slack's control
// sequences in the text (<!channel>, <!here>, <!subteam^S1>, <@U123>,
// <#C123>) are escaped too: they show as written and notify nobody. The
// only live ones are those the renderer writes itself (Mother's mentions,
// links).
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace

// hasScheme reports whether url starts with a URI scheme ("https:").
func hasScheme(url string) bool {
	for i := 0; i < len(url); i++ {
		c := url[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return true
		default:
			return false
		}
	}
	return false
}

// telegramUserLink reports whether url is a tg:// link, which Telegram
// turns into a mention of a user by id (tg://user?id=N) or an action in
// the app: such links keep only their text.
func telegramUserLink(url string) bool {
	return len(url) >= 3 && strings.EqualFold(url[:3], "tg:")
}

// telegramPlain escapes literal text for MarkdownV2 and breaks its
// mentions.
func telegramPlain(s string) string { return BreakMentions(TelegramEscape(s)) }

// BreakMentions puts a zero-width space after the @ of every @username in
// s, so that Telegram (which notifies a group member named by @username
// in any message) sees no mention there. An @ after a letter, digit or _
// (an e-mail address) is no mention and stays as it is.
func BreakMentions(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteByte(s[i])
		if s[i] != '@' || i+1 >= len(s) || !isUsernameByte(s[i+1]) {
			continue
		}
		if prev, _ := utf8.DecodeLastRuneInString(s[:i]); i > 0 && (prev == '_' || unicode.IsLetter(prev) || unicode.IsDigit(prev)) {
			continue
		}
		b.WriteString("\u200b")
	}
	return b.String()
}

func isUsernameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// Truncate cuts s to at most n runes, ending with "…" when cut.
func Truncate(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	rs := []rune(s)
	return string(rs[:n-1]) + "…"
}

// Len is the length platforms count: runes.
func Len(s string) int { return utf8.RuneCountInString(s) }

// telegramSpecial are the characters MarkdownV2 wants escaped in text.
const telegramSpecial = "_*[]()~`>#+-=|{}.!\\"

// TelegramEscape escapes literal text for Telegram MarkdownV2.
func TelegramEscape(s string) string {
	if !strings.ContainsAny(s, telegramSpecial) {
		return s
	}
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(telegramSpecial, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// TelegramCodeEscape escapes the body of MarkdownV2 code (inline or
// fenced): only ` and \ are special there.
func TelegramCodeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "`", "\\`").Replace(s)
}

// TelegramUnescape undoes MarkdownV2 escaping, for sending a message
// Telegram could not parse as plain text.
func TelegramUnescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && s[i+1] < 128 && (strings.IndexByte(telegramSpecial, s[i+1]) >= 0) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
