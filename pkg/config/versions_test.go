package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// withRenames swaps the rename table for the test's length.
func withRenames(t *testing.T, table []Rename) {
	saved := renames
	renames = table
	t.Cleanup(func() { renames = saved })
}

func writeConfig(t *testing.T, dir, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, File), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestTablesAreWellFormed(t *testing.T) {
	for _, r := range renames {
		op, _ := splitField(r.Old)
		np, _ := splitField(r.New)
		if !slices.Equal(op, np) || r.Release == "" {
			t.Errorf("rename %+v: old and new need the same parent and a release", r)
		}
	}
	for _, a := range added {
		if a.Field == "" || a.Release == "" {
			t.Errorf("added %+v: want a field and a release", a)
		}
	}
}

func TestRenamedFieldKeepsWorking(t *testing.T) {
	// Test-only: log.level was once called log.verbosity, and each
	// adapter's dm was its directMessages.
	withRenames(t, []Rename{
		{Old: "log.verbosity", New: "log.level", Release: "0.2.0"},
		{Old: "adapters.*.directMessages", New: "adapters.*.dm", Release: "0.2.0"},
	})
	dir := t.TempDir()
	writeConfig(t, dir, `{"log": {"verbosity": "debug"}, "adapters": {"acme": {"type": "slack", "botToken": "xoxb-1", "appToken": "xapp-1", "directMessages": ["U1"]}}}`)
	cfg, err := Load(dir, func(string) string { return "" })
	if err != nil {
		t.Fatalf("Load with old names: %v", err)
	}
	if cfg.Log.Level != "debug" || !slices.Equal(cfg.Adapters["acme"].DM.Users, []string{"U1"}) {
		t.Errorf("log.level = %q, adapters.acme.dm = %v; want the old names' values", cfg.Log.Level, cfg.Adapters["acme"].DM)
	}
	var warnings []string
	for _, r := range cfg.Renamed() {
		warnings = append(warnings, r.Warning())
	}
	want := []string{
		"config field log.verbosity was renamed to log.level in Mother 0.2.0; the old name still works for now: rename it in config.json",
		"config field adapters.acme.directMessages was renamed to adapters.acme.dm in Mother 0.2.0; the old name still works for now: rename it in config.json",
	}
	if !slices.Equal(warnings, want) {
		t.Errorf("warnings = %q\nwant %q", warnings, want)
	}

	// Both names at once: which one would win is not guessed.
	writeConfig(t, dir, `{"log": {"verbosity": "debug", "level": "warn"}}`)
	_, err = Load(dir, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "log.verbosity: renamed to log.level in Mother 0.2.0, which is set too: remove verbosity") {
		t.Errorf("Load with both names = %v", err)
	}

	// The new name alone: no warning.
	writeConfig(t, dir, `{"log": {"level": "warn"}}`)
	if cfg, err := Load(dir, func(string) string { return "" }); err != nil || len(cfg.Renamed()) != 0 {
		t.Errorf("Load with the new name = %v, renamed %v", err, cfg.Renamed())
	}
}

func TestUnknownFieldNamesTheNewerRelease(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, `{"chicks": {"foo": 1}}`)
	_, err := Load(dir, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "chicks.foo: unknown field") {
		t.Fatalf("Load = %v, want chicks.foo unknown", err)
	}
	// Last run by a newer release: that release may have added it.
	if err := os.MkdirAll(filepath.Join(dir, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state/format.json"), []byte(`{"format":1,"release":"0.3.0"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(dir, func(string) string { return "" })
	want := "chicks.foo: not known to Mother 0.2.0; the data directory was last run by Mother 0.3.0, which may have added it: remove it to run 0.2.0, or run Mother 0.3.0 again"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load = %v\nwant %s", err, want)
	}
	// An older or equal release adds no hint.
	if err := os.WriteFile(filepath.Join(dir, "state/format.json"), []byte(`{"format":1,"release":"0.2.0"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err = Load(dir, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "chicks.foo: unknown field") {
		t.Errorf("Load after 0.2.0 = %v", err)
	}
}

func TestNotKnownToAnOlderRelease(t *testing.T) {
	table := []Added{{Field: "chicks.compat", Release: "0.2.0"}, {Field: "adapters.*.threads", Release: "0.3.0"}}
	rn := []Rename{{Old: "log.verbosity", New: "log.level", Release: "0.2.0"}}
	b := []byte(`{"chicks": {"compat": "strict"}, "adapters": {"a": {"threads": true}, "b": {}}, "log": {"level": "info"}}`)
	got := notKnownTo(b, "0.1.0", table, rn)
	want := []string{
		"config field chicks.compat came with Mother 0.2.0; Mother 0.1.0 refuses it: remove it from config.json before starting 0.1.0",
		"config field adapters.a.threads came with Mother 0.3.0; Mother 0.1.0 refuses it: remove it from config.json before starting 0.1.0",
		"config field log.level was named verbosity before Mother 0.2.0; Mother 0.1.0 knows only the old name: rename it back in config.json before starting 0.1.0",
	}
	if !slices.Equal(got, want) {
		t.Errorf("notKnownTo(0.1.0) = %q\nwant %q", got, want)
	}
	if got := notKnownTo(b, "0.2.0", table, rn); len(got) != 1 || !strings.Contains(got[0], "adapters.a.threads") {
		t.Errorf("notKnownTo(0.2.0) = %q, want only the 0.3.0 field", got)
	}
	// The real tables: nothing added or renamed since 0.1.0 yet.
	dir := t.TempDir()
	writeConfig(t, dir, string(b))
	if got := NotKnownTo(dir, "0.1.0"); len(added)+len(renames) == 0 && len(got) != 0 {
		t.Errorf("NotKnownTo with empty tables = %q", got)
	}
}
