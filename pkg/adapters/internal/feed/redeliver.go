package feed

import (
	"context"
	"log/slog"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
)

// Retry bounds the waits between deliveries of a message Mother could not
// store: the disk's recovery (chat.RetryReady) ends a wait at once; without
// it, or if it has come already, they grow from RetryMin to RetryMax.
var (
	RetryMin = time.Second
	RetryMax = time.Minute
)

// WaitRetry waits after a failed delivery (err, from Inbox.Deliver): until
// the inbox says storing is worth trying again, or bo's next wait has
// passed, whichever comes first. It returns ctx's error if ctx ends first.
func WaitRetry(ctx context.Context, clk clock.Clock, err error, bo *Backoff) error {
	if clk == nil {
		clk = clock.Real{}
	}
	ready := chat.RetryReady(err)
	if ready != nil {
		select {
		case <-ready:
			// Already past: the inbox failed with the disk thought fine
			// (or it has just recovered). Only the backoff keeps this
			// from a tight loop.
			ready = nil
		default:
		}
	}
	passed := make(chan struct{})
	t := clk.AfterFunc(bo.Next(), func() { close(passed) })
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-ready:
		return nil
	case <-passed:
		return nil
	}
}

// Redeliver calls deliver until it returns nil (the message is Mother's)
// or ctx ends (ctx's error): after each failure it waits (WaitRetry). The
// adapter calls it where it handles messages one at a time, so what comes
// after the message waits behind it, in order. The first failure and the
// delivery that ends them are logged.
func Redeliver(ctx context.Context, clk clock.Clock, lg *slog.Logger, what string, deliver func() error) error {
	bo := Backoff{Min: RetryMin, Max: RetryMax}
	for {
		err := deliver()
		if err == nil {
			if bo.Attempts() > 0 {
				lg.Info("message delivered after Mother could not store it", "message", what, "attempts", bo.Attempts()+1)
			}
			return nil
		}
		if bo.Attempts() == 0 {
			lg.Warn("Mother could not store a message; holding it (not marked handled) to deliver again", "message", what, "err", err)
		}
		if werr := WaitRetry(ctx, clk, err, &bo); werr != nil {
			return werr
		}
	}
}
