package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/completion/completiontest"
)

func motherCompletion(t *testing.T, shell string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"completion", shell}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("mother completion %s: exit %d: %s", shell, code, stderr.String())
	}
	return stdout.String()
}

// TestCompletions: mother's scripts complete her flags (--log-level's
// values), her commands and data directories in a real bash; zsh and
// fish accept theirs.
func TestCompletions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "data"), 0o700)
	os.WriteFile(filepath.Join(dir, "dump.json"), nil, 0o600)
	got := completiontest.BashCompletions(t, motherCompletion(t, "bash"),
		[]string{"mother", "--"},
		[]string{"mother", "--log-level", ""},
		[]string{"mother", "--cli", filepath.Join(dir, "da")},
		[]string{"mother", "mi"},
		[]string{"mother", "migrate", "--"},
		[]string{"mother", "migrate", "--models", filepath.Join(dir, "du")},
	)
	want := []string{
		"--check-config --cli --log-level --version",
		"debug info warn error",
		filepath.Join(dir, "data"),
		"migrate",
		"--adapter --models --no-models",
		filepath.Join(dir, "dump.json"),
	}
	for i, w := range want {
		if strings.Join(got[i], " ") != w {
			t.Errorf("completion %d = %q, want %q", i, got[i], w)
		}
	}
	completiontest.SyntaxCheck(t, motherCompletion(t, "zsh"), motherCompletion(t, "fish"))
}

// TestCompletionMigrateFlags: every flag the completions offer for mother
// migrate is one runMigrate takes (it parses them by hand).
func TestCompletionMigrateFlags(t *testing.T) {
	t.Parallel()
	for _, f := range migrateFlags {
		args := []string{"--" + f.Name}
		if f.Value {
			args = append(args, "x")
		}
		var stdout, stderr bytes.Buffer
		runMigrate(append(args, "-h"), &stdout, &stderr)
		if strings.Contains(stderr.String(), "unknown flag") {
			t.Errorf("mother migrate does not take --%s: %s", f.Name, stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	runMigrate([]string{"--bogus"}, &stdout, &stderr)
	if !strings.Contains(stderr.String(), "unknown flag --bogus") {
		t.Errorf("the check cannot fail: --bogus gave %q", stderr.String())
	}
}
