package main

import (
	"strings"
	"testing"
)

const stream = `{"Action":"start","Package":"m/a"}
{"Action":"run","Package":"m/a","Test":"TestOK"}
{"Action":"output","Package":"m/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"m/a","Test":"TestOK","Output":"--- PASS: TestOK (0.00s)\n"}
{"Action":"pass","Package":"m/a","Test":"TestOK"}
{"Action":"run","Package":"m/a","Test":"TestNeedsRoot"}
{"Action":"output","Package":"m/a","Test":"TestNeedsRoot","Output":"=== RUN   TestNeedsRoot\n"}
{"Action":"output","Package":"m/a","Test":"TestNeedsRoot","Output":"    a_test.go:9: needs root\n"}
{"Action":"output","Package":"m/a","Test":"TestNeedsRoot","Output":"--- SKIP: TestNeedsRoot (0.00s)\n"}
{"Action":"skip","Package":"m/a","Test":"TestNeedsRoot"}
{"Action":"output","Package":"m/a","Output":"ok  \tm/a\t0.01s\n"}
{"Action":"pass","Package":"m/a"}
`

const failing = `{"Action":"run","Package":"m/b","Test":"TestBad"}
{"Action":"output","Package":"m/b","Test":"TestBad","Output":"    b_test.go:3: wrong answer\n"}
{"Action":"output","Package":"m/b","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}
{"Action":"fail","Package":"m/b","Test":"TestBad"}
{"Action":"output","Package":"m/b","Output":"FAIL\tm/b\t0.01s\n"}
{"Action":"fail","Package":"m/b"}
`

func TestSummaryCountsAndListsSkips(t *testing.T) {
	var out strings.Builder
	if !run(strings.NewReader(stream), &out, false) {
		t.Errorf("a run with a skip outside CI failed:\n%s", out.String())
	}
	got := out.String()
	for _, want := range []string{"ok  \tm/a\t0.01s", "skipped tests:\n  m/a TestNeedsRoot: a_test.go:9: needs root\n", "1 passed, 0 failed, 1 skipped\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "=== RUN") {
		t.Errorf("a passing test's output was printed:\n%s", got)
	}
	if !strings.HasSuffix(got, "1 passed, 0 failed, 1 skipped\n") {
		t.Errorf("the totals are not the last line:\n%s", got)
	}
}

func TestSummaryFailsOnSkipUnderCI(t *testing.T) {
	var out strings.Builder
	if run(strings.NewReader(stream), &out, true) {
		t.Errorf("a skip under CI=true passed:\n%s", out.String())
	}
}

func TestSummaryFailsOnFailure(t *testing.T) {
	var out strings.Builder
	if run(strings.NewReader(failing), &out, false) {
		t.Errorf("a failing test passed the run:\n%s", out.String())
	}
	got := out.String()
	for _, want := range []string{"b_test.go:3: wrong answer", "--- FAIL: TestBad", "FAIL\tm/b", "0 passed, 1 failed, 0 skipped\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

func TestSummaryFailsOnBuildFailure(t *testing.T) {
	var out strings.Builder
	in := `{"ImportPath":"m/c","Action":"build-output","Output":"c.go:1: syntax error\n"}
{"ImportPath":"m/c","Action":"build-fail"}
{"Action":"output","Package":"m/c","Output":"FAIL\tm/c [build failed]\n"}
{"Action":"fail","Package":"m/c"}
`
	if run(strings.NewReader(in), &out, false) {
		t.Errorf("a build failure passed the run:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "c.go:1: syntax error") {
		t.Errorf("the build error was not shown:\n%s", out.String())
	}
}
