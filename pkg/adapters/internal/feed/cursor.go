package feed

import (
	"log/slog"
	"sync"

	"github.com/mother-chat/mother/pkg/chat"
)

// Cursor knows, per channel, the newest platform message Mother has: the
// newest delivered in this run, or the newest in the channel's log. After
// a restart or a reconnect, backfill fetches what came after it.
type Cursor struct {
	// Files reads the channel logs; nil: only this run's messages count.
	Files chat.Files
	// Newer reports whether platform id a is newer than b ("" is older
	// than any id).
	Newer func(a, b string) bool
	// IsPlatformID tells a platform message id from one Mother made up.
	IsPlatformID func(id string) bool
	// LoggedChannel, if set, filters the logged channel ids worth a
	// backfill (Discord: snowflakes only).
	LoggedChannel func(channelID string) bool
	Log           *slog.Logger

	mu   sync.Mutex
	last map[string]string
}

// Note records that message id of channelID was delivered.
func (c *Cursor) Note(channelID, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[string]string{}
	}
	if c.Newer(id, c.last[channelID]) {
		c.last[channelID] = id
	}
}

// Logged maps each logged channel to the newest platform message id in its
// log: where backfill starts after a restart.
func (c *Cursor) Logged() map[string]string {
	out := map[string]string{}
	if c.Files == nil {
		return out
	}
	lg := c.Log
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	ids, err := c.Files.LoggedChannels()
	if err != nil {
		lg.Error("cannot list channels for backfill", "err", err)
		return out
	}
	for _, id := range ids {
		if c.LoggedChannel != nil && !c.LoggedChannel(id) {
			continue
		}
		dir, err := c.Files.ChannelDir(id)
		if err != nil {
			continue
		}
		last, found, err := c.Files.NewestMessage(dir, func(m chat.ChannelMessage) bool { return c.IsPlatformID(m.ID) }, 1000)
		if err != nil {
			lg.Warn("cannot read channel log for backfill", "channel", id, "err", err)
			continue
		}
		if found {
			out[id] = last.ID
		}
	}
	return out
}

// Resume maps every channel logged or seen in this run to the newest id
// known of the two: where backfill starts after a reconnect.
func (c *Cursor) Resume() map[string]string {
	from := c.Logged()
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.last {
		if c.Newer(v, from[k]) {
			from[k] = v
		}
	}
	return from
}
