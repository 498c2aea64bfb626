package sdnotify

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestNotifyOverARealSocket(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	env := map[string]string{"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": strconv.Itoa(os.Getpid())}
	n := FromEnv(func(k string) string { return env[k] })
	if !n.Enabled() || n.WatchdogInterval() != 15*time.Second {
		t.Fatalf("Enabled %v, watchdog %v; want true, 15s", n.Enabled(), n.WatchdogInterval())
	}
	for _, send := range []func() error{func() error { return n.Ready("serving 2 adapters") }, n.Watchdog, n.Stopping} {
		if err := send(); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"READY=1\nSTATUS=serving 2 adapters", "WATCHDOG=1", "STOPPING=1"}
	buf := make([]byte, 256)
	for _, w := range want {
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		k, err := conn.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(buf[:k]); got != w {
			t.Errorf("datagram = %q, want %q", got, w)
		}
	}
}

func TestNoSocketIsANoOp(t *testing.T) {
	t.Parallel()
	n := FromEnv(func(string) string { return "" })
	if n.Enabled() || n.WatchdogInterval() != 0 || n.Ready("x") != nil {
		t.Error("without NOTIFY_SOCKET the notifier must do nothing")
	}
	other := FromEnv(func(k string) string {
		return map[string]string{"WATCHDOG_USEC": "1000", "WATCHDOG_PID": "1"}[k]
	})
	if other.WatchdogInterval() != 0 {
		t.Error("a watchdog meant for another pid was accepted")
	}
}
