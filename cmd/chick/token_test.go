package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain doubles as the chick's start when CHICK_TOKEN_PROBE is set: it
// hides the token as main does, then reports what it reads and whether the
// token is still in its environment or in /proc/self/environ.
func TestMain(m *testing.M) {
	if os.Getenv("CHICK_TOKEN_PROBE") == "1" {
		hideToken()
		tok := readToken()
		environ, _ := os.ReadFile("/proc/self/environ")
		fmt.Printf("token=%s env=%v proc=%v fdvar=%v\n", tok, os.Getenv("MOTHER_TOKEN") != "", bytes.Contains(environ, []byte("sk-chick-token")), os.Getenv(tokenFDVar) != "")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestTokenPassesThroughDescriptor: the chick re-executes itself with the
// token in a pipe; afterwards it holds the token, and neither its
// environment nor its initial environ (/proc/self/environ, what tools
// could read) contains it.
func TestTokenPassesThroughDescriptor(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CHICK_TOKEN_PROBE=1", "MOTHER_TOKEN=sk-chick-token")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "token=sk-chick-token env=false proc=false fdvar=false"; got != want {
		t.Errorf("probe says %q, want %q", got, want)
	}
}

// TestTokenFromEnvironmentWithoutPipe: without the re-exec, the token
// comes from the environment, which is then cleared.
func TestTokenFromEnvironmentWithoutPipe(t *testing.T) {
	t.Setenv("MOTHER_TOKEN", "sk-plain")
	if got := readToken(); got != "sk-plain" || os.Getenv("MOTHER_TOKEN") != "" {
		t.Errorf("readToken = %q, env left %q", got, os.Getenv("MOTHER_TOKEN"))
	}
}
