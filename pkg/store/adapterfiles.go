package store

import (
	"io"

	"github.com/mother-chat/mother/pkg/chat"
)

// AdapterFiles gives the adapter named adapter access to its own channels'
// directories (chat.Env.Files).
func (s *Store) AdapterFiles(adapter string) chat.Files {
	return adapterFiles{s: s, adapter: adapter}
}

type adapterFiles struct {
	s       *Store
	adapter string
}

var _ chat.Files = adapterFiles{}

func (f adapterFiles) ChannelDir(channelID string) (string, error) {
	ch, err := f.s.Channel(f.adapter, channelID)
	if err != nil {
		return "", err
	}
	return ch.Dir(), nil
}

func (f adapterFiles) LoggedChannels() ([]string, error) {
	refs, err := f.s.ListChannels()
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, r := range refs {
		if r.Adapter == f.adapter {
			ids = append(ids, r.ID)
		}
	}
	return ids, nil
}

func (f adapterFiles) NewestMessage(channelDir string, keep func(chat.ChannelMessage) bool, maxLines int) (chat.ChannelMessage, bool, error) {
	return NewestMessage(channelDir, keep, maxLines)
}

func (f adapterFiles) SaveAttachment(channelDir, prefix, name, mimeType string, r io.Reader, max int64) (chat.ChannelAttachment, error) {
	return SaveAttachment(channelDir, prefix, name, mimeType, r, max)
}
