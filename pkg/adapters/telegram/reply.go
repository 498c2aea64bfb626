package telegram

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/mother-chat/mother/pkg/adapters/internal/feed"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/render"
	"github.com/mother-chat/mother/pkg/render/runview"
)

func stopKeyboard() *models.InlineKeyboardMarkup {
	return &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{{{Text: "Stop", CallbackData: stopData}}}}
}

var noPreview = &models.LinkPreviewOptions{IsDisabled: bot.True()}

// rateLimited maps the library's 429 error to runview's, so the run view
// (and the adapter's own retries) wait Telegram's retry_after.
func rateLimited(err error) error {
	var tm *bot.TooManyRequestsError
	if errors.As(err, &tm) {
		return &runview.RateLimitError{After: max(time.Duration(tm.RetryAfter)*time.Second, time.Second), Err: err}
	}
	return err
}

// unparsable reports Telegram's refusal of MarkdownV2 it cannot parse.
func unparsable(err error) bool {
	return err != nil && errors.Is(err, bot.ErrorBadRequest) && strings.Contains(err.Error(), "can't parse entities")
}

// send posts MarkdownV2 text to a channel; if Telegram cannot parse it,
// the text goes again as plain text, so the user gets it anyway.
func (a *Adapter) send(ctx context.Context, channelID, text string, replyTo int, markup models.ReplyMarkup) (int, error) {
	chatID, topic, err := parseChannel(channelID)
	if err != nil {
		return 0, err
	}
	p := &bot.SendMessageParams{ChatID: chatID, MessageThreadID: topic, Text: text, ParseMode: models.ParseModeMarkdown, LinkPreviewOptions: noPreview, ReplyMarkup: markup}
	if replyTo > 0 {
		p.ReplyParameters = &models.ReplyParameters{MessageID: replyTo, AllowSendingWithoutReply: true}
	}
	if err := a.groups.wait(ctx, chatID); err != nil {
		return 0, err
	}
	m, err := a.bot.SendMessage(ctx, p)
	if unparsable(err) {
		a.lg.Warn("Telegram could not parse a message; sending it as plain text", "channel", channelID, "err", a.redact(err))
		p.Text, p.ParseMode = plainFallback(text), ""
		m, err = a.bot.SendMessage(ctx, p)
	}
	if err != nil {
		return 0, rateLimited(fmt.Errorf("sendMessage: %w", err))
	}
	return m.ID, nil
}

// plainFallback is MarkdownV2 text as plain text: escapes undone, and
// every @username broken, those that were inside code too (plain text has
// no code where Telegram would leave them alone).
func plainFallback(text string) string {
	return render.BreakMentions(render.TelegramUnescape(text))
}

// edit replaces a message's text (and its Stop button), falling back to
// plain text like send.
func (a *Adapter) edit(ctx context.Context, channelID string, id int, text string, working bool) error {
	chatID, _, err := parseChannel(channelID)
	if err != nil {
		return err
	}
	p := &bot.EditMessageTextParams{ChatID: chatID, MessageID: id, Text: text, ParseMode: models.ParseModeMarkdown, LinkPreviewOptions: noPreview}
	if working {
		p.ReplyMarkup = stopKeyboard()
	}
	if err := a.edits.wait(ctx, chatID); err != nil {
		return err
	}
	_, err = a.bot.EditMessageText(ctx, p)
	if unparsable(err) {
		a.lg.Warn("Telegram could not parse an edit; sending it as plain text", "channel", channelID, "err", a.redact(err))
		p.Text, p.ParseMode = plainFallback(text), ""
		_, err = a.bot.EditMessageText(ctx, p)
	}
	if err != nil && strings.Contains(err.Error(), "message is not modified") {
		return nil
	}
	if err != nil {
		return rateLimited(fmt.Errorf("editMessageText: %w", err))
	}
	return nil
}

// retry runs f, waiting out up to three rate-limit answers.
func (a *Adapter) retry(ctx context.Context, f func() error) error {
	return runview.Retry(ctx, a.clock, a.lg, "Telegram", "retry_after", 0, f)
}

// NewReply implements chat.Adapter. The working message answers the
// trigger (in its topic), carries the Stop button and is edited as the run
// goes; tool details and usage follow as replies to it (hidden when
// quiet); the typing action shows while the run works.
func (a *Adapter) NewReply(ctx context.Context, channelID string, trigger *chat.ChannelMessage, opts chat.ReplyOptions) chat.Reply {
	s := &surface{a: a, channel: channelID}
	if trigger != nil {
		if id, err := strconv.Atoi(trigger.ID); err == nil && id > 0 {
			s.replyTo = id
		}
		s.requester = trigger.Sender.ID
		a.mu.Lock()
		a.asking[channelID] = s.requester
		a.mu.Unlock()
	}
	v := runview.New(ctx, s, runview.Options{
		Dialect: render.Telegram,
		Title:   opts.Title,
		Limit:   splitAt,
		Details: !opts.Quiet,
		MinEdit: a.opts.MinEdit,
		Grace:   a.opts.Grace,
		Logger:  a.lg.With("channel", channelID),
	})
	tctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r := &reply{Reply: v, stopTyping: stop, done: func() {
		if s.requester == "" {
			return
		}
		a.mu.Lock()
		if a.asking[channelID] == s.requester {
			delete(a.asking, channelID)
		}
		a.mu.Unlock()
	}}
	go a.typing(tctx, channelID)
	return r
}

// reply stops the typing action once the answer is in.
type reply struct {
	chat.Reply
	stopTyping context.CancelFunc
	done       func()
}

func (r *reply) Finish(ctx context.Context, markdown string) (string, error) {
	r.stopTyping()
	defer r.done()
	return r.Reply.Finish(ctx, markdown)
}

// typing shows "typing…" in the chat until ctx ends.
func (a *Adapter) typing(ctx context.Context, channelID string) {
	chatID, topic, err := parseChannel(channelID)
	if err != nil {
		return
	}
	for {
		_, err := a.bot.SendChatAction(ctx, &bot.SendChatActionParams{ChatID: chatID, MessageThreadID: topic, Action: models.ChatActionTyping})
		if err != nil && ctx.Err() == nil {
			a.lg.Debug("cannot send the typing action", "channel", channelID, "err", a.redact(err))
		}
		if clock.Sleep(ctx, a.clock, a.opts.TypingEvery) != nil {
			return
		}
	}
}

// surface is runview's Telegram side for one run.
type surface struct {
	a         *Adapter
	channel   string
	replyTo   int
	requester string

	mu     sync.Mutex
	mainID int
}

var _ runview.Surface = (*surface)(nil)

func (s *surface) PostMain(ctx context.Context, text string, working bool) (string, error) {
	var markup models.ReplyMarkup
	if working {
		markup = stopKeyboard()
	}
	id, err := s.a.send(ctx, s.channel, text, s.replyTo, markup)
	if err != nil {
		return "", err
	}
	if working {
		s.remember(id)
	}
	return strconv.Itoa(id), nil
}

// remember notes who may press the Stop button of message id.
func (s *surface) remember(id int) {
	chatID, _, err := parseChannel(s.channel)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.mainID = id
	s.mu.Unlock()
	s.a.mu.Lock()
	s.a.stoppers[stopKey(chatID, id)] = s.requester
	s.a.mu.Unlock()
}

func (s *surface) forget(id int) {
	if chatID, _, err := parseChannel(s.channel); err == nil {
		s.a.mu.Lock()
		delete(s.a.stoppers, stopKey(chatID, id))
		s.a.mu.Unlock()
	}
}

func (s *surface) EditMain(ctx context.Context, id, text string, working bool) error {
	n, err := strconv.Atoi(id)
	if err != nil {
		return fmt.Errorf("edit message: bad id %q", id)
	}
	if working {
		s.remember(n)
	} else {
		s.forget(n)
	}
	return s.a.edit(ctx, s.channel, n, text, working)
}

func (s *surface) DeleteMain(ctx context.Context, id string) error {
	n, err := strconv.Atoi(id)
	if err != nil {
		return fmt.Errorf("delete message: bad id %q", id)
	}
	s.forget(n)
	chatID, _, err := parseChannel(s.channel)
	if err != nil {
		return err
	}
	if _, err := s.a.bot.DeleteMessage(ctx, &bot.DeleteMessageParams{ChatID: chatID, MessageID: n}); err != nil {
		return rateLimited(fmt.Errorf("deleteMessage: %w", err))
	}
	return nil
}

// PostDetail posts a tool detail as a reply to the working message,
// waiting out rate limits so no detail is lost.
func (s *surface) PostDetail(ctx context.Context, mainID, text string) error {
	n, _ := strconv.Atoi(mainID)
	return s.a.retry(ctx, func() error {
		_, err := s.a.send(ctx, s.channel, text, n, nil)
		return err
	})
}

func (s *surface) PostMore(ctx context.Context, text string) (string, error) {
	id, err := s.a.send(ctx, s.channel, text, 0, nil)
	if err != nil {
		return "", err
	}
	return strconv.Itoa(id), nil
}

// Post implements chat.Adapter: a notice (markdown), split if long. It
// notifies nobody.
func (a *Adapter) Post(ctx context.Context, channelID, markdown string) (string, error) {
	return a.PostMentioning(ctx, channelID, markdown, nil)
}

var _ chat.Mentioner = (*Adapter)(nil)

// PostMentioning implements chat.Mentioner: Post, with the Text of each of
// Mother's mentions made a mention by id ([@name](tg://user?id=ID)).
func (a *Adapter) PostMentioning(ctx context.Context, channelID, markdown string, mentions []chat.Mention) (string, error) {
	first := ""
	for _, p := range render.Split(render.ToTelegram(markdown, mentions), splitAt) {
		var id int
		err := a.retry(ctx, func() error {
			var perr error
			id, perr = a.send(ctx, channelID, p, 0, nil)
			return perr
		})
		if err != nil {
			return first, fmt.Errorf("telegram: post to %s: %w", channelID, err)
		}
		if first == "" {
			first = strconv.Itoa(id)
		}
	}
	return first, nil
}

// Upload implements chat.Uploader: images up to 10 MB as photos, anything
// else as documents (up to Telegram's 50 MB). The library streams the
// file from disk (a multipart body through a pipe); at most
// upload.Concurrent uploads run at once.
func (a *Adapter) Upload(ctx context.Context, channelID, path, title string) error {
	chatID, topic, err := parseChannel(channelID)
	if err != nil {
		return fmt.Errorf("telegram: upload: %w", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("telegram: upload: %w", err)
	}
	name := filepath.Base(path)
	if !st.Mode().IsRegular() {
		return fmt.Errorf("telegram: upload %s: not a regular file", name)
	}
	if st.Size() > UploadLimit {
		return fmt.Errorf("telegram: upload %s: %s is over Telegram's %s limit", name, feed.FormatSize(st.Size()), feed.FormatSize(UploadLimit))
	}
	caption := ""
	if title != "" && title != name {
		// Sent as plain text, where Telegram still finds @username.
		caption = render.BreakMentions(render.Truncate(title, 1000))
	}
	photo := st.Size() <= photoLimit && isImage(name)
	release, err := a.uploads.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("telegram: upload %s: %w", name, err)
	}
	defer release()
	return a.retry(ctx, func() error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		in := &models.InputFileUpload{Filename: name, Data: f}
		if err := a.groups.wait(ctx, chatID); err != nil {
			return err
		}
		if photo {
			_, err = a.bot.SendPhoto(ctx, &bot.SendPhotoParams{ChatID: chatID, MessageThreadID: topic, Photo: in, Caption: caption})
		} else {
			_, err = a.bot.SendDocument(ctx, &bot.SendDocumentParams{ChatID: chatID, MessageThreadID: topic, Document: in, Caption: caption})
		}
		if err != nil {
			return rateLimited(fmt.Errorf("telegram: upload %s to %s: %w", name, channelID, err))
		}
		return nil
	})
}

func isImage(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".jpg", ".jpeg", ".png", ".webp":
		return true
	}
	return false
}

// DirectMessage implements chat.DirectMessenger: a post in the private
// chat with userID (a private chat's id is its user's id). Telegram lets a
// bot write only to a user who has started a chat with it.
func (a *Adapter) DirectMessage(ctx context.Context, userID, markdown string) error {
	if _, err := strconv.ParseInt(userID, 10, 64); err != nil {
		return fmt.Errorf("telegram: %q is not a user id", userID)
	}
	_, err := a.Post(ctx, userID, markdown)
	return err
}
