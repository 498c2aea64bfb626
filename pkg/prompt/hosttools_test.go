package prompt

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func notesTools() []HostTool {
	return []HostTool{
		{Name: "notes.add", Description: "Add a note.\n\nNotes are kept in a file.", Params: []HostToolParam{
			{Name: "text", Type: "string", Required: true, Description: "the note's text"},
			{Name: "tags", Type: "string[]", Description: "labels to find it again"},
		}},
		{Name: "notes.search", Description: "Search notes. Case-insensitive.", Params: []HostToolParam{
			{Name: "query", Type: "string", Required: true},
			{Name: "limit", Type: "integer"},
		}},
	}
}

// TestHostToolsSectionLevels: the section gives parameter descriptions when
// they fit, falls back to signatures with one-sentence descriptions, and
// finally lists what fits and names (or counts) the rest; it always stays
// within its budget and names the calling tool of the flavour.
func TestHostToolsSectionLevels(t *testing.T) {
	many := func(n, descLen int) []HostTool {
		var out []HostTool
		for i := range n {
			out = append(out, HostTool{
				Name:        fmt.Sprintf("srv.tool%03d", i),
				Description: "First sentence here. " + strings.Repeat("x", descLen),
				Params:      []HostToolParam{{Name: "q", Type: "string", Required: true, Description: "the query"}},
			})
		}
		return out
	}
	tests := []struct {
		name    string
		flavour Flavour
		tools   []HostTool
		want    []string
		notWant []string
	}{
		{"detailed", Mother, notesTools(),
			[]string{"## Host tools\n", "invoke_tool", "- notes.add(text: string, tags?: string[]): Add a note.\n  text: the note's text\n  tags: labels to find it again",
				"- notes.search(query: string, limit?: integer): Search notes. Case-insensitive."},
			[]string{"Notes are kept in a file", "host_tool"}},
		{"chick", Chick, notesTools(), []string{"host_tool", "notes.add(text: string"}, []string{"invoke_tool"}},
		{"compact", Mother, many(12, 150),
			[]string{"- srv.tool000(q: string): First sentence here.\n- srv.tool001("}, []string{"the query", "xxx", "not listed"}},
		{"cut with names", Mother, many(30, 10), []string{"- srv.tool000(q: string)", "more not listed: ", "srv.tool029]"}, nil},
		{"cut with count", Chick, many(300, 10), []string{"- srv.tool000(q: string)", "more host tools not listed; host_tool with an unknown name lists them all]"}, nil},
		{"none", Mother, nil, nil, []string{"Host tools"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Flavour: tc.flavour, Workspace: t.TempDir(), HostTools: tc.tools}
			p := Build(in)
			for _, w := range tc.want {
				if !strings.Contains(p, w) {
					t.Errorf("prompt lacks %q", w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(p, w) {
					t.Errorf("prompt has %q", w)
				}
			}
			for _, s := range Sections(in) {
				if s.Title == "Host tools" {
					if n := utf8.RuneCountInString(s.Body); n > BudgetHostTools {
						t.Errorf("host tools section: %d characters, budget %d", n, BudgetHostTools)
					}
					if s.Truncated {
						t.Error("the section was cut by Cap: the renderer should fit it itself")
					}
				}
			}
		})
	}
}

func TestHostToolDetails(t *testing.T) {
	got := notesTools()[0].Details()
	want := "notes.add(text: string, tags?: string[]): Add a note.\n  text: the note's text\n  tags: labels to find it again"
	if got != want {
		t.Errorf("Details() = %q, want %q", got, want)
	}
	if got, want := (HostTool{Name: "x.y"}).Signature(), "x.y()"; got != want {
		t.Errorf("Signature() = %q, want %q", got, want)
	}
}
