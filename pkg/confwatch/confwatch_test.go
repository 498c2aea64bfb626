package confwatch

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	_ "github.com/mother-chat/mother/pkg/adapters/discord" // registers "discord" for the configs below
	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
)

type applied struct {
	mu   sync.Mutex
	cfgs []*config.Config
}

func (a *applied) apply(_ context.Context, _, cur *config.Config) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cfgs = append(a.cfgs, cur)
}

func (a *applied) n() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.cfgs)
}

func (a *applied) last() *config.Config {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfgs[len(a.cfgs)-1]
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func servers(c *config.Config) []string {
	var out []string
	for n := range c.MCPServers {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// TestReloadOnChange: a changed config.json (written in place or saved by
// rename) is applied after the debounce; the same content again or an
// invalid config apply nothing; Reload applies even an unchanged file.
func TestReloadOnChange(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, config.File)
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"mcpServers":{"a":{"command":"a"}}}`)
	cur, err := config.Load(dir, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	var got applied
	w := New(Options{Dir: dir, Current: cur, Apply: got.apply, Clock: clk, Debounce: time.Second,
		Load: func() (*config.Config, error) { return config.Load(dir, func(string) string { return "" }) }})
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	settle := func() {
		t.Helper()
		waitFor(t, "the change to be noticed", func() bool { return clk.Pending() > 0 })
		clk.Advance(time.Second)
	}

	write(`{"mcpServers":{"a":{"command":"a"},"b":{"url":"http://127.0.0.1:1/mcp"}}}`)
	settle()
	waitFor(t, "the reload", func() bool { return got.n() == 1 })
	if s := servers(got.last()); !slices.Equal(s, []string{"a", "b"}) {
		t.Errorf("servers after the first change = %v", s)
	}

	// An editor's save: a new file renamed over the old one.
	if err := atomicfile.WriteFile(path, []byte(`{"mcpServers":{"b":{"url":"http://127.0.0.1:1/mcp"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	settle()
	waitFor(t, "the reload after rename", func() bool { return got.n() == 2 })
	if s := servers(got.last()); !slices.Equal(s, []string{"b"}) {
		t.Errorf("servers after the rename = %v", s)
	}

	// Invalid, then the applied content again: nothing is applied and the
	// running configuration stays. settle fires the debounce after the
	// write, and the reload runs inside Advance: when it returns, the file
	// as written has been read.
	write(`{"mcpServers":{"c":{}}}`)
	settle()
	if n := got.n(); n != 2 {
		t.Errorf("%d reloads after an invalid config.json, want 2: it was applied", n)
	}
	write(`{"mcpServers":{"b":{"url":"http://127.0.0.1:1/mcp"}}}`) // back to the applied content
	settle()
	if n := got.n(); n != 2 {
		t.Errorf("%d reloads after config.json got the applied content again, want 2: unchanged content was applied", n)
	}
	if s := servers(w.Current()); !slices.Equal(s, []string{"b"}) {
		t.Errorf("Current() = %v", s)
	}

	// SIGHUP: applied even though the file is unchanged.
	if err := w.Reload(); err != nil {
		t.Fatal(err)
	}
	if got.n() != 3 {
		t.Errorf("Reload did not apply")
	}
	write(`{"mcpServers":`)
	if err := w.Reload(); err == nil {
		t.Error("Reload of a broken file succeeded")
	}
	if got.n() != 3 {
		t.Errorf("a broken file was applied")
	}
}

func TestChanged(t *testing.T) {
	dir := t.TempDir()
	load := func(s string) *config.Config {
		t.Helper()
		os.WriteFile(filepath.Join(dir, config.File), []byte(s), 0o600)
		c, err := config.Load(dir, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := load(`{"adapters":{"d":{"type":"discord","botToken":"x"}},"mcpServers":{"a":{"command":"a"}},"chicks":{"hostTools":["a.*"]}}`)
	b := load(`{"adapters":{"d":{"type":"discord","botToken":"y"}},"mcpServers":{"b":{"command":"b"}},"chicks":{"hostTools":["b.x"],"maxConcurrent":2}}`)
	if got, want := Changed(a, b, Reloadable...), []string{"adapters", "chicks.maxConcurrent", "chicks.hosts"}; !slices.Equal(got, want) {
		t.Errorf("Changed = %v, want %v", got, want)
	}
	if got := Changed(a, a, Reloadable...); len(got) != 0 {
		t.Errorf("Changed(a, a) = %v", got)
	}
}

// TestOtherFilesScheduleNothing: changes to other files in the data
// directory, and config.json's attribute changes, start no reload. The test
// feeds the loop itself; each send returns only when the loop has taken
// the event, so after the next one the previous one has been handled.
func TestOtherFilesScheduleNothing(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	w := New(Options{Dir: dir, Clock: clk, Debounce: time.Second, Load: func() (*config.Config, error) { return &config.Config{}, nil }})
	evs := make(chan fsnotify.Event)
	w.openWatch = func(string) (fileWatch, error) {
		return fileWatch{events: evs, errors: make(chan error), close: func() error { return nil }}, nil
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	at := func(name string, op fsnotify.Op) fsnotify.Event {
		return fsnotify.Event{Name: filepath.Join(dir, name), Op: op}
	}
	for _, ev := range []fsnotify.Event{
		at("other.json", fsnotify.Create),
		at("other.json", fsnotify.Write),
		at(".config.json.tmp", fsnotify.Write),
		at(config.File, fsnotify.Chmod),
		at("other.json", fsnotify.Remove), // taken once the Chmod is handled
	} {
		evs <- ev
	}
	if n := clk.Pending(); n != 0 {
		t.Fatalf("%d reloads scheduled by other files' changes, want none", n)
	}
	// The same way, config.json's own change does schedule one.
	evs <- at(config.File, fsnotify.Write)
	evs <- at("other.json", fsnotify.Write)
	if n := clk.Pending(); n != 1 {
		t.Errorf("%d reloads scheduled after config.json changed, want 1", n)
	}
}
