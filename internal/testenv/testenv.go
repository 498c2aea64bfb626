// Package testenv holds the one rule for tests that need something of the
// machine (root, a tool, a second user): without it they skip on a
// developer's machine, but under CI=true, where every claim must be
// checked, they fail.
package testenv

import (
	"os"
	"testing"
)

// CI reports whether the tests run under CI=true.
func CI() bool { return os.Getenv("CI") == "true" }

// Unavailable ends the test because something it needs is missing: a
// failure under CI=true, a skip elsewhere.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if CI() {
		t.Fatalf("CI=true requires this check to run (.ci/ensure-tools installs what it needs): "+format, args...)
	}
	t.Skipf(format, args...)
}
