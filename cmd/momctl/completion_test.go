package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/completion/completiontest"
)

func completionScript(t *testing.T, shell string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	c := &cli{stdout: &stdout, stderr: &stderr, clock: clock.NewFake(now), loc: time.UTC, version: "1.4.1"}
	if code := run(t.Context(), []string{"completion", shell}, c, func(string) string { return "" }); code != 0 {
		t.Fatalf("momctl completion %s: exit %d: %s", shell, code, stderr.String())
	}
	return stdout.String()
}

// TestCompletions: the scripts momctl prints complete its real commands
// and the flags each one parses, in a real bash; zsh and fish accept
// theirs.
func TestCompletions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A stand-in momctl answers the chick ids the way "momctl chicks ls -q"
	// does (the real one needs a Mother: cmd/mother's end-to-end test).
	prog := filepath.Join(dir, "momctl")
	os.WriteFile(prog, []byte("#!/bin/sh\n[ \"$*\" = '--socket /run/m.sock chicks ls -q' ] && printf 'c-1a2b3c4d\\n'\n"), 0o700)
	got := completiontest.BashCompletions(t, completionScript(t, "bash"),
		[]string{prog, ""},
		[]string{prog, "chicks", ""},
		[]string{prog, "chicks", "watch", "--"},
		[]string{prog, "chicks", "tail", "--"},
		[]string{prog, "chicks", "ls", "-"},
		[]string{prog, "--socket", "/run/m.sock", "chicks", "tail", "c-"},
		[]string{prog, "status", "--"},
		[]string{prog, "completion", ""},
	)
	want := []string{
		"chicks events status health tools usage roles completion",
		"ls kill logs watch tail",
		"--all --count --interval --json",
		"--deltas --json --no-follow",
		"--all --json -q",
		"c-1a2b3c4d",
		"--json",
		"bash zsh fish",
	}
	for i, w := range want {
		if strings.Join(got[i], " ") != w {
			t.Errorf("completion %d = %q, want %q", i, got[i], w)
		}
	}
	completiontest.SyntaxCheck(t, completionScript(t, "zsh"), completionScript(t, "fish"))

	var stdout, stderr bytes.Buffer
	c := &cli{stdout: &stdout, stderr: &stderr, clock: clock.NewFake(now), loc: time.UTC}
	if code := run(t.Context(), []string{"completion", "tcsh"}, c, func(string) string { return "" }); code != 2 || !strings.Contains(stderr.String(), "completion bash|zsh|fish") {
		t.Errorf("momctl completion tcsh: exit %d, %q", code, stderr.String())
	}
}
