package main

import (
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// The token is the chick's own and no tool may see it: not in the
// environment the tools inherit, and not in /proc/1/environ, which keeps a
// process's initial environment for its whole life (Unsetenv does not
// change it). So the chick re-executes itself once with the token moved
// into a pipe: the new image's environ has no token, and the pipe is read
// and closed before anything runs.
const tokenFDVar = "MOTHER_TOKEN_FD"

// hideToken re-executes the chick without MOTHER_TOKEN in its environment.
// If anything fails it carries on with the token in the environment.
func hideToken() {
	tok := os.Getenv("MOTHER_TOKEN")
	if tok == "" || os.Getenv(tokenFDVar) != "" {
		return
	}
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
		if !strings.HasPrefix(kv, "MOTHER_TOKEN=") {
			env = append(env, kv)
		}
	}
	env = append(env, tokenFDVar+"="+strconv.Itoa(p[0]))
	_ = syscall.Exec(exe, os.Args, env) // returns only on failure
	syscall.Close(p[0])
}

// readToken returns the token from the pipe of hideToken (or, if that did
// not happen, from the environment, which it then clears).
func readToken() string {
	if fdS := os.Getenv(tokenFDVar); fdS != "" {
		os.Unsetenv(tokenFDVar)
		fd, err := strconv.Atoi(fdS)
		if err != nil {
			return ""
		}
		f := os.NewFile(uintptr(fd), "token")
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, 4096))
		if err != nil {
			return ""
		}
		return string(b)
	}
	tok := os.Getenv("MOTHER_TOKEN")
	os.Unsetenv("MOTHER_TOKEN")
	return tok
}
