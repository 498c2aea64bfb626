package prompt

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mother-chat/mother/pkg/fsync"
)

// TruncationMarker ends a part cut at its budget.
const TruncationMarker = "\n[... truncated at the %d character budget; the rest is not shown]"

// ReadCapped reads a file and cuts it at budget characters with a visible
// marker. A missing file is empty, not an error.
func ReadCapped(path string, budget int) (text string, truncated bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	// Read a little past the budget (enough to know it is too long);
	// ReadAll's buffer starts small, and these files are mostly short.
	buf, _ := io.ReadAll(io.LimitReader(f, int64(4*budget+4)))
	return Cap(string(buf), budget)
}

// Cap cuts s so that it, with the marker, stays within budget characters
// (runes), preferring a line break near the cut.
func Cap(s string, budget int) (string, bool) {
	if budget <= 0 || utf8.RuneCountInString(s) <= budget {
		return s, false
	}
	marker := fmt.Sprintf(TruncationMarker, budget)
	keep := budget - utf8.RuneCountInString(marker)
	if keep < 0 {
		keep = 0
	}
	r := []rune(s)[:keep]
	cut := string(r)
	if i := strings.LastIndexByte(cut, '\n'); i > len(cut)*3/4 {
		cut = cut[:i]
	}
	return cut + marker, true
}

// Skill is one skill found in the workspace.
type Skill struct {
	Name        string
	Description string
	// Path is SKILL.md's path relative to the workspace (Mother) or to the
	// channel directory (chick).
	Path string
	// Channel marks a channel-level skill.
	Channel bool
}

// Skills lists the skills of the workspace and of the channel
// (skills/<name>/SKILL.md); a channel skill replaces a workspace skill of
// the same name. Sorted by name.
func Skills(workspace, channelDir string) []Skill {
	byName := map[string]Skill{}
	scan := func(dir, relBase string, channel bool) {
		entries, err := os.ReadDir(filepath.Join(dir, "skills"))
		if err != nil {
			return
		}
		for _, e := range entries {
			if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
				continue
			}
			p := filepath.Join(dir, "skills", e.Name(), "SKILL.md")
			name, desc, err := readSkill(p)
			if err != nil {
				continue
			}
			if name == "" {
				name = e.Name()
			}
			rel := filepath.ToSlash(filepath.Join(relBase, "skills", e.Name(), "SKILL.md"))
			byName[name] = Skill{Name: name, Description: desc, Path: rel, Channel: channel}
		}
	}
	if workspace != "" {
		scan(workspace, "", false)
	}
	if channelDir != "" {
		rel := ""
		if workspace != "" {
			if r, err := filepath.Rel(workspace, channelDir); err == nil && !strings.HasPrefix(r, "..") {
				rel = r
			}
		}
		scan(channelDir, rel, true)
	}
	out := make([]Skill, 0, len(byName))
	for _, s := range byName {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// readSkill reads a SKILL.md's name and description: from YAML-style front
// matter ("name:", "description:") when present, else the first non-empty
// line (without a leading '#').
func readSkill(path string) (name, desc string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	inFront, first := false, true
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if first && line == "---" {
			inFront, first = true, false
			continue
		}
		first = false
		if inFront {
			if line == "---" {
				inFront = false
				if desc != "" {
					return name, desc, nil
				}
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			v = strings.Trim(strings.TrimSpace(v), `"'`)
			switch {
			case ok && strings.TrimSpace(k) == "name":
				name = v
			case ok && strings.TrimSpace(k) == "description":
				desc = v
			}
			continue
		}
		if line != "" && desc == "" {
			return name, strings.TrimSpace(strings.TrimLeft(line, "#")), nil
		}
	}
	return name, desc, sc.Err()
}

func skillsSection(in Input) string {
	ws := in.Workspace
	if in.Flavour == Chick {
		ws = ""
	}
	skills := Skills(ws, in.ChannelDir)
	if in.Flavour == Chick {
		// The chick receives the shared skills inside its own skills/.
		shared := Skills(in.Workspace, "")
		seen := map[string]bool{}
		for _, s := range skills {
			seen[s.Name] = true
		}
		for _, s := range shared {
			if !seen[s.Name] {
				skills = append(skills, s)
			}
		}
		sort.Slice(skills, func(i, j int) bool { return skills[i].Name < skills[j].Name })
	}
	if len(skills) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Read a skill's SKILL.md before using it.\n")
	for i, s := range skills {
		line := fmt.Sprintf("- %s: %s\n", s.Name, clipRunes(s.Description, 100))
		if b.Len()+len(line) > BudgetSkills-40 {
			fmt.Fprintf(&b, "[... and %d more in skills/]", len(skills)-i)
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// fileTree lists the files the model works with, breadth first, within
// BudgetFileTree: the channel's directory first (two levels deep), then,
// for Mother, the workspace's top level (never other channels). Skill
// directories are counted, not listed: the skills section names them.
func fileTree(in Input) string {
	var b strings.Builder
	const maxEntries = 12
	list := func(root, display string, maxDepth int) {
		type item struct {
			rel   string
			depth int
		}
		queue := []item{{".", 0}}
		for len(queue) > 0 {
			it := queue[0]
			queue = queue[1:]
			entries, err := os.ReadDir(filepath.Join(root, it.rel))
			if err != nil {
				continue
			}
			var names []string
			for _, e := range entries {
				n := e.Name()
				if strings.HasPrefix(n, ".") || n == "channels" || n == "bash-output" ||
					strings.HasSuffix(n, ".torn") || strings.HasPrefix(n, "context.") {
					continue
				}
				if e.IsDir() {
					n += "/"
					if it.depth < maxDepth && e.Name() != "skills" {
						queue = append(queue, item{filepath.Join(it.rel, e.Name()), it.depth + 1})
					}
				}
				names = append(names, n)
			}
			if len(names) == 0 {
				continue
			}
			more := ""
			if len(names) > maxEntries {
				more = fmt.Sprintf(" (+%d more)", len(names)-maxEntries)
				names = names[:maxEntries]
			}
			dir := filepath.ToSlash(filepath.Join(display, it.rel))
			fmt.Fprintf(&b, "%s/: %s%s\n", strings.TrimSuffix(dir, "/"), strings.Join(names, " "), more)
		}
	}
	if in.Flavour == Chick {
		list(in.ChannelDir, in.ChickRoot, 2)
		return b.String()
	}
	if rel, err := filepath.Rel(in.Workspace, in.ChannelDir); err == nil && in.ChannelDir != "" && !strings.HasPrefix(rel, "..") {
		list(in.ChannelDir, rel, 1)
	}
	list(in.Workspace, "", 0)
	return b.String()
}

// motherTemplate scaffolds MOTHER.md on first start.
var motherTemplate = strings.Replace(`# Workspace guide

This file is injected into every conversation (at most BUDGET characters).
Keep it short: who is here, what they work on, where things are.

## People
- @someone: role, what they usually ask for, preferences

## Projects
- name: one line on what it is, where its files are

## Quick reference
- conventions, links, recurring tasks
`, "BUDGET", strconv.Itoa(BudgetMotherMD), 1)

const systemTemplate = `# SYSTEM.md: environment log

Changes made to this installation (tools installed, services configured,
credentials rotated), newest last, one line each with the date. Read on
demand; not injected into the prompt.
`

// Scaffold creates MOTHER.md (from a template), MEMORY.md and SYSTEM.md in
// the workspace when they do not exist; existing files are never touched.
// It returns the files it created.
func Scaffold(workspace string) ([]string, error) {
	var created []string
	for name, content := range map[string]string{"MOTHER.md": motherTemplate, "MEMORY.md": "", "SYSTEM.md": systemTemplate} {
		p := filepath.Join(workspace, name)
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return created, fmt.Errorf("scaffold %s: %w", name, err)
		}
		_, werr := f.WriteString(content)
		if err := errors.Join(werr, fsync.File(f, fsync.KindReplace), f.Close()); err != nil {
			return created, fmt.Errorf("scaffold %s: %w", name, err)
		}
		created = append(created, name)
	}
	sort.Strings(created)
	return created, nil
}
