package telegram

import (
	"context"
	"fmt"
	"strconv"

	"github.com/go-telegram/bot"
	"github.com/mother-chat/mother/pkg/chat"
)

var _ chat.MemberLookup = (*Adapter)(nil)

// MemberRefs implements chat.MemberLookup: "chatAdmins" when userID is
// the creator or an administrator of the chat (getChatAdministrators).
// A private chat has none.
func (a *Adapter) MemberRefs(ctx context.Context, channelID, userID string) ([]string, error) {
	chatID, _, err := parseChannel(channelID)
	if err != nil {
		return nil, err
	}
	if chatID > 0 {
		return nil, nil // a private chat: no administrators
	}
	admins, err := a.bot.GetChatAdministrators(ctx, &bot.GetChatAdministratorsParams{ChatID: chatID})
	if err != nil {
		return nil, fmt.Errorf("get chat administrators: %s", a.redact(err))
	}
	for _, m := range admins {
		var id int64
		switch {
		case m.Owner != nil && m.Owner.User != nil:
			id = m.Owner.User.ID
		case m.Administrator != nil:
			id = m.Administrator.User.ID
		default:
			continue
		}
		if strconv.FormatInt(id, 10) == userID {
			return []string{"chatAdmins"}, nil
		}
	}
	return nil, nil
}
