package credprobe

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// memCap bounds how much of one process's memory Search reads.
const memCap = 2 << 30

// Search looks for each needle (by name) in every process under /proc
// but its own and skip's, and reports what it could read. A ptrace
// attach that succeeds is left in place (the tracee is not stopped); the
// kernel detaches when the searching process exits.
func Search(needles map[string][]byte, skip ...int) Report {
	self := os.Getpid()
	rep := Report{Self: self}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || contains(skip, pid) {
			continue
		}
		rep.Procs = append(rep.Procs, searchProc(pid, needles))
	}
	return rep
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func searchProc(pid int, needles map[string][]byte) Proc {
	dir := "/proc/" + strconv.Itoa(pid)
	p := Proc{PID: pid, UID: -1, Access: map[string]string{}}
	if b, err := os.ReadFile(dir + "/comm"); err == nil {
		p.Comm = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile(dir + "/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
				p.UID, _ = strconv.Atoi(f[1])
			}
		}
	}
	find := func(where string, b []byte) {
		for name, n := range needles {
			if len(n) > 0 && bytes.Contains(b, n) {
				p.Found = append(p.Found, name+" in "+where)
			}
		}
	}
	for _, f := range []string{"cmdline", "environ"} {
		b, err := os.ReadFile(dir + "/" + f)
		p.Access[f] = status(err)
		find(f, b)
	}
	searchMem(&p, dir, needles)
	searchFDs(&p, dir, find)
	// Threads: each has its own environ and mem (the same address space,
	// but its own permission check).
	tasks, err := os.ReadDir(dir + "/task")
	p.Access["task"] = status(err)
	for _, t := range tasks {
		for _, f := range []string{"environ", "mem"} {
			fh, err := os.Open(dir + "/task/" + t.Name() + "/" + f)
			if err != nil {
				if p.Access["task"] == "ok" {
					p.Access["task"] = status(err)
				}
				continue
			}
			b, _ := io.ReadAll(io.LimitReader(fh, 1<<20))
			fh.Close()
			if f == "environ" {
				find("task "+t.Name()+" environ", b)
			}
		}
	}
	_, err = os.ReadDir(dir + "/root/")
	p.Access["root"] = status(err)
	p.Access["ptrace"] = status(seize(pid))
	return p
}

// searchMem reads each readable mapping of the process through its mem
// file.
func searchMem(p *Proc, dir string, needles map[string][]byte) {
	maps, err := os.ReadFile(dir + "/maps")
	p.Access["maps"] = status(err)
	mem, err := os.Open(dir + "/mem")
	p.Access["mem"] = status(err)
	if err != nil {
		return
	}
	defer mem.Close()
	longest := 0
	for _, n := range needles {
		longest = max(longest, len(n))
	}
	buf := make([]byte, 1<<20)
	sc := bufio.NewScanner(bytes.NewReader(maps))
	found := map[string]bool{}
	for sc.Scan() && p.MemBytes < memCap {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[1][0] != 'r' || (len(f) > 5 && (f[5] == "[vvar]" || f[5] == "[vvar_vclock]")) {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		var tail []byte
		for off := start; off < end && p.MemBytes < memCap; {
			n := min(uint64(len(buf)), end-off)
			got, err := mem.ReadAt(buf[:n], int64(off))
			if got <= 0 {
				if err != nil && p.MemBytes == 0 {
					p.Access["mem"] = status(err)
				}
				break
			}
			p.MemBytes += int64(got)
			chunk := append(tail, buf[:got]...)
			for name, nd := range needles {
				if !found[name] && len(nd) > 0 && bytes.Contains(chunk, nd) {
					found[name] = true
					p.Found = append(p.Found, fmt.Sprintf("%s in mem %s", name, f[0]))
				}
			}
			if keep := longest - 1; keep > 0 && len(chunk) > keep {
				tail = append(tail[:0], chunk[len(chunk)-keep:]...)
			}
			off += uint64(got)
		}
	}
}

// searchFDs lists the process's descriptors and reads those that name a
// regular file (a pipe or socket opened through /proc would take data
// meant for someone else: only its name is kept).
func searchFDs(p *Proc, dir string, find func(string, []byte)) {
	ents, err := os.ReadDir(dir + "/fd")
	p.Access["fd"] = status(err)
	for _, e := range ents {
		path := filepath.Join(dir, "fd", e.Name())
		target, err := os.Readlink(path)
		if err != nil {
			p.Access["fd"] = status(err)
			continue
		}
		p.FDs = append(p.FDs, e.Name()+" -> "+target)
		if !strings.HasPrefix(target, "/") || strings.HasPrefix(target, "/dev/") {
			continue
		}
		fh, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
		if err != nil {
			continue
		}
		if st, err := fh.Stat(); err == nil && st.Mode().IsRegular() {
			b, _ := io.ReadAll(io.LimitReader(fh, 64<<20))
			find("fd "+e.Name()+" ("+target+")", b)
		}
		fh.Close()
	}
}

// seize attaches to pid with PTRACE_SEIZE (which does not stop it).
func seize(pid int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return unix.PtraceSeize(pid)
}

func status(err error) string {
	if err == nil {
		return "ok"
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return err.Error()
}
