package chat

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/config"
)

func TestRegistry(t *testing.T) {
	var got Env
	boom := errors.New("boom")
	Register("test-b", Type{New: func(env Env) (Adapter, error) { got = env; return nil, boom }})
	Register("test-a", Type{New: func(env Env) (Adapter, error) { return nil, nil }})
	if ts := Types(); !slices.IsSorted(ts) || !slices.Contains(ts, "test-a") || !slices.Contains(ts, "test-b") {
		t.Errorf("Types() = %v, want both, sorted", ts)
	}
	if _, err := New(Env{Name: "b1", Config: config.Adapter{Type: "test-b"}}); !errors.Is(err, boom) || got.Name != "b1" {
		t.Errorf("New: err %v, constructor saw %q; want the constructor's error and the env", err, got.Name)
	}
	_, err := New(Env{Name: "x", Config: config.Adapter{Type: "nope"}})
	if err == nil || !strings.Contains(err.Error(), `unknown type "nope"`) || !strings.Contains(err.Error(), "test-a") {
		t.Errorf("unknown type: %v, want it named with the known types", err)
	}
	mustPanic(t, "twice", func() { Register("test-a", Type{New: func(Env) (Adapter, error) { return nil, nil }}) })
	mustPanic(t, "without a constructor", func() { Register("test-c", Type{}) })
}

func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		if r := recover(); r == nil || !strings.Contains(r.(string), want) {
			t.Errorf("panic %v, want one saying %q", r, want)
		}
	}()
	f()
}

func TestValidID(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"a", "C123", "slack-acme", "a.b_c-d", strings.Repeat("x", 128)} {
		if err := ValidID(ok); err != nil {
			t.Errorf("ValidID(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".hidden", "..", "a/b", "a b", "é", strings.Repeat("x", 129), "a\x00"} {
		if ValidID(bad) == nil {
			t.Errorf("ValidID(%q) accepted", bad)
		}
	}
}

func TestRunInfo(t *testing.T) {
	t.Parallel()
	if _, ok := RunInfoFrom(context.Background()); ok {
		t.Error("RunInfo in an empty context")
	}
	info := RunInfo{Adapter: "slack-acme", ChannelID: "C1", UserID: "U1", IsAdmin: true}
	got, ok := RunInfoFrom(WithRunInfo(context.Background(), info))
	if !ok || got != info {
		t.Errorf("RunInfoFrom = %+v, %v; want %+v", got, ok, info)
	}
	if q := info.QualifiedChannel(); q != "slack-acme/C1" || QualifiedID("a", "b") != "a/b" {
		t.Errorf("QualifiedChannel = %q", q)
	}
}

func TestCheckChoices(t *testing.T) {
	t.Parallel()
	ok := Choice{ID: "allow c-7f3a91c2 pypi.org:443", Label: "Allow", Style: ChoicePrimary}
	for _, c := range []struct {
		name    string
		choices []Choice
		want    string // "" for valid
	}{
		{"three", []Choice{ok, {ID: "deny", Label: "Deny", Style: ChoiceDanger}, {ID: "x", Label: "X"}}, ""},
		{"none", nil, "0 choices"},
		{"six", []Choice{{ID: "1", Label: "1"}, {ID: "2", Label: "2"}, {ID: "3", Label: "3"}, {ID: "4", Label: "4"}, {ID: "5", Label: "5"}, {ID: "6", Label: "6"}}, "6 choices"},
		{"empty id", []Choice{{Label: "A"}}, "want 1 to 80 bytes"},
		{"long id", []Choice{{ID: strings.Repeat("x", 81), Label: "A"}}, "want 1 to 80 bytes"},
		{"twice", []Choice{ok, ok}, "used twice"},
		{"blank label", []Choice{{ID: "a", Label: " "}}, "label"},
		{"long label", []Choice{{ID: "a", Label: strings.Repeat("é", 76)}}, "label"},
		{"style", []Choice{{ID: "a", Label: "A", Style: "green"}}, "unknown style"},
	} {
		err := CheckChoices(c.choices)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: CheckChoices = %v, want %q", c.name, err, c.want)
		}
	}
}
