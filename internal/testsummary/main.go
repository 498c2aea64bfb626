// Command testsummary reads `go test -json` on its standard input, prints
// go test's usual per-package lines (ok/FAIL, and the output of failing
// tests), then lists every skipped test with its reason and ends with
// "N passed, M failed, K skipped". It exits non-zero when a test or a
// package failed, and, under CI=true, when any test was skipped: in CI
// every check that backs a claim must run.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
}

type key struct{ pkg, test string }

type summary struct {
	out                    io.Writer
	outputs                map[key][]string
	passed, failed         int
	skips                  []string
	pkgFailed, buildFailed int
}

func newSummary(out io.Writer) *summary {
	return &summary{out: out, outputs: map[key][]string{}}
}

func (s *summary) add(e event) {
	k := key{e.Package, e.Test}
	switch e.Action {
	case "build-output":
		fmt.Fprint(s.out, e.Output)
	case "build-fail":
		s.buildFailed++
	case "output":
		if e.Test == "" {
			// Package lines: ok, FAIL, panics outside a test, coverage.
			fmt.Fprint(s.out, e.Output)
			return
		}
		s.outputs[k] = append(s.outputs[k], e.Output)
	case "pass":
		if e.Test != "" {
			s.passed++
		}
		delete(s.outputs, k)
	case "fail":
		if e.Test == "" {
			s.pkgFailed++
			return
		}
		s.failed++
		for _, l := range s.outputs[k] {
			fmt.Fprint(s.out, l)
		}
		delete(s.outputs, k)
	case "skip":
		if e.Test == "" {
			delete(s.outputs, k) // a package without tests
			return
		}
		s.skips = append(s.skips, fmt.Sprintf("%s %s: %s", e.Package, e.Test, reason(s.outputs[k])))
		delete(s.outputs, k)
	}
}

// reason is the skip message: the test's own lines, without go test's
// "=== RUN" and "--- SKIP" headers.
func reason(lines []string) string {
	var r []string
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "=== ") && !strings.HasPrefix(l, "--- ") {
			r = append(r, l)
		}
	}
	return strings.Join(r, " ")
}

// finish prints the skips and the totals and reports whether the run is a
// success.
func (s *summary) finish(ci bool) bool {
	sort.Strings(s.skips)
	if len(s.skips) > 0 {
		fmt.Fprintf(s.out, "\nskipped tests:\n")
		for _, l := range s.skips {
			fmt.Fprintf(s.out, "  %s\n", l)
		}
	}
	ok := s.failed == 0 && s.pkgFailed == 0 && s.buildFailed == 0
	if ci && len(s.skips) > 0 {
		fmt.Fprintf(s.out, "CI=true: %d test(s) skipped; every check must run in CI\n", len(s.skips))
		ok = false
	}
	if s.pkgFailed > 0 || s.buildFailed > 0 {
		fmt.Fprintf(s.out, "%d package(s) failed, %d did not build\n", s.pkgFailed, s.buildFailed)
	}
	fmt.Fprintf(s.out, "%d passed, %d failed, %d skipped\n", s.passed, s.failed, len(s.skips))
	return ok
}

func run(in io.Reader, out io.Writer, ci bool) bool {
	s := newSummary(out)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// Not an event (go vet or the linker writing directly): pass it on.
			fmt.Fprintln(out, sc.Text())
			continue
		}
		s.add(e)
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(out, "reading go test -json: %v\n", err)
		s.finish(ci)
		return false
	}
	return s.finish(ci)
}

func main() {
	if !run(os.Stdin, os.Stdout, os.Getenv("CI") == "true") {
		os.Exit(1)
	}
}
