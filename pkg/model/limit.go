package model

import (
	"context"
	"errors"
)

// Limit returns a provider that runs at most n calls of p at a time; further
// calls wait for a slot (or for their ctx to end). Mother wraps her own
// model with it: a burst across many channels then queues here instead of
// opening dozens of streams (each costs memory on the Pi, and the model
// server serialises them anyway). n <= 0 means no limit.
func Limit(p Provider, n int) Provider {
	if n <= 0 {
		return p
	}
	return &limited{p: p, sem: make(chan struct{}, n)}
}

type limited struct {
	p   Provider
	sem chan struct{}
}

var (
	_ ContextWindower = (*limited)(nil)
	_ ImageSupporter  = (*limited)(nil)
)

func (l *limited) Chat(ctx context.Context, req Request, onDelta func(Delta)) (Response, error) {
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return Response{}, ctx.Err()
	}
	defer func() { <-l.sem }()
	return l.p.Chat(ctx, req, onDelta)
}

var errUnsupported = errors.New("not reported by this provider")

// ContextWindow passes through to the wrapped provider when it can tell.
func (l *limited) ContextWindow(ctx context.Context, model string) (int, error) {
	if cw, ok := l.p.(ContextWindower); ok {
		return cw.ContextWindow(ctx, model)
	}
	return 0, errUnsupported
}

// SupportsImages passes through to the wrapped provider when it can tell.
func (l *limited) SupportsImages(ctx context.Context, model string) (bool, error) {
	if is, ok := l.p.(ImageSupporter); ok {
		return is.SupportsImages(ctx, model)
	}
	return false, errUnsupported
}
