package chat

import "time"

// ConnState is how an adapter's connection to its platform is.
type ConnState string

// Connection states.
const (
	// ConnConnected: messages arrive.
	ConnConnected ConnState = "connected"
	// ConnReconnecting: the connection was lost and the adapter is
	// re-establishing it (messages missed meanwhile are backfilled).
	ConnReconnecting ConnState = "reconnecting"
	// ConnDown: not connected and not trying (not started, stopped, or the
	// input ended).
	ConnDown ConnState = "down"
)

// AdapterStatus is an adapter's connection as momctl status and the
// metrics show it.
type AdapterStatus struct {
	State ConnState
	// Since is when State last changed.
	Since time.Time
	// Reconnects counts connections re-established after a loss since
	// the adapter started.
	Reconnects int64
	// LastError is the last connection error (never a token), if any.
	LastError string
}

// StatusReporter is implemented by adapters that can say how their
// connection is. Adapters without it are reported as connected while
// Mother runs.
type StatusReporter interface {
	Status() AdapterStatus
}

// AdapterReport is one configured adapter's status with its name and
// platform type, as Mother reports it.
type AdapterReport struct {
	Name   string
	Type   string
	Status AdapterStatus
}
