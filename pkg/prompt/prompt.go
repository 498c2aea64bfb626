// Package prompt builds Mother's platform-neutral system prompt from the
// workspace: identity, formatting rules, the adapter's users and channels,
// and the memory files, each cut at its character budget with a visible
// marker.
package prompt

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
)

// Character budgets of the injected files (mother-design.md 1.8).
const (
	BudgetMotherMD      = 3000
	BudgetGlobalMemory  = 1500
	BudgetChannelMemory = 1000
)

// Input is what one run's prompt is built from.
type Input struct {
	// Workspace is <data>/workspace; ChannelDir the channel's directory.
	Workspace  string
	ChannelDir string
	// Channel is the qualified channel id ("slack-acme/C123").
	Channel  string
	Users    []chat.UserInfo
	Channels []chat.ChannelInfo
	Now      time.Time
}

// Build renders the system prompt.
func Build(in Input) string {
	var b strings.Builder
	b.WriteString("You are Mother, a chat assistant in a team's chat channels. Be concise. No emojis.\n\n")
	b.WriteString("## Text formatting\nUse standard markdown: **bold**, *italic*, `code`, ```blocks```, [text](url). Mention people as @username.\n\n")
	fmt.Fprintf(&b, "## Now\n%s. This channel is %s.\n\n", in.Now.Format("Monday 2006-01-02 15:04 MST (-07:00)"), in.Channel)
	if len(in.Users) > 0 {
		b.WriteString("## Users\n")
		for _, u := range in.Users {
			fmt.Fprintf(&b, "@%s\t%s\n", u.Username, u.DisplayName)
		}
		b.WriteString("\n")
	}
	if len(in.Channels) > 0 {
		b.WriteString("## Channels\n")
		for _, c := range in.Channels {
			fmt.Fprintf(&b, "#%s\t%s\n", c.Name, c.ID)
		}
		b.WriteString("\n")
	}
	section := func(title, path string, budget int) {
		text, _ := ReadCapped(path, budget)
		if strings.TrimSpace(text) == "" {
			return
		}
		fmt.Fprintf(&b, "## %s\n%s\n\n", title, strings.TrimSpace(text))
	}
	section("Workspace guide (MOTHER.md)", filepath.Join(in.Workspace, "MOTHER.md"), BudgetMotherMD)
	section("Workspace memory (MEMORY.md)", filepath.Join(in.Workspace, "MEMORY.md"), BudgetGlobalMemory)
	section("Channel memory (MEMORY.md)", filepath.Join(in.ChannelDir, "MEMORY.md"), BudgetChannelMemory)
	return strings.TrimRight(b.String(), "\n") + "\n"
}

// TruncationMarker ends a file cut at its budget.
const TruncationMarker = "\n[... truncated: file exceeds its %d character budget; the rest is not shown]"

// ReadCapped reads a file and cuts it at budget characters (runes) with a
// visible marker. A missing file is empty, not an error.
func ReadCapped(path string, budget int) (text string, truncated bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	return Cap(string(b), budget)
}

// Cap cuts s at budget runes, appending the marker when it does.
func Cap(s string, budget int) (string, bool) {
	if budget <= 0 || len(s) <= budget {
		return s, false
	}
	r := []rune(s)
	if len(r) <= budget {
		return s, false
	}
	return string(r[:budget]) + fmt.Sprintf(TruncationMarker, budget), true
}
