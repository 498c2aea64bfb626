package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The end-to-end tests run the real binaries (mother, momctl) as separate
// processes. With MOTHER_TEST_RACE=1 (make test sets it) they are built with
// the race detector, so the daemon's concurrency is race-checked in the
// runs that exercise it. A race detected in such a process does not fail
// the test by itself: the report goes to the process's standard error and
// the exit code (66) is only set on a normal exit, which a process killed
// at the end of a test never has. So every place that runs one scans what
// it wrote: noRace for a run that has ended, noRaceAtEnd for a process that
// runs in the background until the test's cleanups stop it.

// raceFlags are the build flags of the binaries the end-to-end tests run.
// The chick stays non-race: its image is FROM scratch and needs a static,
// CGO-free binary (images/chick/build-offline.sh builds it with
// CGO_ENABLED=0).
func raceFlags() []string {
	if os.Getenv("MOTHER_TEST_RACE") == "1" {
		return []string{"-race"}
	}
	return nil
}

const (
	raceBanner = "WARNING: DATA RACE"
	raceRule   = "=================="
)

// raceReport is the race detector's output in out: from the first report's
// "WARNING: DATA RACE" line to the line of '=' closing the last one (to
// the end of out if that is missing). It is "" when out has no report.
func raceReport(out string) string {
	i := strings.Index(out, raceBanner)
	if i < 0 {
		return ""
	}
	rep := out[i:]
	last := strings.LastIndex(rep, raceBanner)
	if end := strings.Index(rep[last:], "\n"+raceRule); end >= 0 {
		rep = rep[:last+end+1+len(raceRule)]
	}
	return rep
}

// errorer is the part of testing.TB noRace uses (a recorder in its own
// test).
type errorer interface {
	Helper()
	Errorf(format string, args ...any)
}

// noRace fails t with the report when out, what a race-built binary (what:
// "mother", "momctl") wrote to its standard error, holds a data race.
func noRace(t errorer, what, out string) {
	t.Helper()
	if rep := raceReport(out); rep != "" {
		t.Errorf("%s reported a data race (%d in its output):\n%s", what, strings.Count(rep, raceBanner), rep)
	}
}

// noRaceAtEnd checks out() with noRace when the test ends. Call it right
// after starting the process and before registering the cleanup that stops
// it: cleanups run last registered first, so the check then reads the
// output of the whole run.
func noRaceAtEnd(t *testing.T, what string, out func() string) {
	t.Helper()
	t.Cleanup(func() { noRace(t, what, out()) })
}

// errorRecorder records what noRace reports.
type errorRecorder struct{ errs []string }

func (r *errorRecorder) Helper() {}

func (r *errorRecorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// A report as the race detector prints it, in the middle of a daemon's log.
const sampleRace = `time=2025-06-16T08:00:00Z level=INFO msg="mother started"
==================
WARNING: DATA RACE
Write at 0x00c0000a4018 by goroutine 42:
  github.com/mother-chat/mother/pkg/nest.(*Server).track()
      /src/pkg/nest/nest.go:120 +0x64

Previous read at 0x00c0000a4018 by goroutine 41:
  github.com/mother-chat/mother/pkg/nest.(*Server).List()
      /src/pkg/nest/nest.go:140 +0x3c

Goroutine 42 (running) created at:
  github.com/mother-chat/mother/pkg/nest.(*Server).Serve()
      /src/pkg/nest/nest.go:80 +0x1d0
==================
time=2025-06-16T08:00:01Z level=INFO msg="chick spawned"
`

// TestNoRace: noRace fails with the whole report when the output holds
// one, and says nothing about output without one.
func TestNoRace(t *testing.T) {
	t.Parallel()
	var r errorRecorder
	noRace(&r, "mother", sampleRace)
	if len(r.errs) != 1 {
		t.Fatalf("noRace on a race report: %d errors, want 1", len(r.errs))
	}
	for _, want := range []string{"mother reported a data race", raceBanner, "Previous read at 0x00c0000a4018", "pkg/nest/nest.go:80", raceRule} {
		if !strings.Contains(r.errs[0], want) {
			t.Errorf("noRace's error lacks %q:\n%s", want, r.errs[0])
		}
	}
	if strings.Contains(r.errs[0], "chick spawned") {
		t.Errorf("noRace's error runs past the report into the log:\n%s", r.errs[0])
	}

	r = errorRecorder{}
	noRace(&r, "mother", strings.ReplaceAll(sampleRace, raceBanner, "WARNING: something else"))
	if len(r.errs) != 0 {
		t.Errorf("noRace on output without a race: %q", r.errs)
	}
	if got := raceReport(sampleRace + sampleRace); strings.Count(got, raceBanner) != 2 {
		t.Errorf("raceReport of two reports holds %d, want 2:\n%s", strings.Count(got, raceBanner), got)
	}
}

// TestNoRaceOnARealReport builds testdata/racy with the race detector, runs
// it, and checks that noRace recognises what the detector really prints.
func TestNoRaceOnARealReport(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "racy")
	if out, err := exec.Command("go", "build", "-race", "-o", bin, "./testdata/racy").CombinedOutput(); err != nil {
		t.Fatalf("go build -race ./testdata/racy: %v\n%s", err, out)
	}
	var stderr strings.Builder
	cmd := exec.Command(bin)
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 66 {
		t.Errorf("racy: %v, want exit status 66 (a race found)", err)
	}
	var r errorRecorder
	noRace(&r, "racy", stderr.String())
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "testdata/racy/main.go") {
		t.Errorf("noRace on the race detector's output: %q, want one error with the report\nstderr:\n%s", r.errs, stderr.String())
	}
}
