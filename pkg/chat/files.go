package chat

import (
	"errors"
	"fmt"
	"io"
)

// DefaultMaxAttachment is the largest file an adapter downloads unless
// told otherwise (25 MiB).
const DefaultMaxAttachment = 25 << 20

// Files is an adapter's access to its own channels' directories in
// Mother's store: where attachments are saved and where the channel log
// tells backfill what was last seen. The store implements it per adapter
// (store.AdapterFiles), so adapters never import the store.
type Files interface {
	// ChannelDir returns the directory of one of the adapter's channels,
	// creating it if needed.
	ChannelDir(channelID string) (string, error)
	// LoggedChannels lists the ids of the adapter's channels that have a
	// directory, so an adapter can backfill what it missed while Mother
	// was down.
	LoggedChannels() ([]string, error)
	// NewestMessage returns the newest message in channelDir's log for
	// which keep is true, looking at no more than maxLines lines; found is
	// false when there is none (or no log).
	NewestMessage(channelDir string, keep func(ChannelMessage) bool, maxLines int) (msg ChannelMessage, found bool, err error)
	// SaveAttachment stores a downloaded file under channelDir's
	// attachments/ as "<prefix>-<name>", reading at most max bytes from r
	// (over it, nothing is kept and an error says so).
	SaveAttachment(channelDir, prefix, name, mimeType string, r io.Reader, max int64) (ChannelAttachment, error)
}

// ValidID checks an adapter name or a platform channel id, which Mother
// uses as path elements in her store: 1 to 128 characters from
// [A-Za-z0-9._-], not starting with a dot. Adapters drop messages from a
// channel whose id fails it.
func ValidID(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if len(s) > 128 {
		return fmt.Errorf("%q: longer than 128 characters", s)
	}
	if s[0] == '.' {
		return fmt.Errorf("%q: starts with a dot", s)
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return fmt.Errorf("%q: character %q not allowed (use A-Z a-z 0-9 . _ -)", s, r)
		}
	}
	return nil
}
