package hatchery

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
)

func hashToken(tok string) string {
	s := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(s[:])
}

// Authenticate checks that tok is the token of chick id and that the chick
// has not ended. The comparison is constant-time.
func (h *Hatchery) Authenticate(id, tok string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.chicks[id]
	if !ok || c.rec.TokenHash == "" {
		// Same answer as a bad token: do not reveal which chicks exist.
		return ErrBadToken
	}
	if subtle.ConstantTimeCompare([]byte(hashToken(tok)), []byte(c.rec.TokenHash)) != 1 {
		return ErrBadToken
	}
	if c.rec.State.Final() {
		return ErrChickEnded
	}
	return nil
}

// Assignment is what chick id receives when it joins.
func (h *Hatchery) Assignment(id string) (Assignment, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.chicks[id]
	if !ok {
		return Assignment{}, ErrUnknownChick
	}
	h.heardLocked(c)
	if !c.joined {
		c.joined = true
		if !c.rec.StartedAt.IsZero() {
			h.obs.joined(c.rec, clock.Since(h.clock, c.rec.StartedAt))
		}
	}
	left := time.Duration(0)
	if t := h.cfg.Timeout.Duration; t > 0 {
		left = t - clock.Since(h.clock, c.rec.StartedAt)
		if left < time.Second {
			left = time.Second
		}
	}
	return Assignment{
		ChickID: id, Channel: chat.QualifiedID(c.rec.Adapter, c.rec.ChannelID), Goal: c.rec.Goal, Tier: c.rec.Tier,
		System: c.rec.System, MaxTurns: h.cfg.MaxTurns, WallTimeout: left, TokenBudget: h.budgets.ChickTokens.Int64(),
		HeartbeatInterval: h.cfg.HeartbeatInterval.Duration,
	}, nil
}

// heardLocked records that c said something. The first word ends the
// startup (or reconnect) grace: from then on three missed heartbeats mean
// hung, however early in its life the chick stops. Callers hold h.mu.
func (h *Hatchery) heardLocked(c *chick) {
	now := h.clock.Now()
	c.beats.heard(now, c.lastSeen)
	c.lastSeen = now
}

// Touch records that chick id is alive (any message counts).
func (h *Hatchery) Touch(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.chicks[id]; ok {
		h.heardLocked(c)
	}
}

// Stopping returns a channel closed when the chick is asked to stop, and
// a function giving the reason.
func (h *Hatchery) Stopping(id string) (<-chan struct{}, func() string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.chicks[id]
	if !ok {
		return nil, nil, ErrUnknownChick
	}
	return c.stopCh, func() string {
		h.mu.Lock()
		defer h.mu.Unlock()
		if c.outcome != "" {
			return c.outcome
		}
		return string(c.reason)
	}, nil
}
