package telegram

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/mother-chat/mother/pkg/adapters/internal/feed"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/speech"
)

// handleUpdate handles one update and returns the channel it concerned
// ("" if none). Malformed updates are logged and skipped; nothing here may
// panic the daemon. An error (Mother could not store the message, see
// chat.Inbox) means the update is not handled: its offset must not be
// confirmed.
func (a *Adapter) handleUpdate(ctx context.Context, raw json.RawMessage, late bool) (channelID string, err error) {
	defer func() {
		if r := recover(); r != nil {
			a.lg.Error("skipping an update that broke the adapter", "panic", fmt.Sprint(r))
			channelID, err = "", nil
		}
	}()
	var u models.Update
	if err := json.Unmarshal(raw, &u); err != nil {
		a.lg.Warn("skipping a malformed update", "err", err, "update", truncate(string(raw), 200))
		return "", nil
	}
	switch {
	case u.Message != nil:
		return a.handleMessage(ctx, u.Message, late)
	case u.CallbackQuery != nil:
		return a.handleCallback(ctx, u.CallbackQuery, late), nil
	}
	return "", nil
}

// topicOf is the forum topic a message belongs to (0: none).
func topicOf(m *models.Message) int {
	if m.IsTopicMessage && m.MessageThreadID > 0 {
		return m.MessageThreadID
	}
	return 0
}

func (a *Adapter) handleMessage(ctx context.Context, m *models.Message, late bool) (string, error) {
	if m.ID <= 0 || m.Chat.ID == 0 {
		a.lg.Warn("skipping a malformed message", "id", m.ID, "chat", m.Chat.ID)
		return "", nil
	}
	channelID := ChannelID(m.Chat.ID, topicOf(m))
	if err := chat.ValidID(channelID); err != nil {
		a.lg.Warn("skipping a message with an unusable chat id", "err", err)
		return "", nil
	}
	from := m.From
	if from == nil && m.SenderChat != nil {
		// An anonymous group admin or a linked channel speaks as the chat.
		from = &models.User{ID: m.SenderChat.ID, Username: m.SenderChat.Username, FirstName: m.SenderChat.Title}
	}
	if from == nil || from.ID == 0 {
		a.lg.Warn("skipping a message without a sender", "chat", m.Chat.ID, "id", m.ID)
		return "", nil
	}
	seenKey := strconv.FormatInt(m.Chat.ID, 10) + ":" + strconv.Itoa(m.ID)
	if !a.seen.Add(seenKey) {
		return channelID, nil
	}
	a.mu.Lock()
	self := a.self
	loggedUpTo := a.logged[channelID]
	a.mu.Unlock()
	if int64(m.ID) <= loggedUpTo {
		return channelID, nil // already in the channel's log: delivered before a restart
	}
	if from.ID == self.ID {
		a.cursor.Note(channelID, strconv.Itoa(m.ID))
		return channelID, nil // Mother logs her own answers herself
	}
	text, entities := m.Text, m.Entities
	if text == "" {
		text, entities = m.Caption, m.CaptionEntities
	}
	raw := text
	isDM := m.Chat.Type == models.ChatTypePrivate
	mention := isDM
	if cmd, rest, ok := command(text, self.Username); ok {
		switch cmd {
		case "ask":
			text, mention = rest, true
		case "stop":
			text, mention = strings.TrimSpace("stop "+rest), true
		case "start", "help":
			if isDM && rest == "" {
				text = "hello"
			}
		}
	}
	if mentionsSelf(raw, entities, self) {
		mention = true
	}
	if r := m.ReplyToMessage; r != nil && r.From != nil && r.From.ID == self.ID && self.ID != 0 {
		mention = true
	}
	sender := a.learn(m, from, channelID)
	msg := chat.ChannelMessage{
		ID:          strconv.Itoa(m.ID),
		ChannelID:   channelID,
		Timestamp:   time.Unix(int64(m.Date), 0).UTC(),
		Sender:      chat.Sender{ID: strconv.FormatInt(from.ID, 10), Username: sender.Username, DisplayName: sender.DisplayName, IsBot: from.IsBot},
		Text:        text,
		Attachments: []chat.ChannelAttachment{},
		IsDM:        isDM,
		IsMention:   mention,
	}
	if raw != text {
		msg.RawText = raw
	}
	if r := m.ReplyToMessage; r != nil && r.ID > 0 && !(r.ForumTopicCreated != nil) {
		msg.ReplyTo = strconv.Itoa(r.ID)
	}
	meta := map[string]any{"chatId": strconv.FormatInt(m.Chat.ID, 10)}
	if t := topicOf(m); t != 0 {
		meta["topicId"] = strconv.Itoa(t)
	}
	msg.Metadata = meta
	msg.Attachments, msg.Text = a.download(ctx, channelID, m, msg.Text)
	a.mu.Lock()
	in := a.inbox
	a.mu.Unlock()
	if ctx.Err() != nil {
		return channelID, nil
	}
	if err := in.Deliver(ctx, a.name, msg, late); err != nil {
		// Not stored: Telegram offers the update again (its offset is
		// not confirmed), and then it must count as new.
		a.seen.Forget(seenKey)
		return channelID, err
	}
	a.cursor.Note(channelID, strconv.Itoa(m.ID))
	return channelID, nil
}

// learn records the sender and the chat, and returns the sender as Mother
// names them.
func (a *Adapter) learn(m *models.Message, from *models.User, channelID string) chat.UserInfo {
	id := strconv.FormatInt(from.ID, 10)
	u := chat.UserInfo{ID: id, Username: from.Username, DisplayName: fullName(from.FirstName, from.LastName)}
	if u.Username == "" {
		// Users without a username are named by id, which stays unique.
		u.Username = "user" + id
	}
	c := chat.ChannelInfo{ID: channelID}
	switch m.Chat.Type {
	case models.ChatTypePrivate:
		c.Type, c.Name = chat.ChannelDM, "dm-"+u.Username
	default:
		c.Type, c.Name = chat.ChannelGroup, m.Chat.Title
		if m.Chat.Type == models.ChatTypeChannel || m.Chat.Type == models.ChatTypeSupergroup {
			c.Type = chat.ChannelPublic
		}
		if t := topicOf(m); t != 0 {
			c.Name = m.Chat.Title + " / topic " + strconv.Itoa(t)
			if r := m.ReplyToMessage; r != nil && r.ForumTopicCreated != nil && r.ForumTopicCreated.Name != "" {
				c.Name = m.Chat.Title + " / " + r.ForumTopicCreated.Name
			}
		}
	}
	if c.Name == "" {
		c.Name = channelID
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.users[id] = u
	if old, ok := a.chans[channelID]; !ok || old.Name != c.Name {
		a.chans[channelID] = c
	}
	return u
}

// command splits "/ask@mother_bot rest" into "ask" and "rest"; ok is
// false for text that is no command, or a command to another bot.
func command(text, self string) (cmd, rest string, ok bool) {
	if !strings.HasPrefix(text, "/") {
		return "", "", false
	}
	head, rest, _ := strings.Cut(text, " ")
	if i := strings.IndexAny(head, "\n"); i >= 0 {
		head, rest = head[:i], strings.TrimSpace(head[i+1:]+" "+rest)
	}
	name, to, addressed := strings.Cut(head[1:], "@")
	if addressed && !strings.EqualFold(to, self) {
		return "", "", false
	}
	return strings.ToLower(name), strings.TrimSpace(rest), name != ""
}

// mentionsSelf reports whether the text mentions the bot: a mention
// entity naming it, a text mention of its id, or "@username" in the text.
func mentionsSelf(text string, entities []models.MessageEntity, self models.User) bool {
	if self.Username == "" {
		return false
	}
	want := "@" + strings.ToLower(self.Username)
	u16 := utf16.Encode([]rune(text))
	for _, e := range entities {
		switch e.Type {
		case models.MessageEntityTypeTextMention:
			if e.User != nil && e.User.ID == self.ID {
				return true
			}
		case models.MessageEntityTypeMention:
			if e.Offset >= 0 && e.Length > 0 && e.Offset+e.Length <= len(u16) {
				if strings.ToLower(string(utf16.Decode(u16[e.Offset:e.Offset+e.Length]))) == want {
					return true
				}
			}
		}
	}
	lower := strings.ToLower(text)
	for i := 0; ; {
		j := strings.Index(lower[i:], want)
		if j < 0 {
			return false
		}
		end := i + j + len(want)
		if (i+j == 0 || !isNameByte(lower[i+j-1])) && (end == len(lower) || !isNameByte(lower[end])) {
			return true
		}
		i = end
	}
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
}

// download fetches a message's photo, document, voice message or audio
// file (Mother hears the last two, see chat.ChannelAttachment.Voice) into the channel's
// attachments/ directory; see feed.Intake for the notes left in the text.
func (a *Adapter) download(ctx context.Context, channelID string, m *models.Message, text string) ([]chat.ChannelAttachment, string) {
	var atts []feed.Attachment
	if n := len(m.Photo); n > 0 {
		p := m.Photo[0]
		for _, s := range m.Photo[1:] {
			if s.Width*s.Height > p.Width*p.Height {
				p = s
			}
		}
		name := "photo-" + safeName(p.FileUniqueID) + ".jpg"
		atts = append(atts, feed.Attachment{Name: name, Size: int64(p.FileSize), MimeType: "image/jpeg", Fetch: a.fetcher(p.FileID)})
	}
	if d := m.Document; d != nil {
		name := d.FileName
		if name == "" {
			name = "file-" + safeName(d.FileUniqueID)
		}
		atts = append(atts, feed.Attachment{Name: name, Size: d.FileSize, MimeType: d.MimeType, Fetch: a.fetcher(d.FileID)})
	}
	if v := m.Voice; v != nil {
		mime := v.MimeType
		if mime == "" {
			mime = "audio/ogg"
		}
		atts = append(atts, feed.Attachment{Name: "voice-" + safeName(v.FileUniqueID) + ".ogg", Size: v.FileSize, MimeType: mime,
			Voice: true, Seconds: float64(v.Duration), Fetch: a.fetcher(v.FileID)})
	}
	if au := m.Audio; au != nil {
		name := au.FileName
		if name == "" {
			name = "audio-" + safeName(au.FileUniqueID) + speech.Ext("", au.MimeType)
		}
		atts = append(atts, feed.Attachment{Name: name, Size: au.FileSize, MimeType: au.MimeType,
			Voice: true, Seconds: float64(au.Duration), Fetch: a.fetcher(au.FileID)})
	}
	if len(atts) == 0 {
		return []chat.ChannelAttachment{}, text
	}
	return a.intake.Save(ctx, channelID, strconv.Itoa(m.ID), atts, text)
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return -1
	}, s)
}

// fetcher downloads a file: getFile for its path, then the file itself.
func (a *Adapter) fetcher(fileID string) func(ctx context.Context) (io.ReadCloser, string, error) {
	return func(ctx context.Context) (io.ReadCloser, string, error) {
		f, err := a.bot.GetFile(ctx, &bot.GetFileParams{FileID: fileID})
		if err != nil {
			return nil, "", fmt.Errorf("getFile: %s", a.redact(err))
		}
		if f.FileSize > a.opts.MaxAttachment {
			return nil, "", fmt.Errorf("%s is over the %s limit", feed.FormatSize(f.FileSize), feed.FormatSize(a.opts.MaxAttachment))
		}
		if f.FilePath == "" {
			return nil, "", fmt.Errorf("getFile gave no path (files over %s cannot be downloaded by bots)", feed.FormatSize(DownloadLimit))
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.bot.FileDownloadLink(f), nil)
		if err != nil {
			return nil, "", fmt.Errorf("download: %s", a.redact(err))
		}
		resp, err := a.opts.Client.Do(req)
		if err != nil {
			return nil, "", fmt.Errorf("download: %s", a.redact(err))
		}
		if resp.StatusCode != http.StatusOK {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			return nil, "", fmt.Errorf("download: HTTP %d", resp.StatusCode)
		}
		return resp.Body, resp.Header.Get("Content-Type"), nil
	}
}

// handleCallback handles the Stop button: only whoever asked, or an admin,
// may stop the run.
func (a *Adapter) handleCallback(ctx context.Context, q *models.CallbackQuery, late bool) string {
	m := q.Message.Message
	if q.ID == "" || q.From.ID == 0 || m == nil || m.Chat.ID == 0 {
		a.lg.Warn("skipping a malformed callback query", "id", q.ID)
		return ""
	}
	channelID := ChannelID(m.Chat.ID, topicOf(m))
	if q.Data != stopData {
		a.answer(ctx, q.ID, "")
		return channelID
	}
	if late {
		a.answer(ctx, q.ID, "That run is over.")
		return channelID
	}
	user := strconv.FormatInt(q.From.ID, 10)
	a.mu.Lock()
	requester := a.stoppers[stopKey(m.Chat.ID, m.ID)]
	if requester == "" {
		requester = a.asking[channelID]
	}
	in := a.inbox
	a.mu.Unlock()
	if requester != "" && requester != user && !a.admins[user] {
		a.lg.Info("stop button refused: not the requester or an admin", "channel", channelID, "user", user)
		a.answer(ctx, q.ID, "Only whoever asked, or an admin, can stop this.")
		return channelID
	}
	a.answer(ctx, q.ID, "Stopping…")
	a.lg.Info("stop button clicked", "channel", channelID, "user", user)
	go in.Stop(context.WithoutCancel(ctx), a.name, channelID, user)
	return channelID
}

func (a *Adapter) answer(ctx context.Context, id, text string) {
	if _, err := a.bot.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: id, Text: text}); err != nil {
		a.lg.Warn("cannot answer a button press", "err", a.redact(err))
	}
}

func stopKey(chatID int64, msgID int) string {
	return strconv.FormatInt(chatID, 10) + ":" + strconv.Itoa(msgID)
}
