package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/jsonl"
)

// NewestMessage returns the newest message in channelDir/log.jsonl for
// which keep is true, reading the log backwards and looking at no more
// than maxLines lines. Adapters use it after a restart to know the last
// platform message the channel saw (keep filters out ids Mother made up).
// A missing log is not an error: found is false.
func NewestMessage(channelDir string, keep func(chat.ChannelMessage) bool, maxLines int) (msg chat.ChannelMessage, found bool, err error) {
	f, err := os.Open(filepath.Join(channelDir, "log.jsonl"))
	if errors.Is(err, fs.ErrNotExist) {
		return chat.ChannelMessage{}, false, nil
	}
	if err != nil {
		return chat.ChannelMessage{}, false, fmt.Errorf("newest message: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return chat.ChannelMessage{}, false, fmt.Errorf("newest message: %w", err)
	}
	end := st.Size()
	for n := 0; end > 0 && n < maxLines; n++ {
		start, err := jsonl.LineStart(f, end-1)
		if err != nil {
			return chat.ChannelMessage{}, false, fmt.Errorf("newest message: %w", err)
		}
		line := make([]byte, end-start)
		if _, err := f.ReadAt(line, start); err != nil {
			return chat.ChannelMessage{}, false, fmt.Errorf("newest message: %w", err)
		}
		end = start
		var m chat.ChannelMessage
		if json.Unmarshal(line, &m) != nil {
			continue // a torn or foreign line
		}
		if keep == nil || keep(m) {
			return m, true, nil
		}
	}
	return chat.ChannelMessage{}, false, nil
}
