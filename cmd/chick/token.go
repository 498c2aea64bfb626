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
// chick, but the tools have no use for it either.
const tokenFDVar = "MOTHER_TOKEN_FD"

// hidden are the variables hideToken moves into the pipe, in order.
var hidden = []string{"MOTHER_TOKEN", wire.EnvGateKey}

// hideToken re-executes the chick without MOTHER_TOKEN and
// MOTHER_GATE_KEY in its environment. If anything fails it carries on
// with them in the environment.
func hideToken() {
	var vals []string
	found := false
	for _, k := range hidden {
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
		if !slices.Contains(hidden, k) {
			env = append(env, kv)
		}
	}
	env = append(env, tokenFDVar+"="+strconv.Itoa(p[0]))
	_ = syscall.Exec(exe, os.Args, env) // returns only on failure
	syscall.Close(p[0])
}

// readToken returns the token and the gate key from the pipe of
// hideToken (or, if that did not happen, from the environment, which it
// then clears).
func readToken() (token, gateKey string) {
	vals := make([]string, len(hidden))
	if fdS := os.Getenv(tokenFDVar); fdS != "" {
		os.Unsetenv(tokenFDVar)
		fd, err := strconv.Atoi(fdS)
		if err != nil {
			return "", ""
		}
		f := os.NewFile(uintptr(fd), "token")
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, 8192))
		if err != nil {
			return "", ""
		}
		copy(vals, strings.Split(string(b), "\x00"))
	} else {
		for i, k := range hidden {
			vals[i] = os.Getenv(k)
		}
	}
	for _, k := range hidden {
		os.Unsetenv(k)
	}
	return vals[0], vals[1]
}
