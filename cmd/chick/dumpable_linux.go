package main

import "golang.org/x/sys/unix"

// nonDumpable makes this process non-dumpable (PR_SET_DUMPABLE 0): the
// kernel then refuses, to any process of the same uid without
// CAP_SYS_PTRACE (every process a tool runs: all capabilities are dropped
// and no-new-privileges is set), ptrace attach, process_vm_readv and the
// /proc files that expose a process's insides (mem, maps, environ, auxv,
// fd, fdinfo, root, cwd, stack, ... of the process and of each of its
// threads, which become root's), and it never dumps core. execve resets
// the flag, so it is set at the start of every image: the re-executed
// chick sets it before it reads its token from the pipe. Children the
// bash tool starts are dumpable again after their execve; they hold no
// secret. It returns the error of prctl (none is expected on Linux).
func nonDumpable() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

// dumpable reports the flag (for tests).
func dumpable() (bool, error) {
	v, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	return v != 0, err
}
