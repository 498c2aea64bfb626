package render

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/chat"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// testUsers are mentions Mother's own code adds: their @username becomes
// live; nothing else does.
var testUsers = []chat.Mention{
	{ID: "111", Username: "mario"},
	{ID: "222", Username: "luigi"},
	{ID: "333", Username: "mario.rossi"},
	// A WhatsApp user: ids are phone-number JIDs.
	{ID: "4915112345678@s.whatsapp.net", Username: "oma"},
}

// TestGolden converts every testdata/*.md to every dialect and compares
// with testdata/*.discord, *.slack, *.telegram and *.whatsapp (go test
// -update rewrites).
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []Dialect{Discord, Slack, Telegram, WhatsApp} {
			name := strings.TrimSuffix(filepath.Base(f), ".md") + "." + d.String()
			t.Run(name, func(t *testing.T) {
				got := Convert(d, string(src), testUsers) + "\n"
				golden := filepath.Join("testdata", name)
				if *update {
					if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run go test -update to create it)", err)
				}
				if got != string(want) {
					t.Errorf("Convert(%s, %s) differs from %s\n--- got ---\n%s\n--- want ---\n%s", d, f, golden, got, want)
				}
			})
		}
	}
}

func TestConvertCases(t *testing.T) {
	tests := []struct {
		name, in, discord, slack string
	}{
		{"bold and link", "**bold** and [link](http://example.com)", "**bold** and [link](http://example.com)", "*bold* and <http://example.com|link>"},
		{"italic", "*it* and _it_", "*it* and *it*", "_it_ and _it_"},
		{"mention", "hi @mario!", "hi <@111>!", "hi <@111>!"},
		{"mention case and dot", "@Mario. and @mario.rossi.", "<@111>. and <@333>.", "<@111>. and <@333>."},
		{"mention with underscore boundary", "@luigi_x", "@luigi_x", "@luigi_x"},
		{"email is no mention", "me@mario.com", "me@mario.com", "me@mario.com"},
		{"mention not in code", "`@mario` @mario", "`@mario` <@111>", "`@mario` <@111>"},
		{"heading", "# Title\ntext", "# Title\n\ntext", "*Title*\n\ntext"},
		{"empty", "", "", ""},
		{"slack escapes", "a < b & c > d", "a < b & c > d", "a &lt; b &amp; c &gt; d"},
		{"strike", "~~gone~~", "~~gone~~", "~gone~"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ToDiscord(tt.in, testUsers); got != tt.discord {
				t.Errorf("ToDiscord(%q) = %q, want %q", tt.in, got, tt.discord)
			}
			if got := ToSlack(tt.in, testUsers); got != tt.slack {
				t.Errorf("ToSlack(%q) = %q, want %q", tt.in, got, tt.slack)
			}
		})
	}
}

// FuzzConvert: conversion never panics and keeps code content.
func FuzzConvert(f *testing.F) {
	for _, s := range []string{"**a**", "```go\nx\n```", "- a\n  - b", "| a |\n|---|\n| b |", "@mario <@1> & <"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = ToDiscord(s, testUsers)
		_ = ToSlack(s, testUsers)
		for _, p := range Split(ToDiscord(s, testUsers), 60) {
			if Len(p) > 60 {
				t.Fatalf("part of %d runes > 60", Len(p))
			}
		}
		// The same input as a fenced code block comes out verbatim (Slack
		// escapes &, < and > everywhere, code too).
		code := fenceable(s)
		if code == "" {
			return
		}
		md := "before\n\n```\n" + code + "\n```\n\nafter **b**"
		if got := ToDiscord(md, testUsers); !strings.Contains(got, "```\n"+code+"\n```") {
			t.Fatalf("Discord lost code %q:\n%q", code, got)
		}
		if got := slackUnescape(ToSlack(md, testUsers)); !strings.Contains(got, "```\n"+code+"\n```") {
			t.Fatalf("Slack lost code %q:\n%q", code, got)
		}
	})
}

// fenceable makes s the body of a fenced code block: valid UTF-8, no
// backticks or carriage returns, no leading or trailing blank lines or
// trailing spaces.
func fenceable(s string) string {
	s = strings.ToValidUTF8(s, "")
	s = strings.NewReplacer("`", "", "\r", "", "\x00", "").Replace(s)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\v\f")
	}
	return strings.Trim(strings.Join(lines, "\n"), "\n")
}

func slackUnescape(s string) string {
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(s)
}

func BenchmarkConvert(b *testing.B) {
	src, err := os.ReadFile("testdata/basic.md")
	if err != nil {
		b.Fatal(err)
	}
	md := strings.Repeat(string(src)+"\n\n", 10)
	for _, d := range []Dialect{Discord, Slack, Telegram, WhatsApp} {
		b.Run(d.String(), func(b *testing.B) {
			b.SetBytes(int64(len(md)))
			for b.Loop() {
				Convert(d, md, testUsers)
			}
		})
	}
}

// TestTelegramQuoteInListItem: MarkdownV2 quotes only lines that start with
// '>', so a quote inside a list item (after its marker or indent) keeps its
// '>' as escaped text; a quote on its own line stays a quote.
func TestTelegramQuoteInListItem(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"* >00", "• \\> 00"},
		{"- a\n\n  > q", "• a\n\n  \\> q"},
		{"> q", "> q"},
	} {
		if got := ToTelegram(c.in, testUsers); got != c.want {
			t.Errorf("ToTelegram(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestInert: what a model or a chick writes notifies nobody, whatever
// platform syntax it spells; only Mother's own mentions are live.
func TestInert(t *testing.T) {
	hostile := "<!channel> <!here> <!everyone> <!subteam^S1|devs> <@U999> <@U999|x> @mario @everyone " +
		"[x](tg://user?id=7) [y](TG:user?id=8) ![z](tg://emoji?id=1) [p](!channel) [q](@U999) " +
		"[r](https://example.com/a><!channel>) <span>@luigi</span> `<!here>`"
	tests := []struct {
		d       Dialect
		mustNot []string
	}{
		{Slack, []string{"<!", "<@"}},
		{Telegram, []string{"tg://", "tg:user", "@mario", "@luigi", "@everyone", "<@U999"}},
		{WhatsApp, []string{"@4915112345678"}},
		{Discord, []string{"<@111>"}},
	}
	for _, tt := range tests {
		t.Run(tt.d.String(), func(t *testing.T) {
			got := Convert(tt.d, hostile, nil)
			for _, bad := range tt.mustNot {
				if strings.Contains(got, bad) {
					t.Errorf("Convert(%s, hostile, nil) = %q: contains %q", tt.d, got, bad)
				}
			}
			if tt.d == Telegram {
				if err := checkBalanced(got); err != nil {
					t.Errorf("Convert(Telegram) = %q: %v", got, err)
				}
			}
		})
	}
	// Mother's own mention stays live, and only it.
	own := []chat.Mention{{ID: "U111", Username: "mario"}}
	for _, c := range []struct {
		d          Dialect
		want, not  string
		ownMention []chat.Mention
	}{
		{Slack, "<@U111>", "<@U999>", own},
		{Discord, "<@U111>", "<@U222>", own},
		{Telegram, "[@mario](tg://user?id=111)", "tg://user?id=7", []chat.Mention{{ID: "111", Username: "mario"}}},
		{WhatsApp, "@4915112345678", "@4915199999999", []chat.Mention{{ID: "4915112345678@s.whatsapp.net", Username: "mario"}}},
	} {
		got := Convert(c.d, "✅ @mario allowed it; @luigi [x](tg://user?id=7) <@U999> @4915199999999", c.ownMention)
		if !strings.Contains(got, c.want) || strings.Contains(got, "<@U222>") {
			t.Errorf("Convert(%s) with Mother's mention = %q, want %q in it", c.d, got, c.want)
		}
		if c.d != Discord && c.d != WhatsApp && strings.Contains(got, c.not) {
			t.Errorf("Convert(%s) with Mother's mention = %q, want no %q", c.d, got, c.not)
		}
	}
}

// checkBalanced is a small check that MarkdownV2 brackets are escaped or
// paired (the adapter's tests check MarkdownV2 fully).
func checkBalanced(s string) error {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '[':
			depth++
		case ']':
			depth--
		}
	}
	if depth != 0 {
		return fmt.Errorf("unbalanced brackets")
	}
	return nil
}

func TestBreakMentions(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"@mario", "@\u200bmario"},
		{"hi @mario_x.", "hi @\u200bmario_x."},
		{"mario@example.com", "mario@example.com"},
		{"é@mario", "é@mario"},
		{".@mario", ".@\u200bmario"},
		{"@ alone @", "@ alone @"},
		{"", ""},
	} {
		if got := BreakMentions(c.in); got != c.want {
			t.Errorf("BreakMentions(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
