package dataformat

import (
	"fmt"
	"strings"
)

// Preview says what Prepare would change in dir, without changing
// anything: for mother --check-config. A newer format is the *NewerError
// that Prepare would return.
func Preview(dir, release string) (string, error) {
	in, err := Check(dir, release)
	if err != nil {
		return "", err
	}
	if !hasData(dir) {
		return fmt.Sprintf("data directory: new; starting Mother %s writes %s (format %d)", release, File, latest()), nil
	}
	var lines []string
	if _, ok := interrupted(dir, in.Format); ok {
		lines = append(lines, fmt.Sprintf("data directory: a migration from format %d was interrupted; starting Mother %s puts back the files it changed from its snapshot first", in.Format, release))
	}
	if in.Format < latest() {
		var ss []string
		for f := in.Format; f < latest(); f++ {
			st, ok := stepFrom(f)
			if !ok {
				return "", fmt.Errorf("no migration from data format %d", f)
			}
			what := st.Changes
			if files, err := st.files(dir); err == nil && len(files) > 0 {
				what += " (snapshot of " + strings.Join(files, ", ") + " first)"
			}
			ss = append(ss, fmt.Sprintf("  %d→%d: %s", st.From, st.To, what))
		}
		lines = append(lines, fmt.Sprintf("data directory: format %d (%s); starting Mother %s migrates it to format %d, a snapshot in %s before each step, `mother rollback` undoes it:\n%s",
			in.Format, lastRun(in), release, latest(), UpgradeDir, strings.Join(ss, "\n")))
	}
	if len(lines) == 0 {
		lines = append(lines, fmt.Sprintf("data directory: format %d (%s); nothing to migrate", in.Format, lastRun(in)))
	}
	return strings.Join(lines, "\n"), nil
}

// lastRun says which release last ran on a directory of format in.
func lastRun(in Info) string {
	if in.Release == "" {
		return "Mother " + strings.TrimSuffix(firstRelease(in.Format), ".0") + ".x"
	}
	return "last run by Mother " + in.Release
}
