package main

import (
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/mother-chat/mother/pkg/wire"
)

// The token is the chick's own and no tool may see it: not in the
// environment the tools inherit, and not in /proc/1/environ, which keeps a
// process's initial environment for its whole life (Unsetenv does not
// change it). So the chick re-executes itself once with the token moved
// into a pipe: the new image's environ has no token, and the pipe is read
// and closed before anything runs. An isolated chick's gate key
// (MOTHER_GATE_KEY) travels the same way: it is worth nothing beyond this
// chick, but the tools have no use for it either. Both images are
// non-dumpable (nonDumpable) before they hold a secret, so a tool cannot
// read them out of the agent's memory, descriptors or /proc either
// (docs/isolation.md, "Credentials"). `chick gate` hides its own token
// (MOTHER_GATE_TOKEN) the same way.
const tokenFDVar = "MOTHER_TOKEN_FD"

// hidden are the variables hideToken moves into the pipe, in order.
var hidden = []string{"MOTHER_TOKEN", wire.EnvGateKey}

// gateHidden is what `chick gate` moves into the pipe.
var gateHidden = []string{wire.EnvGateToken}

// hideToken re-executes the chick without MOTHER_TOKEN and
// MOTHER_GATE_KEY in its environment. If anything fails it carries on
// with them in the environment.
func hideToken() { hideEnv(hidden) }

// readToken returns the token and the gate key from the pipe of
// hideToken (or, if that did not happen, from the environment, which it
// then clears).
func readToken() (token, gateKey string) {
	v := readHidden(hidden)
	return v[0], v[1]
}

// hideEnv re-executes this process with the variables names moved from
// its environment into a pipe, whose descriptor it names in
// MOTHER_TOKEN_FD. It does nothing if none is set or this is the
// re-executed process; if anything fails it carries on with them in the
// environment.
func hideEnv(names []string) {
	var vals []string
	found := false
	for _, k := range names {
		v := os.Getenv(k)
		vals = append(vals, v)
		found = found || v != ""
	}
	if !found || os.Getenv(tokenFDVar) != "" {
		return
	}
	// Environment values hold no NUL: it separates them unambiguously.
	tok := strings.Join(vals, "\x00")
	exe, err := os.Executable()
	if err != nil {
		return
	}
	var p [2]int
	if err := syscall.Pipe(p[:]); err != nil { // no close-on-exec: fd p[0] survives exec
		return
	}
	if n, err := syscall.Write(p[1], []byte(tok)); err != nil || n != len(tok) {
		syscall.Close(p[0])
		syscall.Close(p[1])
		return
	}
	syscall.Close(p[1])
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, k) {
			env = append(env, kv)
		}
	}
	env = append(env, tokenFDVar+"="+strconv.Itoa(p[0]))
	_ = syscall.Exec(exe, os.Args, env) // returns only on failure
	syscall.Close(p[0])
}

// readHidden returns the values of names from the pipe of hideEnv (or,
// if that did not happen, from the environment), in order, and clears
// them from the environment. The pipe is closed: nothing the process
// starts later inherits it (Go opens everything else close-on-exec).
func readHidden(names []string) []string {
	vals := make([]string, len(names))
	if fdS := os.Getenv(tokenFDVar); fdS != "" {
		os.Unsetenv(tokenFDVar)
		fd, err := strconv.Atoi(fdS)
		if err != nil {
			return vals
		}
		f := os.NewFile(uintptr(fd), "token")
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, 8192))
		if err != nil {
			return make([]string, len(names))
		}
		copy(vals, strings.Split(string(b), "\x00"))
	} else {
		for i, k := range names {
			vals[i] = os.Getenv(k)
		}
	}
	for _, k := range names {
		os.Unsetenv(k)
	}
	return vals
}
