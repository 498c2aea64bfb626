package hatchery

import (
	"testing"
	"time"
)

// beatsRun plays a chick's heartbeats against the watchdog's ticks, both
// in heartbeat intervals from 0: heard are the times the chick is heard
// (it is heard at 0), ticks the times the watchdog checks; a tick in late
// came late (Mother was not running before it). It returns the tick at
// which the chick was declared hung (-1 if never) and the silence given.
func beatsRun(heard, ticks []float64, late map[float64]bool) (float64, time.Duration) {
	const iv = 500 * time.Millisecond
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	at := func(x float64) time.Time { return t0.Add(time.Duration(x * float64(iv))) }
	var b beats
	last := at(0)
	b.heard(last, time.Time{}) // its first word
	h := 0
	for _, tk := range ticks {
		for h < len(heard) && heard[h] <= tk {
			b.heard(at(heard[h]), last)
			last = at(heard[h])
			h++
		}
		if hung, limit := b.tick(at(tk), last, iv, late[tk]); hung {
			return tk, limit
		}
	}
	return -1, 0
}

func upTo(n int) []float64 {
	var out []float64
	for i := 1; i <= n; i++ {
		out = append(out, float64(i))
	}
	return out
}

// measured is how long a chick is heard every interval, from its first
// word, before its heartbeats count as measured (gapWindow intervals).
const measured = gapWindow + 1

// TestBeatsCountMissedHeartbeats: the watchdog's verdict is counted in its
// own ticks, with no wall clock in it. Once measured (heard every interval
// for gapWindow intervals: the cases marked measured, which start after
// that), a chick gone silent is hung at the fourth tick (three heartbeats
// missed: 1.5 s with 500 ms); one heard every interval, or a little late,
// never; a tick that came late (Mother was stalled) counts nothing,
// however long the stall. Before it is measured, a silence may last up to
// maxStretch intervals.
func TestBeatsCountMissedHeartbeats(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		measured  bool
		heard     []float64
		ticks     []float64
		late      map[float64]bool
		wantAt    float64
		wantLimit time.Duration
	}{
		// Before anything is measured.
		{name: "silent from its first word", ticks: upTo(20), wantAt: 13, wantLimit: 6 * time.Second},
		{
			// A stall of five intervals while it starts (a loaded
			// machine) is not taken for a hang ...
			name: "a stall while starting", heard: append([]float64{1, 2}, upTo(30)[6:]...), ticks: upTo(30), wantAt: -1,
		},
		{
			// ... nor is it once measured: then it is.
			name: "the same stall once measured", measured: true, heard: append([]float64{1, 2}, upTo(30)[6:]...), ticks: upTo(30),
			wantAt: 6, wantLimit: 1500 * time.Millisecond,
		},
		{name: "silent", measured: true, ticks: upTo(20), wantAt: 4, wantLimit: 1500 * time.Millisecond},
		{name: "heard every interval", measured: true, heard: upTo(40), ticks: upTo(40), wantAt: -1},
		{name: "heard just before each tick", measured: true, heard: []float64{0.9, 1.9, 2.9, 3.9, 4.9, 5.9}, ticks: upTo(6), wantAt: -1},
		{
			// Jitter of up to a quarter interval stretches nothing:
			// silent after it, the chick is hung after 3 intervals.
			name: "jitter, then silent", measured: true, heard: []float64{1.2, 2.1, 3.25, 4.3, 5.2}, ticks: upTo(20), wantAt: 9, wantLimit: 1500 * time.Millisecond,
		},
		{
			// A gap just over the jitter is rounded up to a quarter
			// interval: 1.3 intervals are 1.5 (750ms), three 2.25s.
			name: "a late gap, then silent", measured: true, heard: []float64{1, 2.3}, ticks: upTo(20), wantAt: 7, wantLimit: 2250 * time.Millisecond,
		},
		{name: "heard, then silent", measured: true, heard: []float64{1, 2, 3}, ticks: upTo(20), wantAt: 7, wantLimit: 1500 * time.Millisecond},
		{
			// Mother stalled 10 intervals: her next tick comes late and
			// counts nothing; the heartbeats that waited are read before
			// the tick after.
			name: "Mother stalled", measured: true, heard: []float64{1, 2, 12.5, 13.5, 14.5}, ticks: []float64{1, 2, 12, 13, 14, 15},
			late: map[float64]bool{12: true}, wantAt: -1,
		},
		{
			// The stall does not hide a chick that really stopped.
			name: "Mother stalled, chick stopped", measured: true, heard: []float64{1, 2}, ticks: []float64{1, 2, 12, 13, 14, 15, 16},
			late: map[float64]bool{12: true}, wantAt: 15, wantLimit: 1500 * time.Millisecond,
		},
		{
			// Heartbeats getting later and later (a machine under more
			// and more load): the threshold follows the measured gaps,
			// so 3.5 intervals of silence before each heartbeat are not
			// taken for three missed ones.
			name: "heartbeats slowing down", measured: true, heard: []float64{2, 4, 7, 10.5, 14.5, 18.5, 22.5, 26.5, 30.5}, ticks: upTo(30), wantAt: -1,
		},
		{
			// Stretched, but not without end: a chick that stops after
			// slow heartbeats is hung after three of its own gaps (at
			// most maxStretch intervals each).
			name: "slow, then stopped", measured: true, heard: []float64{2, 4, 7, 10.5, 14.5}, ticks: upTo(40), wantAt: 27, wantLimit: 6 * time.Second,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			heard, ticks, late, wantAt := tc.heard, tc.ticks, tc.late, tc.wantAt
			if tc.measured {
				// Heard every interval up to measured, then the case,
				// from there.
				shift := func(xs []float64) []float64 {
					out := upTo(measured)
					for _, x := range xs {
						out = append(out, x+measured)
					}
					return out
				}
				heard, ticks = shift(heard), shift(ticks)
				late = map[float64]bool{}
				for k, v := range tc.late {
					late[k+measured] = v
				}
				if wantAt >= 0 {
					wantAt += measured
				}
			}
			at, limit := beatsRun(heard, ticks, late)
			if at != wantAt || limit != tc.wantLimit {
				t.Errorf("hung at tick %v (no heartbeat for %s), want %v (%s)", at, limit, wantAt, tc.wantLimit)
			}
		})
	}
}
