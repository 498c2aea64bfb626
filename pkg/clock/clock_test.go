package clock

import (
	"testing"
	"time"
)

func TestFakeFiresInOrder(t *testing.T) {
	t.Parallel()
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewFake(start)
	var got []string
	var at []time.Duration
	rec := func(s string) func() {
		return func() { got = append(got, s); at = append(at, c.Now().Sub(start)) }
	}
	c.AfterFunc(3*time.Second, rec("c"))
	c.AfterFunc(time.Second, rec("a"))
	stopped := c.AfterFunc(2*time.Second, rec("never"))
	c.AfterFunc(2*time.Second, func() {
		got = append(got, "b")
		// A timer set from a timer, due within the same advance, fires.
		c.AfterFunc(500*time.Millisecond, rec("b2"))
	})
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer = false, want true")
	}
	if stopped.Stop() {
		t.Error("second Stop = true, want false")
	}
	c.Advance(2500 * time.Millisecond)
	if want := "a,b,b2"; join(got) != want {
		t.Fatalf("fired %v, want %s", got, want)
	}
	if c.Now().Sub(start) != 2500*time.Millisecond {
		t.Errorf("Now = +%v, want +2.5s", c.Now().Sub(start))
	}
	if c.Pending() != 1 || c.NextAt().Sub(start) != 3*time.Second {
		t.Errorf("Pending = %d, NextAt = %v; want 1 timer at +3s", c.Pending(), c.NextAt())
	}
	c.Advance(time.Hour)
	if want := "a,b,b2,c"; join(got) != want {
		t.Fatalf("fired %v, want %s", got, want)
	}
	if at[len(at)-1] != 3*time.Second {
		t.Errorf("timer c saw Now = +%v, want +3s", at[len(at)-1])
	}
}

// TestFakeStall: a stall moves the time on without firing what falls due;
// the next Advance fires it once, late (Now is the stalled time), and a
// ticker's next tick comes a period after that late one.
func TestFakeStall(t *testing.T) {
	t.Parallel()
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewFake(start)
	var at []time.Duration
	var tick func()
	tick = func() {
		at = append(at, c.Now().Sub(start))
		c.AfterFunc(time.Second, tick)
	}
	c.AfterFunc(time.Second, tick)
	c.Stall(5 * time.Second)
	if len(at) != 0 || c.Now().Sub(start) != 5*time.Second {
		t.Fatalf("during the stall: fired at %v, Now = +%v; want nothing fired, +5s", at, c.Now().Sub(start))
	}
	c.Advance(0)
	c.Advance(time.Second)
	if len(at) != 2 || at[0] != 5*time.Second || at[1] != 6*time.Second {
		t.Errorf("after the stall: fired at %v, want once late (+5s), then +6s", at)
	}
}

func join(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ","
		}
		out += v
	}
	return out
}

func TestRealAfterFunc(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	var c Clock = Real{}
	c.AfterFunc(time.Millisecond, func() { close(done) })
	<-done
	if c.Now().IsZero() {
		t.Error("Real.Now is zero")
	}
}
