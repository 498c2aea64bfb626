package memtrim

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// releaseCode drops this process's mappings of its own binary's read-only
// pages (code, read-only data, function tables) with MADV_DONTNEED.
//
// Those pages are clean copies of the executable file: dropping them frees
// nothing that cannot be read back, and the page cache keeps the file as
// before. What it changes is what stays mapped. Start-up runs the
// initialisation of every library linked in, and the kernel maps each code
// page touched together with its neighbours (fault-around, 64 KB), so an
// idle Mother would otherwise keep about 20 MB of code mapped that she only
// ran once. Mapped executable pages are the last the kernel reclaims under
// memory pressure; unmapped, the code she no longer runs is ordinary page
// cache, and what she runs while idle (timers, heartbeats) faults back in
// on its next use. The writable mappings (Go's data and bss) are never
// touched: DONTNEED on those would lose their contents.
func releaseCode() error {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return err
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return err
	}
	var first error
	for line := range strings.Lines(string(maps)) {
		start, end, ok := readOnlyMappingOf(strings.TrimSuffix(line, "\n"), exe)
		if !ok {
			continue
		}
		_, _, e := syscall.Syscall(syscall.SYS_MADVISE, start, end-start, syscall.MADV_DONTNEED)
		if e != 0 && first == nil {
			first = fmt.Errorf("madvise %x-%x: %w", start, end, e)
		}
	}
	return first
}

// readOnlyMappingOf parses one line of /proc/self/maps ("start-end perms
// offset dev inode path") and reports the range when it maps path without
// write permission.
func readOnlyMappingOf(line, path string) (start, end uintptr, ok bool) {
	f := strings.Fields(line)
	if len(f) < 6 || strings.Join(f[5:], " ") != path {
		return 0, 0, false
	}
	if perms := f[1]; len(perms) < 4 || perms[0] != 'r' || perms[1] != '-' || perms[3] != 'p' {
		return 0, 0, false // writable, or shared
	}
	lo, hi, found := strings.Cut(f[0], "-")
	if !found {
		return 0, 0, false
	}
	s, err1 := strconv.ParseUint(lo, 16, 64)
	e, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || e <= s {
		return 0, 0, false
	}
	return uintptr(s), uintptr(e), true
}
