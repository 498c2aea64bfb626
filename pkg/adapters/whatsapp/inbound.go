package whatsapp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"regexp"
	"strings"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/mother-chat/mother/pkg/adapters/internal/feed"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/speech"
)

// handleMessage turns one message event into a delivery. Nothing here may
// panic the daemon: a message that breaks the adapter is logged and
// skipped.
func (a *Adapter) handleMessage(ctx context.Context, e *events.Message, late bool) {
	defer func() {
		if r := recover(); r != nil {
			a.lg.Error("skipping a message that broke the adapter", "panic", fmt.Sprint(r))
		}
	}()
	if e == nil || e.Message == nil {
		return
	}
	info := e.Info
	if info.ID == "" || info.Chat.IsEmpty() || info.Sender.IsEmpty() {
		a.lg.Warn("skipping a message without id, chat or sender", "id", info.ID)
		return
	}
	switch info.Chat.Server {
	case types.DefaultUserServer, types.GroupServer, types.HiddenUserServer:
	default:
		// Status updates, broadcast lists, newsletters, bots: not chats
		// Mother takes part in.
		return
	}
	msg := e.Message
	if e.IsEdit || msg.GetProtocolMessage() != nil || msg.GetReactionMessage() != nil || isEmptyContent(msg) {
		return // edits, deletions, reactions, key exchanges: no new message
	}
	if !a.markSeen(ctx, info.Chat.ToNonAD().String()+"/"+info.ID) {
		return // delivered before (a reconnect, the offline sync, a retry)
	}
	if info.IsFromMe {
		// Sent by Mother, or by whoever holds the linked phone: never a
		// user's message to answer.
		a.lg.Debug("own message not taken as a user's", "id", info.ID)
		return
	}
	chatJID := info.Chat.ToNonAD()
	sender := a.phoneJID(ctx, info.Sender, info.SenderAlt)
	if !info.IsGroup {
		chatJID = a.phoneJID(ctx, info.Chat, info.SenderAlt)
	}
	channelID := ChannelID(chatJID)
	if err := chat.ValidID(channelID); err != nil {
		a.lg.Warn("skipping a message with an unusable chat id", "err", err)
		return
	}
	text, ci := content(msg)
	raw := text
	a.mu.Lock()
	self, selfLID := a.self, a.selfLID
	a.mu.Unlock()
	mention := !info.IsGroup
	for _, m := range ci.GetMentionedJID() {
		j, err := types.ParseJID(m)
		if err != nil {
			continue
		}
		if isSelf(j, self, selfLID) {
			mention = true
		}
		// A mention in a LID group reads "@<lid>": name the phone number.
		pn := a.phoneJID(ctx, j, types.EmptyJID)
		if isSelf(j, self, selfLID) {
			pn = self
		}
		if pn.User != j.User {
			text = replaceMention(text, j.User, pn.User)
		}
	}
	if ci.GetStanzaID() != "" {
		if p, err := types.ParseJID(ci.GetParticipant()); err == nil && isSelf(p, self, selfLID) {
			mention = true // a reply to one of her messages
		}
	}
	u := a.learn(ctx, sender, info, chatJID, channelID)
	cm := chat.ChannelMessage{
		ID:          info.ID,
		ChannelID:   channelID,
		Timestamp:   info.Timestamp.UTC(),
		Sender:      chat.Sender{ID: u.ID, Username: u.Username, DisplayName: u.DisplayName},
		Text:        text,
		Attachments: []chat.ChannelAttachment{},
		IsDM:        !info.IsGroup,
		IsMention:   mention,
		ReplyTo:     ci.GetStanzaID(),
		Metadata:    map[string]any{"chatJid": chatJID.String()},
	}
	if raw != text {
		cm.RawText = raw
	}
	a.mu.Lock()
	in := a.inbox
	a.mu.Unlock()
	if ctx.Err() != nil || in == nil {
		return
	}
	// A message Mother could not store (a full disk) is held here, and
	// the adapter's queue behind it, until she can: the phone's servers
	// do not send a message again once this device has it.
	key := info.Chat.ToNonAD().String() + "/" + info.ID
	err := feed.Redeliver(ctx, a.clock, a.lg, key, func() error {
		cm.Attachments, cm.Text = a.download(ctx, channelID, info.ID, msg, text)
		return in.Deliver(ctx, a.name, cm, late)
	})
	if err != nil {
		a.lg.Error("stopping with a message Mother could not store; it is lost", "id", info.ID, "channel", channelID)
	}
}

// markSeen records a message as handled, in memory and in the session
// (across restarts), and reports whether it is new.
func (a *Adapter) markSeen(ctx context.Context, key string) bool {
	if !a.seen.Add(key) {
		return false
	}
	a.mu.Lock()
	s := a.session
	a.mu.Unlock()
	if s == nil {
		return true
	}
	fresh, err := s.MarkSeen(ctx, key, a.clock.Now())
	if err != nil {
		a.lg.Warn("cannot record a handled message id", "err", err)
		return true
	}
	return fresh
}

// isEmptyContent reports a message carrying nothing a person wrote.
func isEmptyContent(m *waE2E.Message) bool {
	t, _ := content(m)
	return t == "" && m.GetImageMessage() == nil && m.GetDocumentMessage() == nil && m.GetVideoMessage() == nil && m.GetAudioMessage() == nil && m.GetStickerMessage() == nil
}

// content is a message's text (or caption) and its context (mentions,
// the message it quotes).
func content(m *waE2E.Message) (string, *waE2E.ContextInfo) {
	switch {
	case m.GetExtendedTextMessage() != nil:
		return m.GetExtendedTextMessage().GetText(), m.GetExtendedTextMessage().GetContextInfo()
	case m.GetImageMessage() != nil:
		return m.GetImageMessage().GetCaption(), m.GetImageMessage().GetContextInfo()
	case m.GetDocumentMessage() != nil:
		return m.GetDocumentMessage().GetCaption(), m.GetDocumentMessage().GetContextInfo()
	case m.GetVideoMessage() != nil:
		return m.GetVideoMessage().GetCaption(), m.GetVideoMessage().GetContextInfo()
	case m.GetAudioMessage() != nil:
		return "", m.GetAudioMessage().GetContextInfo()
	case m.GetStickerMessage() != nil:
		return "", m.GetStickerMessage().GetContextInfo()
	}
	return m.GetConversation(), nil
}

// isSelf reports whether j is the account (its phone number or its LID).
func isSelf(j, self, selfLID types.JID) bool {
	j = j.ToNonAD()
	return (!self.IsEmpty() && j.User == self.User && j.Server == self.Server) ||
		(!selfLID.IsEmpty() && j.User == selfLID.User && j.Server == selfLID.Server)
}

// phoneJID names a user by phone number: j itself when it is one, else
// alt, else what the session's LID map knows; a LID that cannot be mapped
// stays a LID.
func (a *Adapter) phoneJID(ctx context.Context, j, alt types.JID) types.JID {
	j = j.ToNonAD()
	if j.Server != types.HiddenUserServer {
		return j
	}
	if alt.Server == types.DefaultUserServer {
		return alt.ToNonAD()
	}
	a.mu.Lock()
	lids := a.lids
	a.mu.Unlock()
	if lids != nil {
		if pn, err := lids.GetPNForLID(ctx, j); err == nil && !pn.IsEmpty() {
			return pn.ToNonAD()
		}
	}
	return j
}

// replaceMention rewrites "@from" as "@to" where it stands as a mention.
func replaceMention(text, from, to string) string {
	re := regexp.MustCompile(`@` + regexp.QuoteMeta(from) + `\b`)
	return re.ReplaceAllString(text, "@"+to)
}

// learn records the sender and the chat, and returns the sender as Mother
// names them: id the phone-number JID, username the number (what @ takes
// in WhatsApp), display name the sender's push name.
func (a *Adapter) learn(ctx context.Context, sender types.JID, info types.MessageInfo, chatJID types.JID, channelID string) chat.UserInfo {
	u := chat.UserInfo{ID: sender.String(), Username: sender.User, DisplayName: strings.TrimSpace(info.PushName)}
	c := chat.ChannelInfo{ID: channelID, Type: chat.ChannelDM, Name: "dm-" + u.Username}
	if info.IsGroup {
		c = chat.ChannelInfo{ID: channelID, Type: chat.ChannelGroup, Name: a.groupName(ctx, chatJID)}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if old, ok := a.users[u.ID]; ok && u.DisplayName == "" {
		u.DisplayName = old.DisplayName
	}
	a.users[u.ID] = u
	a.chans[channelID] = c
	return u
}

// groupName is a group's subject, asked once (its id when unknown).
func (a *Adapter) groupName(ctx context.Context, jid types.JID) string {
	a.mu.Lock()
	name, ok := a.groups[jid.String()]
	cli := a.client
	a.mu.Unlock()
	if ok {
		return name
	}
	name = jid.User
	if gi, err := cli.GetGroupInfo(ctx, jid); err != nil {
		a.lg.Debug("cannot read a group's name", "group", jid.String(), "err", err)
	} else if gi != nil && gi.Name != "" {
		name = gi.Name
	}
	a.mu.Lock()
	a.groups[jid.String()] = name
	a.mu.Unlock()
	return name
}

// download saves a message's image, document, voice note or audio file
// into the channel's attachments/ (the library downloads and decrypts
// it); other media are
// named in the text so the model knows they were sent.
func (a *Adapter) download(ctx context.Context, channelID, id string, m *waE2E.Message, text string) ([]chat.ChannelAttachment, string) {
	var atts []feed.Attachment
	fetch := func(d whatsmeow.DownloadableMessage) func(context.Context) (io.ReadCloser, string, error) {
		return func(ctx context.Context) (io.ReadCloser, string, error) {
			a.mu.Lock()
			cli := a.client
			a.mu.Unlock()
			data, err := cli.Download(ctx, d)
			if err != nil {
				return nil, "", fmt.Errorf("download: %w", err)
			}
			return io.NopCloser(bytes.NewReader(data)), "", nil
		}
	}
	if img := m.GetImageMessage(); img != nil {
		atts = append(atts, feed.Attachment{Name: "image-" + safeName(id) + extFor(img.GetMimetype(), ".jpg"), Size: int64(img.GetFileLength()), MimeType: img.GetMimetype(), Fetch: fetch(img)})
	}
	if doc := m.GetDocumentMessage(); doc != nil {
		name := doc.GetFileName()
		if name == "" {
			name = "document-" + safeName(id) + extFor(doc.GetMimetype(), "")
		}
		atts = append(atts, feed.Attachment{Name: name, Size: int64(doc.GetFileLength()), MimeType: doc.GetMimetype(), Fetch: fetch(doc)})
	}
	if au := m.GetAudioMessage(); au != nil {
		// A voice note (PTT: OGG/Opus) or an audio file, with its
		// seconds: Mother hears both (the library downloads and
		// decrypts them as it does images).
		kind := "audio-"
		if au.GetPTT() {
			kind = "voice-"
		}
		atts = append(atts, feed.Attachment{Name: kind + safeName(id) + speech.Ext("", au.GetMimetype()), Size: int64(au.GetFileLength()), MimeType: au.GetMimetype(),
			Voice: true, Seconds: float64(au.GetSeconds()), Fetch: fetch(au)})
	}
	switch {
	case m.GetVideoMessage() != nil:
		text = strings.TrimSpace(text + "\n[a video was sent; Mother takes images, documents and voice messages only]")
	case m.GetStickerMessage() != nil:
		text = strings.TrimSpace(text + "\n[a sticker]")
	}
	if len(atts) == 0 {
		return []chat.ChannelAttachment{}, text
	}
	return a.intake.Save(ctx, channelID, safeName(id), atts, text)
}

// extFor is a file extension for a mime type (def when unknown).
func extFor(mimeType, def string) string {
	base, _, _ := strings.Cut(mimeType, ";")
	switch strings.TrimSpace(base) {
	case "image/jpeg":
		return ".jpg"
	case "image/png":
		return ".png"
	case "image/webp":
		return ".webp"
	case "application/pdf":
		return ".pdf"
	}
	if exts, err := mime.ExtensionsByType(base); err == nil && len(exts) > 0 {
		return exts[0]
	}
	return def
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return -1
	}, s)
}
