package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestLogControls: a chick's string in a log record (as a value, in the
// message, in an error) reaches the log, text or JSON, with no control
// character a terminal or journald would pass on; JSON still reads back
// to the same string; and a failure line shows its controls.
func TestLogControls(t *testing.T) {
	const evil = "\x1b]0;pwned\x07\x1b[2J\x1b]52;c;cm0gLXJmIH4K\x1b\\\u009b31m\x7f"
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			logger, err := newLogger(&b, format, "info")
			if err != nil {
				t.Fatal(err)
			}
			logger.Info("skill "+evil, "skill", evil, "err", errors.New("bad "+evil), "names", []string{evil})
			out := b.String()
			if n := controls(out); n > 0 {
				t.Errorf("the %s log holds %d control characters:\n%q", format, n, out)
			}
			if format == "json" {
				var rec map[string]any
				if err := json.Unmarshal(b.Bytes(), &rec); err != nil {
					t.Fatalf("the JSON log line does not read back: %v\n%s", err, out)
				}
				if rec["skill"] != evil || rec["msg"] != "skill "+evil {
					t.Errorf("the JSON log changed the strings: %q", out)
				}
			} else if !strings.Contains(out, `\x1b]0;pwned\a`) {
				t.Errorf("the text log does not show the escape:\n%s", out)
			}
		})
	}
	var b bytes.Buffer
	(&reporter{w: &b}).fail(errors.New("chick said " + evil))
	if n := controls(b.String()); n > 0 || !strings.Contains(b.String(), "chick said ^[]0;pwned^G") {
		t.Errorf("the failure line: %q", b.String())
	}
}

// controls counts the control characters but newline and tab in s.
func controls(s string) int {
	n := 0
	for _, r := range s {
		if r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r <= 0x9f {
			n++
		}
	}
	return n
}
