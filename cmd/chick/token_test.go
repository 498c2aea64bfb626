package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/wire"
)

// TestMain doubles as the chick's start when CHICK_TOKEN_PROBE is set: it
// hides the token as main does, then reports what it reads and whether the
// token is still in its environment or in /proc/self/environ. With
// CHICK_RUN_MAIN set it is the chick command itself.
func TestMain(m *testing.M) {
	if os.Getenv("CHICK_RUN_MAIN") == "1" { // the whole command, with CHICK_ARGS
		os.Args = append([]string{"chick"}, strings.Fields(os.Getenv("CHICK_ARGS"))...)
		main()
		os.Exit(0)
	}
	if os.Getenv("CHICK_TOKEN_PROBE") == "1" { // main's steps
		if err := nonDumpable(); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		hideToken()
		tok, key := readToken()
		environ, _ := os.ReadFile("/proc/self/environ")
		d, _ := dumpable()
		fmt.Printf("dumpable=%v token=%s key=%s env=%v proc=%v fdvar=%v\n", d, tok, key,
			os.Getenv("MOTHER_TOKEN") != "" || os.Getenv(wire.EnvGateKey) != "",
			bytes.Contains(environ, []byte("sk-chick-token")) || bytes.Contains(environ, []byte("gate-key-1")), os.Getenv(tokenFDVar) != "")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestTokenPassesThroughDescriptor: the chick re-executes itself with the
// token (and an isolated chick's gate key) in a pipe; afterwards it holds
// them, neither its environment nor its initial environ
// (/proc/self/environ) contains them, and it is not dumpable (the
// re-executed image too: execve had made it dumpable again).
func TestTokenPassesThroughDescriptor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ env, want string }{
		{"MOTHER_TOKEN=sk-chick-token", "dumpable=false token=sk-chick-token key= env=false proc=false fdvar=false"},
		{"MOTHER_GATE_KEY=gate-key-1", "dumpable=false token=sk-chick-token key=gate-key-1 env=false proc=false fdvar=false"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "CHICK_TOKEN_PROBE=1", "MOTHER_TOKEN=sk-chick-token")
		if tc.env != "MOTHER_TOKEN=sk-chick-token" {
			cmd.Env = append(cmd.Env, tc.env)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("probe: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("probe with %s says %q, want %q", tc.env, got, tc.want)
		}
	}
}

// TestTokenFromEnvironmentWithoutPipe: without the re-exec, the token
// comes from the environment, which is then cleared.
func TestTokenFromEnvironmentWithoutPipe(t *testing.T) {
	t.Setenv("MOTHER_TOKEN", "sk-plain")
	t.Setenv(wire.EnvGateKey, "key-plain")
	if tok, key := readToken(); tok != "sk-plain" || key != "key-plain" || os.Getenv("MOTHER_TOKEN") != "" || os.Getenv(wire.EnvGateKey) != "" {
		t.Errorf("readToken = %q, %q; env left %q, %q", tok, key, os.Getenv("MOTHER_TOKEN"), os.Getenv(wire.EnvGateKey))
	}
}
