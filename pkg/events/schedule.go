package events

import (
	"time"

	"github.com/robfig/cron/v3"
)

// starBit marks a cron field written as "*" (robfig/cron's convention).
const starBit = 1 << 63

// searchDays bounds the search for a next run (a leap-day schedule fires
// at least once in this many days).
const searchDays = 366*8 + 2

// NextRun returns the first instant strictly after `after` at which the
// schedule fires in loc, and false if it never does.
//
// Schedules are wall-clock times in loc, and each wall-clock time the
// schedule lists runs exactly once:
//   - a time that does not exist (the hour skipped when clocks spring
//     forward) runs at the first instant after the gap (02:30 runs at
//     03:00 new time); several such times run once together;
//   - a time that exists twice (the hour repeated when clocks fall back)
//     runs at its first occurrence only.
//
// robfig/cron's own Next is not used because it skips the spring-forward
// time and runs the fall-back time twice.
func NextRun(s *cron.SpecSchedule, loc *time.Location, after time.Time) (time.Time, bool) {
	if s == nil || loc == nil {
		return time.Time{}, false
	}
	a := after.In(loc)
	y, m, d := a.Date()
	h0, m0 := a.Hour(), a.Minute()
	for i := 0; i < searchDays; i++ {
		day := time.Date(y, m, d+i, 12, 0, 0, 0, time.UTC)
		if s.Month&(1<<uint(day.Month())) == 0 || !dayMatches(s, day) {
			continue
		}
		dy, dm, dd := day.Date()
		for h := 0; h < 24; h++ {
			if s.Hour&(1<<uint(h)) == 0 || i == 0 && h < h0 {
				continue
			}
			for mi := 0; mi < 60; mi++ {
				if s.Minute&(1<<uint(mi)) == 0 || i == 0 && h == h0 && mi < m0 {
					continue
				}
				if t := wallInstant(dy, dm, dd, h, mi, loc); t.After(after) {
					return t, true
				}
			}
		}
	}
	return time.Time{}, false
}

// dayMatches applies cron's rule: if day-of-month or day-of-week is "*",
// both must match; otherwise either may.
func dayMatches(s *cron.SpecSchedule, day time.Time) bool {
	dom := s.Dom&(1<<uint(day.Day())) > 0
	dow := s.Dow&(1<<uint(day.Weekday())) > 0
	if s.Dom&starBit > 0 || s.Dow&starBit > 0 {
		return dom && dow
	}
	return dom || dow
}

// wallInstant maps a wall-clock time in loc to an instant: the earlier one
// when the time exists twice, the end of the gap when it does not exist.
func wallInstant(y int, mo time.Month, d, h, mi int, loc *time.Location) time.Time {
	u := time.Date(y, mo, d, h, mi, 0, 0, time.UTC)
	_, before := u.Add(-36 * time.Hour).In(loc).Zone()
	_, after := u.Add(36 * time.Hour).In(loc).Zone()
	var best time.Time
	for _, off := range []int{before, after} {
		t := u.Add(-time.Duration(off) * time.Second)
		lt := t.In(loc)
		if lt.Year() == y && lt.Month() == mo && lt.Day() == d && lt.Hour() == h && lt.Minute() == mi {
			if best.IsZero() || t.Before(best) {
				best = t
			}
		}
	}
	if !best.IsZero() {
		return best
	}
	// In a gap: the instant read with the old offset lies past the
	// transition; the zone in force there started at the gap's end.
	t := u.Add(-time.Duration(before) * time.Second).In(loc)
	start, _ := t.ZoneBounds()
	if start.IsZero() {
		return t
	}
	return start
}
