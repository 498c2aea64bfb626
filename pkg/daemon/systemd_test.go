package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
)

// health answers each check with the next of its results, and tells the
// test on calls.
type health struct {
	results chan error
	calls   chan struct{}
}

func (h *health) Healthy(context.Context) error {
	err := <-h.results
	h.calls <- struct{}{}
	return err
}

// waitPending waits until the watchdog loop has a timer on c.
func waitPending(t *testing.T, c *clock.Fake) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); c.Pending() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watchdog loop never waited on the clock")
		}
	}
}

// TestNotifySystemdWatchdog: READY with the status, a WATCHDOG ping per
// interval on the injected clock while the core is healthy, none while it
// is not, and STOPPING at the end, over a real notify socket.
func TestNotifySystemdWatchdog(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	read := func() string {
		t.Helper()
		buf := make([]byte, 512)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("read notification: %v", err)
		}
		return string(buf[:n])
	}
	getenv := func(k string) string {
		return map[string]string{"NOTIFY_SOCKET": sock, "WATCHDOG_USEC": "2000000"}[k]
	}
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	h := &health{results: make(chan error, 1), calls: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(t.Context())
	stopping := notifySystemd(ctx, h, slog.New(slog.DiscardHandler), "serving 1 adapter(s)", clk, getenv)

	if got := read(); got != "READY=1\nSTATUS=serving 1 adapter(s)" {
		t.Errorf("first notification %q, want READY with the status", got)
	}
	// Healthy: one ping per interval (half of WATCHDOG_USEC).
	h.results <- nil
	waitPending(t, clk)
	clk.Advance(time.Second)
	<-h.calls
	if got := read(); got != "WATCHDOG=1" {
		t.Errorf("after a healthy check %q, want WATCHDOG=1", got)
	}
	// Unhealthy: no ping; the next healthy tick pings again.
	h.results <- errors.New("core stuck")
	waitPending(t, clk)
	clk.Advance(time.Second)
	<-h.calls
	h.results <- nil
	waitPending(t, clk)
	clk.Advance(time.Second)
	<-h.calls
	if got := read(); got != "WATCHDOG=1" {
		t.Errorf("after an unhealthy then a healthy check %q, want exactly one WATCHDOG=1 (the healthy one)", got)
	}
	cancel()
	stopping()
	if got := read(); got != "STOPPING=1" {
		t.Errorf("at the end %q, want STOPPING=1", got)
	}
}
