// Package completiontest drives shell completion scripts in real shells
// for tests: bash completes words as it would at a prompt, zsh and fish
// check the syntax.
package completiontest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mother-chat/mother/internal/testenv"
)

func sq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Need returns the path of shell, or skips the test (fails under CI=true)
// when it is not installed.
func Need(t *testing.T, shell string) string {
	t.Helper()
	p, err := exec.LookPath(shell)
	if err != nil {
		testenv.Unavailable(t, "%s is not installed (bash .ci/ensure-tools installs it)", shell)
	}
	return p
}

// BashCompletions sources script in a real bash and returns what it
// completes for each line of words (the last word is the one being
// completed; "" for a new word), in order.
func BashCompletions(t *testing.T, script string, lines ...[]string) [][]string {
	t.Helper()
	bash := Need(t, "bash")
	dir := t.TempDir()
	path := filepath.Join(dir, "completion.bash")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	var drive strings.Builder
	drive.WriteString("source " + sq(path) + " || exit 9\nfn=$(complete -p | awk '{print $(NF-1)}' | head -1)\n")
	for _, words := range lines {
		var q []string
		for _, w := range words {
			q = append(q, sq(w))
		}
		drive.WriteString("COMP_WORDS=(" + strings.Join(q, " ") + "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); $fn; printf '%s\\n' \"${COMPREPLY[*]}\"\n")
	}
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", drive.String())
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("bash: %v\n%s", err, stderr.String())
	}
	var got [][]string
	for _, l := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		got = append(got, strings.Fields(l))
	}
	if len(got) != len(lines) {
		t.Fatalf("bash gave %d answers for %d lines:\n%s", len(got), len(lines), out)
	}
	return got
}

// SyntaxCheck runs "zsh -n" and "fish -n" on the scripts.
func SyntaxCheck(t *testing.T, zsh, fish string) {
	t.Helper()
	for shell, script := range map[string]string{"zsh": zsh, "fish": fish} {
		p := Need(t, shell)
		cmd := exec.Command(p, "-n")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("%s -n: %v\n%s", shell, err, out)
		}
	}
}
