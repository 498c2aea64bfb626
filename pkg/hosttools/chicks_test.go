package hosttools

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/config"
)

func TestChickAllowList(t *testing.T) {
	t.Parallel()
	c := NewChickInvoker(New(Options{}), nil, nil)
	tests := []struct {
		allow []string
		tool  string
		want  bool
	}{
		{nil, "notes.search", false},
		{[]string{"notes.search"}, "notes.search", true},
		{[]string{"notes.search"}, "notes.add", false},
		{[]string{"notes.*"}, "notes.add", true},
		{[]string{"notes.*"}, "notesx.add", false},
		{[]string{"notes.*"}, "notes.", false},
		{[]string{"my.notes.*"}, "my.notes.add", true},
		{[]string{"my.notes.*"}, "my.add", false},
		{[]string{" notes.list ", ""}, "notes.list", true},
		{[]string{"*"}, "notes.list", false},
	}
	for _, tc := range tests {
		c.SetAllowed(tc.allow)
		if got := c.Allowed(tc.tool); got != tc.want {
			t.Errorf("allow %q: Allowed(%q) = %v, want %v", tc.allow, tc.tool, got, tc.want)
		}
	}
}

// TestInvokeForChick: a chick may call the tools chicks.hostTools allows
// and nothing else; a forbidden or unknown tool is refused without the
// server hearing of it, and the refusal names what is allowed.
func TestInvokeForChick(t *testing.T) {
	t.Parallel()
	hs := newHTTPServer(t)
	notes, file := notesServer(t)
	m := newManager(t, Options{})
	start(t, m, map[string]config.MCPServer{"notes": notes, "web": {URL: hs.URL, Timeout: dur(300 * time.Millisecond)}})
	if text, _ := call(t, m, "notes.add", `{"text":"the deploy key is in the safe"}`); text != "Added note 1." {
		t.Fatalf("setup: %q", text)
	}
	before, _ := os.ReadFile(file)

	c := NewChickInvoker(m, []string{"notes.search", "notes.list", "web.hang", "web.count"}, nil)
	if got, want := qualified(c.Tools()), []string{"notes.list", "notes.search", "web.count", "web.hang"}; !slices.Equal(got, want) {
		t.Errorf("Tools() = %v, want %v", got, want)
	}

	// Allowed: the call goes through.
	text, isErr, err := c.InvokeForChick(t.Context(), "cli/local", "notes.search", `{"query":"deploy"}`)
	if err != nil || isErr || !strings.Contains(text, "the deploy key is in the safe") {
		t.Errorf("allowed search = %q, %v, %v", text, isErr, err)
	}
	// A bare name resolves among the allowed tools only.
	if text, isErr, err := c.InvokeForChick(t.Context(), "cli/local", "list", `{}`); err != nil || isErr || !strings.Contains(text, "1. [") {
		t.Errorf("allowed bare list = %q, %v, %v", text, isErr, err)
	}

	// Forbidden, unknown, and bare names of forbidden tools are refused.
	for _, tool := range []string{"notes.add", "notes.delete", "add", "web.echo", "mail.send", "nope"} {
		text, isErr, err := c.InvokeForChick(t.Context(), "cli/local", tool, `{"text":"pwned","id":1}`)
		if !errors.Is(err, ErrNotAllowed) || !isErr || text != "" {
			t.Errorf("InvokeForChick(%q) = %q, %v, %v; want a refusal", tool, text, isErr, err)
			continue
		}
		if want := `"` + tool + `" is not available to chicks (the configuration, chicks.hostTools, allows: notes.list, notes.search, web.count, web.hang)`; !strings.Contains(err.Error(), want) {
			t.Errorf("refusal = %q, want it to contain %q", err, want)
		}
	}
	if after, _ := os.ReadFile(file); string(after) != string(before) {
		t.Errorf("a refused call changed the notes:\n%s", after)
	}
	if calls := hs.Calls(); len(calls) != 0 {
		t.Errorf("the HTTP server saw refused calls: %v", calls)
	}

	// Allowed tools still fail as tools do: bad arguments and timeouts are
	// error results, not refusals.
	text, isErr, err = c.InvokeForChick(t.Context(), "cli/local", "web.count", `{"n":99}`)
	if err != nil || !isErr || !strings.Contains(text, "web.count was not called") {
		t.Errorf("bad args = %q, %v, %v", text, isErr, err)
	}
	text, isErr, err = c.InvokeForChick(t.Context(), "cli/local", "web.hang", `{}`)
	if err != nil || !isErr || !strings.Contains(text, "did not answer within 300ms") {
		t.Errorf("hang = %q, %v, %v", text, isErr, err)
	}

	// Default: none.
	c.SetAllowed(nil)
	if _, _, err := c.InvokeForChick(t.Context(), "cli/local", "notes.search", `{"query":"deploy"}`); !errors.Is(err, ErrNotAllowed) ||
		!strings.Contains(err.Error(), "allows: none") {
		t.Errorf("with no allow-list: %v", err)
	}
	if len(c.Tools()) != 0 {
		t.Errorf("Tools() with no allow-list = %v", qualified(c.Tools()))
	}
}
