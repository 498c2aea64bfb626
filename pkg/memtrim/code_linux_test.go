package memtrim

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestReadOnlyMappingOf(t *testing.T) {
	const exe = "/usr/local/bin/mother"
	for _, c := range []struct {
		line   string
		ok     bool
		lo, hi uintptr
	}{
		{"00400000-014ea000 r-xp 00000000 fe:01 123 /usr/local/bin/mother", true, 0x400000, 0x14ea000},
		{"014ea000-02c5b000 r--p 010ea000 fe:01 123 /usr/local/bin/mother", true, 0x14ea000, 0x2c5b000},
		{"02c5b000-02cc0000 rw-p 0285b000 fe:01 123 /usr/local/bin/mother", false, 0, 0}, // data: never
		{"7f00-8f00 r--s 00000000 fe:01 123 /usr/local/bin/mother", false, 0, 0},         // shared
		{"00400000-014ea000 r-xp 00000000 fe:01 124 /usr/bin/other", false, 0, 0},
		{"c000000000-c000400000 rw-p 00000000 00:00 0", false, 0, 0},
		{"7ffd-7ffe r-xp 00000000 00:00 0 [vdso]", false, 0, 0},
		{"garbage", false, 0, 0},
		{"zz-00 r-xp 0 0 0 /usr/local/bin/mother", false, 0, 0},
		{"2000-1000 r-xp 0 0 0 /usr/local/bin/mother", false, 0, 0},
	} {
		lo, hi, ok := readOnlyMappingOf(c.line, exe)
		if ok != c.ok || lo != c.lo || hi != c.hi {
			t.Errorf("%q: got %x-%x %v, want %x-%x %v", c.line, lo, hi, ok, c.lo, c.hi, c.ok)
		}
	}
	// A path with spaces.
	if _, _, ok := readOnlyMappingOf("1000-2000 r-xp 0 0 0 /opt/my mother", "/opt/my mother"); !ok {
		t.Error("path with a space not matched")
	}
}

// exeRSS sums the resident KiB of this test binary's read-only mappings.
func exeRSS(t *testing.T) int {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	total, in := 0, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if fields := strings.Fields(line); len(fields) >= 5 && strings.Contains(fields[0], "-") {
			_, _, in = readOnlyMappingOf(line, exe)
			continue
		}
		if in && strings.HasPrefix(line, "Rss:") {
			n, _ := strconv.Atoi(strings.Fields(line)[1])
			total += n
		}
	}
	return total
}

// TestReleaseCodeUnmapsAndKeepsRunning drops the test binary's code pages
// and checks that fewer are mapped afterwards and that code (including
// code not run since) still runs.
func TestReleaseCodeUnmapsAndKeepsRunning(t *testing.T) {
	before := exeRSS(t)
	if err := releaseCode(); err != nil {
		t.Fatal(err)
	}
	after := exeRSS(t)
	t.Logf("read-only pages of the binary mapped: %d KiB before, %d KiB after", before, after)
	if after >= before {
		t.Fatalf("releaseCode left %d KiB mapped (was %d)", after, before)
	}
	// Run code again, some of it for the first time since the release.
	var sb strings.Builder
	for i := range 1000 {
		sb.WriteString(strconv.Itoa(i))
	}
	if got := len(sb.String()); got != 2890 {
		t.Fatalf("after release: %d", got)
	}
	if err := releaseCode(); err != nil { // twice is fine
		t.Fatal(err)
	}
}
