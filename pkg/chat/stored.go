package chat

import (
	"context"
	"errors"
)

// ErrNotStored is matched (errors.Is) by the error Inbox.Deliver returns
// when Mother could not store a message: the adapter delivers it again
// later and meanwhile does not mark it handled on its platform.
var ErrNotStored = errors.New("message not stored")

// NotStoredError is Inbox.Deliver's error when Mother could not store a
// message. Err is why (a full or failing disk); Ready, when not nil, is
// closed once storing is worth trying again (the disk can be written
// again), so an adapter need not poll.
type NotStoredError struct {
	Err   error
	Ready <-chan struct{}
}

func (e *NotStoredError) Error() string { return "message not stored: " + e.Err.Error() }

// Unwrap gives ErrNotStored and the cause.
func (e *NotStoredError) Unwrap() []error { return []error{ErrNotStored, e.Err} }

// RetryReady is the channel in Deliver's error that is closed once
// delivering again is worth trying (nil: none; wait a backoff).
func RetryReady(err error) <-chan struct{} {
	var ns *NotStoredError
	if errors.As(err, &ns) {
		return ns.Ready
	}
	return nil
}

// DirectMessenger is an adapter that can reach one person privately: a
// direct message on Discord, Slack, Telegram and WhatsApp, the terminal
// itself for the terminal adapter (whoever sits at it is the operator;
// userID is ignored). Mother tells the admins this way of trouble of her
// own, such as a full disk.
type DirectMessenger interface {
	DirectMessage(ctx context.Context, userID, markdown string) error
}
