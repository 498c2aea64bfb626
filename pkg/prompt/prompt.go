// Package prompt builds the platform-neutral system prompt, rebuilt for
// every run from the workspace: identity, formatting rules, the adapter's
// users and channels, the workspace layout, MOTHER.md, the global and
// channel MEMORY.md, the skills, the events section and a capped file tree.
// Every injected part has a character budget (mother-design.md 1.8);
// over-long parts are cut with a visible marker, never silently.
// REFERENCE.md (regenerated at each start) and SYSTEM.md are read on
// demand, not injected. The numbers both state (queue sizes, chick limits
// and budgets) come from the configuration through Limits.
//
// Two flavours share the parts: Mother's (chat and routing, safe tools)
// and the chick's (one goal, full tools, in /workspace). Both list the host
// tools (MCP servers on Mother's host) they may call, within a budget.
package prompt

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
)

// Character budgets of the injected parts (mother-design.md 1.8). The
// static rules budget covers identity, formatting, environment, layout,
// events and every heading; the file tree row of the table (500-1000) is
// shared between the tree and the skills list.
const (
	BudgetStatic        = 2200
	BudgetMotherMD      = 3000
	BudgetGlobalMemory  = 1500
	BudgetChannelMemory = 1000
	BudgetDirectory     = 1500 // users and channels of the adapter
	BudgetSkills        = 400
	BudgetFileTree      = 600
	// BudgetHostTools covers the host tools (MCP servers) section, present
	// only when config.json declares servers: names, descriptions and a
	// compact parameter summary.
	BudgetHostTools = 1500
	// BudgetTotal is the sum: about 2550 tokens at 4 characters a token,
	// the table's upper total, plus about 375 tokens of host tools.
	BudgetTotal = BudgetStatic + BudgetMotherMD + BudgetGlobalMemory + BudgetChannelMemory + BudgetDirectory + BudgetSkills + BudgetFileTree + BudgetHostTools
)

// Flavour selects whose prompt is built.
type Flavour int

// Flavours.
const (
	// Mother chats, routes heavy goals to chicks, and has safe tools only.
	Mother Flavour = iota
	// Chick works one goal to the end with bash, read, write, edit, attach.
	Chick
)

// Input is what one run's prompt is built from.
type Input struct {
	Flavour Flavour
	// Workspace is <data>/workspace; ChannelDir the channel's directory.
	// For a chick prompt built on Mother's side they are the host paths of
	// what the chick receives; ChickRoot is how the chick sees the channel
	// directory (default "/workspace").
	Workspace  string
	ChannelDir string
	ChickRoot  string
	// Channel is the qualified channel id ("slack-acme/C123").
	Channel  string
	Users    []chat.UserInfo
	Channels []chat.ChannelInfo
	Now      time.Time
	// Location is the harness time zone for events (default time.Local).
	Location *time.Location
	// HostTools are the host-side tools the model may call (through
	// invoke_tool for Mother, host_tool for a chick), listed within
	// BudgetHostTools.
	HostTools []HostTool
	// Limits are the configured numbers the prompt states (queue sizes);
	// zero fields take config's defaults.
	Limits Limits
	// Extra sections (chick tiers, ...) appended after the
	// built-in ones, each under its own heading. They count as static.
	Extra []Section
}

// Section is one titled part of the prompt.
type Section struct {
	Title string
	Body  string
	// Budget is the body's character budget; 0 means the body is static
	// text counted against BudgetStatic.
	Budget int
	// Truncated is set when the body was cut at its budget.
	Truncated bool
}

// Build renders the system prompt.
func Build(in Input) string {
	return Render(Sections(in))
}

// Render joins sections: the first is the untitled preamble.
func Render(secs []Section) string {
	var b strings.Builder
	for _, s := range secs {
		body := strings.TrimSpace(s.Body)
		if body == "" {
			continue
		}
		if s.Title != "" {
			fmt.Fprintf(&b, "## %s\n", s.Title)
		}
		b.WriteString(body)
		b.WriteString("\n\n")
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

// Sections returns the prompt's parts in order, each cut at its budget.
func Sections(in Input) []Section {
	if in.Now.IsZero() {
		in.Now = clock.Real{}.Now()
	}
	if in.Location == nil {
		in.Location = time.Local
	}
	if in.ChickRoot == "" {
		in.ChickRoot = "/workspace"
	}
	var secs []Section
	add := func(title, body string, budget int) {
		s := Section{Title: title, Budget: budget}
		if budget > 0 {
			s.Body, s.Truncated = Cap(strings.TrimSpace(body), budget)
		} else {
			s.Body = body
		}
		secs = append(secs, s)
	}
	file := func(title, path string, budget int) {
		text, cut := ReadCapped(path, budget)
		secs = append(secs, Section{Title: title, Budget: budget, Body: strings.TrimSpace(text), Truncated: cut})
	}

	if in.Flavour == Chick {
		add("", chickIdentity, 0)
	} else {
		add("", motherIdentity, 0)
	}
	add("Formatting", formatting, 0)
	add("Now", environment(in), 0)
	add("Users and channels", directory(in), BudgetDirectory)
	if in.Flavour == Chick {
		add("Workspace", fmt.Sprintf(chickLayout, in.ChickRoot), 0)
	} else {
		add("Workspace", motherLayout(in), 0)
	}
	file("Workspace guide (MOTHER.md)", filepath.Join(in.Workspace, "MOTHER.md"), BudgetMotherMD)
	file("Workspace memory (MEMORY.md)", filepath.Join(in.Workspace, "MEMORY.md"), BudgetGlobalMemory)
	file("Channel memory (MEMORY.md)", filepath.Join(in.ChannelDir, "MEMORY.md"), BudgetChannelMemory)
	add("Skills", skillsSection(in), BudgetSkills)
	if in.Flavour == Mother {
		add("Events", events(in), 0)
	}
	add("Files", fileTree(in), BudgetFileTree)
	add("Host tools", hostTools(in), BudgetHostTools)
	secs = append(secs, in.Extra...)
	return secs
}

const motherIdentity = `You are Mother, an assistant in a team's chat. Be concise and direct; no emojis.
Answer simple questions and chat yourself. Hand heavy work (code, research, several steps, anything needing a shell) to a chick with spawn_chick when you have it, then relay its result. You have no shell: use only your tools.
If a message needs no reply (an event with nothing to report), answer exactly [SILENT].`

const chickIdentity = `You are a chick: a worker Mother started for one goal in a disposable container. Work on the goal until it is done, using your tools (bash, read, write, edit, attach); nobody answers questions mid-way, so decide sensibly yourself.
Give every tool call a short label saying what it does. When done, answer with the result for the people in the channel: what you did, what you found, which files you attached.`

const formatting = `Write standard markdown: **bold**, *italic*, ` + "`code`" + `, fenced blocks, [text](url). Mention people as @username.`

func environment(in Input) string {
	now := in.Now.In(in.Location)
	tz := in.Location.String()
	if tz == "Local" || tz == "" {
		tz = now.Format("-07:00")
	}
	return fmt.Sprintf("%s (time zone %s). Channel: %s.", now.Format("Monday 2006-01-02 15:04 -07:00"), tz, in.Channel)
}

// directory lists the adapter's users and channels within BudgetDirectory,
// saying how many did not fit.
func directory(in Input) string {
	var lines []string
	for _, u := range in.Users {
		l := "@" + u.Username
		if u.DisplayName != "" && u.DisplayName != u.Username {
			l += " (" + u.DisplayName + ")"
		}
		lines = append(lines, l)
	}
	nUsers := len(lines)
	for _, c := range in.Channels {
		l := "#" + c.Name
		if c.Name != c.ID {
			l += " (" + c.ID + ")"
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		return ""
	}
	var b strings.Builder
	const reserve = 60 // room for the "and N more" line
	for i, l := range lines {
		if b.Len()+len(l)+1 > BudgetDirectory-reserve {
			users, chans := max(nUsers-i, 0), len(lines)-max(i, nUsers)
			fmt.Fprintf(&b, "[... and %d more users, %d more channels not listed]", users, chans)
			return b.String()
		}
		if i == 0 && nUsers > 0 {
			b.WriteString("Users: ")
		}
		if i == nUsers {
			b.WriteString("Channels: ")
		}
		b.WriteString(l)
		if i == nUsers-1 || i == len(lines)-1 {
			b.WriteString("\n")
		} else {
			b.WriteString(", ")
		}
	}
	return b.String()
}

func motherLayout(in Input) string {
	ch := "channels/<adapter>/<id>"
	if rel, err := filepath.Rel(in.Workspace, in.ChannelDir); err == nil && in.ChannelDir != "" && !strings.HasPrefix(rel, "..") {
		ch = filepath.ToSlash(rel)
	}
	return fmt.Sprintf(`Paths are relative to the workspace.
- MOTHER.md guide, MEMORY.md shared memory (both below; keep memory current with update_memory); REFERENCE.md: your tools, limits, events, skills (read when needed); SYSTEM.md: environment log (not shown).
- skills/<name>/SKILL.md shared skills; events/ scheduled events.
- This channel: %[1]s/ with MEMORY.md, log.jsonl (every message), daily/YYYY-MM-DD.md (one line a message), attachments/, scratch/, skills/. Attachment paths in messages are relative to %[1]s/.
- write and edit change only this channel's skills/ and, when an admin asks, MOTHER.md (%[2]d characters), SYSTEM.md and skills/.`, ch, BudgetMotherMD)
}

const chickLayout = `%[1]s is this channel's directory: MEMORY.md, attachments/ (files people sent), scratch/ (work area), daily/ (logs), skills/ (channel and shared skills). Work there; relative paths start there. Long command output is saved under scratch/bash-output/. Only files you attach reach the channel, with two exceptions: a skill you create or change under skills/<name>/ (SKILL.md starting with front matter: "---", "name: <name>", "description: <one line>", "---") is offered to the channel when you finish, and update_memory changes the channel's MEMORY.md (editing your copy changes nothing).`

func events(in Input) string {
	tz := in.Location.String()
	if tz == "Local" || tz == "" {
		tz = "UTC"
	}
	return fmt.Sprintf(`Events wake you later: JSON files in events/, managed with schedule_event, list_events and cancel_event:
{"type":"immediate","channelId":"%[1]s","text":"New ticket #12"}
{"type":"one-shot","channelId":"%[1]s","text":"Remind @mario: dentist","at":"2025-12-15T09:00:00+01:00"}
{"type":"periodic","channelId":"%[1]s","text":"Summarise the inbox","schedule":"0 9 * * 1-5","timezone":"%[2]s"}
"at" needs an offset; cron is minute hour day-of-month month day-of-week; times without a zone are %[2]s. A firing event reaches you as "[EVENT:file:type:schedule] text". At most %[3]d queue per channel; more wait their turn. More in REFERENCE.md.`, in.Channel, tz, in.Limits.withDefaults().EventQueue)
}
