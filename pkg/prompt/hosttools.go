package prompt

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// HostTool is one host-side tool (a tool of an MCP server in config.json's
// mcpServers) as the prompt lists it.
type HostTool struct {
	// Name is how the model calls it: "server.tool".
	Name        string
	Description string
	Params      []HostToolParam
}

// HostToolParam is one parameter of a host tool, already summarised from
// its JSON schema.
type HostToolParam struct {
	Name string
	// Type is a short type: string, integer, string[], "a"|"b", object.
	Type        string
	Description string
	Required    bool
}

// Signature renders the tool as name(param: type, opt?: type).
func (t HostTool) Signature() string {
	var b strings.Builder
	b.WriteString(t.Name)
	b.WriteByte('(')
	for i, p := range t.Params {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.Name)
		if !p.Required {
			b.WriteByte('?')
		}
		if p.Type != "" {
			b.WriteString(": ")
			b.WriteString(p.Type)
		}
	}
	b.WriteByte(')')
	return b.String()
}

// Details renders the signature, the description and one line per
// described parameter: the help a model gets when it called the tool with
// bad arguments.
func (t HostTool) Details() string {
	var b strings.Builder
	b.WriteString(t.Signature())
	if d := strings.TrimSpace(t.Description); d != "" {
		b.WriteString(": ")
		b.WriteString(clipRunes(firstParagraph(d), 400))
	}
	for _, p := range t.Params {
		if p.Description != "" {
			fmt.Fprintf(&b, "\n  %s: %s", p.Name, clipRunes(oneLine(p.Description), 160))
		}
	}
	return b.String()
}

const (
	motherHostToolsIntro = "These run on Mother's host, not in a chick. Call them with invoke_tool: tool is the name below, args an object of its parameters (? marks optional ones)."
	chickHostToolsIntro  = "Mother runs these on her host for you. Call them with host_tool: tool is the name below, args an object of its parameters (? marks optional ones)."
)

// hostTools lists the host tools within BudgetHostTools: each with its
// parameters described when everything fits, else signatures with short
// descriptions, else as many as fit and a line saying how many are left out.
func hostTools(in Input) string {
	if len(in.HostTools) == 0 {
		return ""
	}
	intro, call := motherHostToolsIntro, "invoke_tool"
	if in.Flavour == Chick {
		intro, call = chickHostToolsIntro, "host_tool"
	}
	detailed := func(t HostTool) string {
		var b strings.Builder
		b.WriteString("- ")
		b.WriteString(t.Signature())
		if d := strings.TrimSpace(t.Description); d != "" {
			b.WriteString(": ")
			b.WriteString(clipRunes(firstParagraph(d), 200))
		}
		for _, p := range t.Params {
			if p.Description != "" {
				fmt.Fprintf(&b, "\n  %s: %s", p.Name, clipRunes(oneLine(p.Description), 80))
			}
		}
		return b.String()
	}
	compact := func(t HostTool) string {
		line := "- " + t.Signature()
		if d := strings.TrimSpace(t.Description); d != "" {
			line += ": " + clipRunes(firstSentence(d), 100)
		}
		return line
	}
	for _, render := range []func(HostTool) string{detailed, compact} {
		lines := []string{intro}
		for _, t := range in.HostTools {
			lines = append(lines, render(t))
		}
		if s := strings.Join(lines, "\n"); utf8.RuneCountInString(s) <= BudgetHostTools {
			return s
		}
	}
	// Even the short form is too long: list what fits, say what does not.
	var b strings.Builder
	b.WriteString(intro)
	const reserve = 90 // room for the "not listed" line
	for i, t := range in.HostTools {
		line := "\n" + compact(t)
		if utf8.RuneCountInString(b.String())+utf8.RuneCountInString(line) > BudgetHostTools-reserve {
			var rest []string
			for _, r := range in.HostTools[i:] {
				rest = append(rest, r.Name)
			}
			more := fmt.Sprintf("\n[... %d more not listed: %s]", len(rest), strings.Join(rest, ", "))
			if utf8.RuneCountInString(b.String())+utf8.RuneCountInString(more) > BudgetHostTools {
				more = fmt.Sprintf("\n[... %d more host tools not listed; %s with an unknown name lists them all]", len(rest), call)
			}
			b.WriteString(more)
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

func firstParagraph(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "\n\n"); i >= 0 {
		s = s[:i]
	}
	return oneLine(s)
}

func firstSentence(s string) string {
	s = firstParagraph(s)
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	return s
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
