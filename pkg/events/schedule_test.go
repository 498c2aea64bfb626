package events

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

func mustSched(t *testing.T, expr string) *cron.SpecSchedule {
	t.Helper()
	s, err := cronParser.Parse(expr)
	if err != nil {
		t.Fatalf("parse %q: %v", expr, err)
	}
	return s.(*cron.SpecSchedule)
}

func TestNextRun(t *testing.T) {
	t.Parallel()
	vienna, err := time.LoadLocation("Europe/Vienna")
	if err != nil {
		t.Fatal(err)
	}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name  string
		expr  string
		loc   *time.Location
		after string
		want  []string // successive runs, as UTC instants
	}{
		{"weekdays at nine, from Friday evening", "0 9 * * 1-5", vienna, "2025-06-13T18:00:00Z", []string{"2025-06-16T07:00:00Z", "2025-06-17T07:00:00Z"}},
		{"strictly after an exact match", "0 9 * * *", vienna, "2025-06-16T07:00:00Z", []string{"2025-06-17T07:00:00Z"}},
		// Spring forward in Vienna: 2025-03-30 02:00 CET becomes 03:00 CEST.
		{"skipped time runs at the end of the gap", "30 2 * * *", vienna, "2025-03-29T12:00:00Z", []string{"2025-03-30T01:00:00Z", "2025-03-31T00:30:00Z"}},
		{"gap times run once together", "*/15 * * * *", vienna, "2025-03-30T00:50:00Z", []string{"2025-03-30T01:00:00Z", "2025-03-30T01:15:00Z"}},
		{"hourly across the gap", "0 * * * *", vienna, "2025-03-30T00:30:00Z", []string{"2025-03-30T01:00:00Z", "2025-03-30T02:00:00Z"}},
		// Fall back in Vienna: 2025-10-26 03:00 CEST becomes 02:00 CET.
		{"repeated time runs once, at its first occurrence", "30 2 * * *", vienna, "2025-10-25T12:00:00Z", []string{"2025-10-26T00:30:00Z", "2025-10-27T01:30:00Z"}},
		{"repeated hour is not run twice", "*/30 * * * *", vienna, "2025-10-26T00:45:00Z", []string{"2025-10-26T02:00:00Z", "2025-10-26T02:30:00Z"}},
		{"from inside the second pass", "15 2 * * *", vienna, "2025-10-26T01:10:00Z", []string{"2025-10-27T01:15:00Z"}},
		// New York springs forward at 02:00 EST to 03:00 EDT on 2025-03-09.
		{"other zone", "30 2 * * 0", ny, "2025-03-08T00:00:00Z", []string{"2025-03-09T07:00:00Z", "2025-03-16T06:30:00Z"}},
		{"first of the month", "0 0 1 * *", vienna, "2025-01-15T00:00:00Z", []string{"2025-01-31T23:00:00Z", "2025-02-28T23:00:00Z"}},
		{"leap day", "0 12 29 2 *", time.UTC, "2025-01-01T00:00:00Z", []string{"2028-02-29T12:00:00Z"}},
		{"descriptor", "@daily", vienna, "2025-06-16T07:00:00Z", []string{"2025-06-16T22:00:00Z"}},
		{"dom or dow when both are set", "0 8 1 * 1", time.UTC, "2025-09-01T09:00:00Z", []string{"2025-09-08T08:00:00Z", "2025-09-15T08:00:00Z"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := mustSched(t, tc.expr)
			after := utc(tc.after)
			for i, w := range tc.want {
				got, ok := NextRun(s, tc.loc, after)
				if !ok || !got.Equal(utc(w)) {
					t.Fatalf("run %d of %q after %s = %s (ok=%v), want %s", i+1, tc.expr, after.In(tc.loc), got.In(tc.loc), ok, utc(w).In(tc.loc))
				}
				after = got
			}
		})
	}
	if _, ok := NextRun(mustSched(t, "0 0 30 2 *"), time.UTC, time.Now()); ok {
		t.Error("NextRun of February 30th: ok = true, want false")
	}
}

// BenchmarkNextRun shows the cost of computing a next run: a common
// schedule, and the worst case (a leap-day schedule searched across years).
func BenchmarkNextRun(b *testing.B) {
	vienna, err := time.LoadLocation("Europe/Vienna")
	if err != nil {
		b.Fatal(err)
	}
	from := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct{ name, expr string }{{"weekdays", "0 9 * * 1-5"}, {"every15", "*/15 * * * *"}, {"leapday", "0 12 29 2 *"}} {
		s, err := cronParser.Parse(c.expr)
		if err != nil {
			b.Fatal(err)
		}
		spec := s.(*cron.SpecSchedule)
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, ok := NextRun(spec, vienna, from); !ok {
					b.Fatal("never")
				}
			}
		})
	}
}
