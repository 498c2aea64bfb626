package telegram

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/chat"
)

// ---- the durable offset ----

// offsets keeps the id of the last update handled, in memory and in a
// small file written atomically.
type offsets struct {
	files chat.Files
	dir   string
	lg    *slog.Logger

	mu   sync.Mutex
	path string
	id   int64
}

type offsetState struct {
	LastUpdateID int64 `json:"lastUpdateId"`
}

// load finds the offset file (in dir, or beside the adapter's channel
// directories) and reads it.
func (o *offsets) load() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dir != "" {
		o.path = filepath.Join(o.dir, offsetFile)
	} else if o.files != nil {
		ids, err := o.files.LoggedChannels()
		if err != nil {
			o.lg.Warn("cannot list channels to find the update offset", "err", err)
		}
		if len(ids) > 0 {
			if dir, err := o.files.ChannelDir(ids[0]); err == nil {
				o.path = filepath.Join(filepath.Dir(dir), offsetFile)
			}
		}
	}
	if o.path == "" {
		return
	}
	data, err := os.ReadFile(o.path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	var st offsetState
	if err == nil {
		err = json.Unmarshal(data, &st)
	}
	if err != nil {
		o.lg.Warn("cannot read the update offset; starting from what Telegram holds", "path", o.path, "err", err)
		return
	}
	o.id = st.LastUpdateID
}

func (o *offsets) last() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.id
}

// next is the offset getUpdates asks for: the update after the last one
// handled (0: whatever Telegram holds).
func (o *offsets) next() int64 {
	if id := o.last(); id > 0 {
		return id + 1
	}
	return 0
}

// save records update id as handled. Until a file place is known (no
// channel yet), the first channel's directory tells it.
func (o *offsets) save(id int64, channelID string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if id <= o.id {
		return
	}
	o.id = id
	if o.path == "" && o.files != nil && channelID != "" {
		if dir, err := o.files.ChannelDir(channelID); err == nil {
			o.path = filepath.Join(filepath.Dir(dir), offsetFile)
		}
	}
	if o.path == "" {
		return
	}
	data, _ := json.Marshal(offsetState{LastUpdateID: id})
	if err := atomicfile.WriteFile(o.path, data, 0o600); err != nil {
		o.lg.Error("cannot store the update offset", "err", err)
	}
}
