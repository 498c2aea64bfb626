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
