// Package credprobe searches every process it can see for secrets, the
// way a program a chick's bash runs would: each process's cmdline and
// environ, its memory through maps and mem, its descriptors (the files
// they name, read through /proc/<pid>/fd), its threads' files, its root,
// and a ptrace attach. The tests of docs/isolation.md ("Credentials") run
// it inside real chicks (cmd credprobe) and check that it finds neither
// the chick's token nor its gate key, and that it does find a marker
// planted in a dumpable process it started itself (so a broken search
// cannot pass). It is Linux's: elsewhere Search finds nothing.
package credprobe

import "strconv"

// Report is what Search saw, process by process.
type Report struct {
	// Self is the searching process, which Search skips.
	Self  int    `json:"self"`
	Procs []Proc `json:"procs"`
}

// Proc is one process: what of it could be read and what was found.
type Proc struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
	// UID is the process's real uid (from status, readable by all).
	UID int `json:"uid"`
	// Access names each way in ("environ", "cmdline", "maps", "mem",
	// "fd", "task", "root", "ptrace") with "ok" or the error.
	Access map[string]string `json:"access"`
	// MemBytes is how much of its memory was read.
	MemBytes int64 `json:"memBytes"`
	// FDs are its descriptors' targets, if they could be listed.
	FDs []string `json:"fds,omitempty"`
	// Found are "<needle> in <where>".
	Found []string `json:"found,omitempty"`
}

// Find reports whether needle was found in process pid, and where.
func (r Report) Find(pid int, needle string) []string {
	var out []string
	for _, p := range r.Procs {
		if p.PID != pid {
			continue
		}
		for _, f := range p.Found {
			if len(f) > len(needle) && f[:len(needle)+1] == needle+" " {
				out = append(out, f[len(needle)+4:])
			}
		}
	}
	return out
}

// Anywhere lists "pid: where" for each find of needle in any process.
func (r Report) Anywhere(needle string) []string {
	var out []string
	for _, p := range r.Procs {
		for _, w := range r.Find(p.PID, needle) {
			out = append(out, strconv.Itoa(p.PID)+" ("+p.Comm+"): "+w)
		}
	}
	return out
}

// Proc returns the process pid of the report, if it was seen.
func (r Report) Proc(pid int) (Proc, bool) {
	for _, p := range r.Procs {
		if p.PID == pid {
			return p, true
		}
	}
	return Proc{}, false
}
