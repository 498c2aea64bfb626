// Package sdnotify speaks systemd's notify protocol: readiness, stopping,
// status and watchdog pings sent as datagrams to $NOTIFY_SOCKET. Outside
// systemd (no NOTIFY_SOCKET) every call is a no-op.
package sdnotify

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Notifier sends notifications to one socket.
type Notifier struct {
	addr *net.UnixAddr
	// watchdog is half of WATCHDOG_USEC, or 0 when no watchdog is set.
	watchdog time.Duration
}

// FromEnv reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID through
// getenv (nil: os.Getenv). The result is never nil.
func FromEnv(getenv func(string) string) *Notifier {
	if getenv == nil {
		getenv = os.Getenv
	}
	n := &Notifier{}
	if sock := getenv("NOTIFY_SOCKET"); sock != "" {
		if strings.HasPrefix(sock, "@") {
			sock = "\x00" + sock[1:] // abstract namespace
		}
		n.addr = &net.UnixAddr{Name: sock, Net: "unixgram"}
	}
	if usec, err := strconv.ParseInt(getenv("WATCHDOG_USEC"), 10, 64); err == nil && usec > 0 {
		pid := getenv("WATCHDOG_PID")
		if pid == "" || pid == strconv.Itoa(os.Getpid()) {
			n.watchdog = time.Duration(usec) * time.Microsecond / 2
		}
	}
	return n
}

// Enabled reports whether a notify socket is set.
func (n *Notifier) Enabled() bool { return n.addr != nil }

// WatchdogInterval is how often to ping (half the unit's WatchdogSec), or 0.
func (n *Notifier) WatchdogInterval() time.Duration { return n.watchdog }

// Send writes one notification ("READY=1", "STATUS=...", ...).
func (n *Notifier) Send(state string) error {
	if n.addr == nil {
		return nil
	}
	conn, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	return nil
}

// Ready tells systemd the service is up.
func (n *Notifier) Ready(status string) error {
	return n.Send("READY=1\nSTATUS=" + status)
}

// Stopping tells systemd the service is shutting down.
func (n *Notifier) Stopping() error { return n.Send("STOPPING=1") }

// Watchdog pings the watchdog.
func (n *Notifier) Watchdog() error { return n.Send("WATCHDOG=1") }
