// Package uploadtest measures what an adapter's uploads cost in memory.
// The adapter runs in a child process (a fresh copy of the test binary)
// and the platform's wire fake in the test's own process, so the child's
// peak resident set counts the adapter's bytes and not the fake's.
package uploadtest

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
)

const childEnv = "UPLOADTEST_CHILD"

// FileBytes and Files are the row of issue 42: ten attachments of 25 MiB
// (three under the race detector).
const (
	FileBytes = 25 << 20
	// Bound is what the uploads may raise the peak resident set by.
	Bound = 64 << 20
)

// Files is how many files a memory test uploads at once.
var Files = map[bool]int{false: 10, true: 3}[race]

// InChild reports whether this process is the child of Measure.
func InChild() bool { return os.Getenv(childEnv) == "1" }

// Make writes n files of size random bytes under dir and returns their
// paths and SHA-256 sums (hex).
func Make(t testing.TB, dir string, n, size int) (paths []string, sums map[string]string) {
	t.Helper()
	sums = map[string]string{}
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("big-%02d.bin", i))
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		if _, err := io.CopyN(io.MultiWriter(f, h), rand.Reader, int64(size)); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		sums[filepath.Base(p)] = fmt.Sprintf("%x", h.Sum(nil))
	}
	return paths, sums
}

// Sum is the SHA-256 of b (hex).
func Sum(b []byte) string { return fmt.Sprintf("%x", sha256.Sum256(b)) }

// Measure runs the test named run (a whole-name match) in a child copy of
// the test binary with env added, and returns how far the child's peak
// resident set rose above its resident set when Upload started.
func Measure(t *testing.T, run string, env ...string) int64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(run)+"$", "-test.count=1", "-test.v")
	cmd.Env = append(append(os.Environ(), childEnv+"=1"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child test %s: %v\n%s", run, err, out)
	}
	base, peak := field(string(out), "UPLOADTEST BASE="), field(string(out), "UPLOADTEST PEAK=")
	if base <= 0 || peak <= 0 {
		t.Fatalf("the child test %s reported no memory figures:\n%s", run, out)
	}
	return peak - base
}

func field(s, key string) int64 {
	i := strings.LastIndex(s, key)
	if i < 0 {
		return -1
	}
	v := s[i+len(key):]
	if j := strings.IndexAny(v, " \n"); j >= 0 {
		v = v[:j]
	}
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// Uploads is the child's side: it calls upload for each path at once
// (as several chicks of several channels could) and prints its resident
// set before and its peak after, for Measure.
func Uploads(t *testing.T, paths []string, upload func(path string) error) {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	fmt.Printf("UPLOADTEST BASE=%d\n", status("VmRSS:"))
	var wg sync.WaitGroup
	errs := make(chan error, len(paths))
	for _, p := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- upload(p)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	fmt.Printf("UPLOADTEST PEAK=%d\n", status("VmHWM:"))
}

// status reads a size field of /proc/self/status, in bytes.
func status(key string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return -1
}
