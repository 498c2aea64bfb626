package chat

import "context"

// Mention is a user whom Mother's own code names in a post so that the
// platform notifies them: the admin who answered an access request. It is
// the only thing that notifies anyone. Text itself is inert on every
// platform: what Mother's model writes and what chicks send back (labels,
// results, reasons, skill descriptions, file names) mentions nobody, even
// when it spells a platform's mention syntax (<!channel>, <@U123>,
// @everyone, [x](tg://user?id=1), @username).
type Mention struct {
	// ID is the user's platform id.
	ID string
	// Username is how the post's markdown names the user, as "@username";
	// empty: the ID names them ("@U123").
	Username string
}

// Text is how a post's markdown names the user: "@username".
func (m Mention) Text() string {
	if m.Username == "" {
		return "@" + m.ID
	}
	return "@" + m.Username
}

// MentionOf is the Mention of a message's sender.
func MentionOf(s Sender) Mention { return Mention{ID: s.ID, Username: s.Username} }

// Mentioner is implemented by adapters that can post a notice whose
// mentions notify. Each mention's Text in markdown becomes the platform's
// live mention of its ID; nothing else in markdown notifies anyone.
// Adapters without it post with Post, where the names stay plain text.
type Mentioner interface {
	PostMentioning(ctx context.Context, channelID, markdown string, mentions []Mention) (string, error)
}
