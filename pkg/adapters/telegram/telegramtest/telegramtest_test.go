package telegramtest

import "testing"

func TestCheckMarkdownV2(t *testing.T) {
	good := []string{
		`plain words`,
		`*bold* _italic_ ~strike~ ||spoiler||`,
		`escaped \. \! \- \( \) \_ \*`,
		"a `code (with) . chars` and a block:\n```go\nfmt.Println(\"x.y\")\n```",
		`[a link](https://example.com/a_(b\))`,
		"> a quote\n> more",
		"`a \\` tick`",
	}
	bad := []string{
		`a dot.`,
		`*unclosed bold`,
		"```\nno end",
		"`no end",
		`[text](no end`,
		`a ) paren`,
		"inline `has ` a tick`",
		`trailing \`,
		"x > y",
	}
	for _, s := range good {
		if err := CheckMarkdownV2(s); err != nil {
			t.Errorf("CheckMarkdownV2(%q) = %v, want nil", s, err)
		}
	}
	for _, s := range bad {
		if err := CheckMarkdownV2(s); err == nil {
			t.Errorf("CheckMarkdownV2(%q) accepted it", s)
		}
	}
}

func TestNotifies(t *testing.T) {
	for _, c := range []struct {
		text, parse string
		want        int
	}{
		{`hi \@mario and [x](tg://user?id=7)`, "MarkdownV2", 2},
		{`[@mario](tg://user?id=7) only`, "MarkdownV2", 1},
		{"`@mario` in code, mario@example\\.com", "MarkdownV2", 0},
		{"@\u200bmario broken", "MarkdownV2", 0},
		{"@mario in a caption", "", 1},
		{"[x](tg://user?id=7) in plain text", "", 0},
	} {
		if got := Notifies(c.text, c.parse); len(got) != c.want {
			t.Errorf("Notifies(%q, %q) = %v, want %d", c.text, c.parse, got, c.want)
		}
	}
}
