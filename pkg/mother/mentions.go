package mother

import (
	"context"

	"github.com/mother-chat/mother/pkg/chat"
)

// postLoggedMentioning is postLogged for a notice that names people
// Mother's own code chose (mentions): where the adapter can
// (chat.Mentioner) those people, and nobody else, are notified. Every
// other post Mother makes is inert: the text her model or a chick wrote
// notifies nobody.
func (m *Mother) postLoggedMentioning(a chat.Adapter, channelID, text, replyTo string, mentions []chat.Mention) error {
	post := func(ctx context.Context) (string, error) { return a.Post(ctx, channelID, text) }
	if mp, ok := a.(chat.Mentioner); ok && len(mentions) > 0 {
		post = func(ctx context.Context) (string, error) { return mp.PostMentioning(ctx, channelID, text, mentions) }
	}
	_, err := m.postLoggedWith(a, channelID, text, replyTo, post)
	return err
}
