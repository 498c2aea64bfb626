// Package telegram connects Mother to Telegram through the Bot API: private
// chats, groups, supergroups and forum topics become channels; agent runs
// are rendered as a working message with a Stop button, edited as the run
// goes and replaced by the answer, with tool details as replies to it.
//
// # Library
//
// Outgoing calls (sendMessage, editMessageText, getFile, sendDocument, ...)
// go through github.com/go-telegram/bot. Against gopkg.in/telebot.v4 it
// wins on every point the adapter cares about: it has stable semver
// releases (v1.19.0, February 2026; telebot v4 has only had betas), it
// covers the whole current Bot API with typed parameters and typed 429
// errors (TooManyRequestsError with retry_after), it depends on nothing
// beyond the standard library, and it takes a server URL (WithServerURL)
// and an *http.Client (WithHTTPClient) as plain options, which is all a
// self-hosted Bot API server or a test fake needs. Receiving is the
// adapter's own: the library's polling loop confirms an update before its
// handler has run and drops a whole batch when one update fails to decode,
// while Mother stores the offset only after an update was delivered and
// skips a malformed update on its own.
//
// # Receiving
//
// By default the adapter long-polls getUpdates (it works behind NAT). The
// offset of the last update delivered is written atomically to
// channels/<adapter>/telegram-offset.json beside the adapter's channel
// directories, so a restart neither loses nor repeats an update; updates
// already pending when the adapter (re)connects arrived while it was away
// and are delivered late. With webhookURL set, the adapter registers the
// webhook with setWebhook and serves it on webhookListen, refusing requests
// without the X-Telegram-Bot-Api-Secret-Token header.
//
// # Channels
//
// A chat's id is its channel id ("123456789" for a private chat,
// "-1001234567890" for a supergroup). A forum topic is a channel of its
// own, "<chatId>_<threadId>" ("-1001234567890_45"): "/" cannot be a path
// element in Mother's store, "_" is allowed by chat.ValidID and never
// occurs in a chat id.
package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/mother-chat/mother/pkg/adapters/internal/feed"
	"github.com/mother-chat/mother/pkg/adapters/internal/upload"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
)

// Platform limits.
const (
	// MessageLimit is the longest message text Telegram takes, in
	// characters; answers are cut a little below it (escapes and the
	// title take room).
	MessageLimit = 4096
	splitAt      = 3900
	// DownloadLimit is the largest file a bot may download (getFile).
	DownloadLimit = 20 << 20
	// UploadLimit is the largest file a bot may send.
	UploadLimit = 50 << 20
	// photoLimit is the largest image sent as a photo (larger ones go as
	// documents).
	photoLimit = 10 << 20
	// stopData is the callback data of the Stop button.
	stopData = "mother:stop"
	// offsetFile holds the last delivered update id.
	offsetFile = "telegram-offset.json"
)

// Options tune an adapter beyond config.json (tests shorten the timings).
type Options struct {
	// Client is the HTTP client for the Bot API (default: one with a
	// timeout above the poll timeout).
	Client *http.Client
	// PollTimeout is how long one getUpdates call waits for updates
	// (default 25 s).
	PollTimeout time.Duration
	// BackoffMin and BackoffMax bound the waits after a failed poll
	// (1 s .. 1 min).
	BackoffMin, BackoffMax time.Duration
	// MinEdit is the least time between edits of one message (1 s, about
	// Telegram's limit per chat).
	MinEdit time.Duration
	// Grace is how long a run may take before a working message is shown
	// (default 1.5 s).
	Grace time.Duration
	// TypingEvery is how often the typing action is renewed while a run
	// works (default 4 s; Telegram shows it for 5 s).
	TypingEvery time.Duration
	// MaxAttachment is the largest file downloaded (default and at most
	// DownloadLimit, the Bot API's own limit).
	MaxAttachment int64
	// StateDir is where the update offset is kept (default: the adapter's
	// directory in Mother's store, beside its channel directories).
	StateDir string
	// GroupRate and GroupWindow bound the messages sent to one group:
	// at most GroupRate in any GroupWindow (default 20 a minute, Telegram's
	// limit for groups); more wait for their turn instead of drawing 429s.
	GroupRate   int
	GroupWindow time.Duration
}

func (o *Options) defaults() {
	if o.PollTimeout <= 0 {
		o.PollTimeout = 25 * time.Second
	}
	// getUpdates counts its timeout in whole seconds; 0 would not wait.
	o.PollTimeout = max(o.PollTimeout, time.Second)
	if o.Client == nil {
		o.Client = &http.Client{Timeout: o.PollTimeout + 30*time.Second}
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = time.Second
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = time.Minute
	}
	if o.MinEdit <= 0 {
		o.MinEdit = time.Second
	}
	if o.Grace <= 0 {
		o.Grace = 1500 * time.Millisecond
	}
	if o.TypingEvery <= 0 {
		o.TypingEvery = 4 * time.Second
	}
	if o.GroupRate <= 0 {
		o.GroupRate = 20
	}
	if o.GroupWindow <= 0 {
		o.GroupWindow = time.Minute
	}
	if o.MaxAttachment <= 0 || o.MaxAttachment > DownloadLimit {
		o.MaxAttachment = DownloadLimit
	}
}

// Adapter is one Telegram bot.
type Adapter struct {
	name  string
	cfg   Settings
	env   chat.Env
	clock clock.Clock
	opts  Options
	lg    *slog.Logger
	// uploads bounds the uploads running at once.
	uploads *upload.Slots
	bot     *bot.Bot
	api     string
	admins  map[string]bool

	seen   *feed.Seen
	conn   feed.Conn
	cursor *feed.Cursor
	intake feed.Intake
	off    offsets
	groups *pacer
	// edits paces message edits to one per MinEdit per chat (Telegram's
	// limit is about one a second per chat, whatever the message).
	edits *pacer
	// handleMu keeps webhook deliveries in order.
	handleMu sync.Mutex

	mu     sync.Mutex
	inbox  chat.Inbox
	self   models.User
	users  map[string]chat.UserInfo
	chans  map[string]chat.ChannelInfo
	logged map[string]int64 // newest message id per channel in the log at start
	// stoppers maps a working message ("chat:message") to who may stop
	// its run besides admins; asking maps a channel to whoever triggered
	// the run being rendered there, for a click that comes before
	// sendMessage has answered with the message's id.
	stoppers map[string]string
	asking   map[string]string
	started  bool
	stopping bool
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	srv      *http.Server
}

var (
	_ chat.Adapter         = (*Adapter)(nil)
	_ chat.Uploader        = (*Adapter)(nil)
	_ chat.StatusReporter  = (*Adapter)(nil)
	_ chat.DirectMessenger = (*Adapter)(nil)
)

// New builds a Telegram adapter from its configuration. It does not touch
// the network; Start does.
func New(env chat.Env, opts Options) (*Adapter, error) {
	cfg := settingsOf(env)
	if cfg.BotToken.Value() == "" {
		return nil, errors.New("telegram: botToken is required")
	}
	opts.defaults()
	lg := env.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("component", "telegram", "adapter", env.Name)
	api := strings.TrimSuffix(cfg.APIURL, "/")
	if api == "" {
		api = DefaultAPIURL
	}
	a := &Adapter{
		uploads:  upload.NewSlots(upload.Concurrent),
		name:     env.Name,
		cfg:      cfg,
		env:      env,
		clock:    clock.OrReal(env.Clock),
		opts:     opts,
		lg:       lg,
		api:      api,
		admins:   map[string]bool{},
		seen:     feed.NewSeen(0),
		users:    map[string]chat.UserInfo{},
		chans:    map[string]chat.ChannelInfo{},
		logged:   map[string]int64{},
		stoppers: map[string]string{},
		asking:   map[string]string{},
		intake:   feed.Intake{Files: env.Files, Max: opts.MaxAttachment, Log: lg},
	}
	a.cursor = &feed.Cursor{Files: env.Files, Newer: newer, IsPlatformID: isMessageID, Log: lg}
	a.off = offsets{files: env.Files, dir: opts.StateDir, lg: lg}
	a.groups = &pacer{rate: opts.GroupRate, window: opts.GroupWindow, clock: a.clock, sent: map[int64][]time.Time{}}
	a.edits = &pacer{rate: 1, window: opts.MinEdit, clock: a.clock, private: true, sent: map[int64][]time.Time{}}
	for _, id := range env.Config.Admins {
		a.admins[id] = true
	}
	b, err := bot.New(cfg.BotToken.Value(),
		bot.WithSkipGetMe(),
		bot.WithServerURL(api),
		bot.WithHTTPClient(opts.PollTimeout, opts.Client),
		bot.WithErrorsHandler(func(err error) { lg.Warn("telegram library error", "err", a.redact(err)) }),
		bot.WithDebugHandler(func(string, ...any) {}),
	)
	if err != nil {
		return nil, fmt.Errorf("telegram: %w", err)
	}
	a.bot = b
	return a, nil
}

// redact keeps the token out of anything logged or reported.
func (a *Adapter) redact(err error) string {
	if err == nil {
		return ""
	}
	return strings.ReplaceAll(err.Error(), a.cfg.BotToken.Value(), "***")
}

// Name implements chat.Adapter.
func (a *Adapter) Name() string { return a.name }

// SelfID implements chat.Adapter.
func (a *Adapter) SelfID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.self.ID == 0 {
		return ""
	}
	return strconv.FormatInt(a.self.ID, 10)
}

// Status implements chat.StatusReporter.
func (a *Adapter) Status() chat.AdapterStatus { return a.conn.Status() }

// Start asks Telegram who the bot is, delivers the updates that arrived
// while Mother was away (late), and then receives by long polling or by
// webhook until Stop or ctx ends.
func (a *Adapter) Start(ctx context.Context, in chat.Inbox) error {
	a.mu.Lock()
	if a.started {
		a.mu.Unlock()
		return errors.New("telegram: already started")
	}
	a.started = true
	a.inbox = in
	a.mu.Unlock()

	me, err := a.bot.GetMe(ctx)
	if err != nil {
		a.conn.Down(errors.New(a.redact(err)))
		return fmt.Errorf("telegram: getMe: %s", a.redact(err))
	}
	a.mu.Lock()
	a.self = *me
	a.users[strconv.FormatInt(me.ID, 10)] = chat.UserInfo{ID: strconv.FormatInt(me.ID, 10), Username: me.Username, DisplayName: fullName(me.FirstName, me.LastName)}
	a.mu.Unlock()
	a.off.load()
	a.mu.Lock()
	for ch, id := range a.cursor.Logged() {
		if n, err := strconv.ParseInt(id, 10, 64); err == nil {
			a.logged[ch] = n
		}
	}
	a.mu.Unlock()

	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.mu.Lock()
	a.cancel = cancel
	a.mu.Unlock()
	if a.cfg.WebhookURL != "" {
		if err := a.startWebhook(rctx); err != nil {
			cancel()
			a.conn.Down(err)
			return err
		}
	} else {
		// A webhook left over from another setup would make getUpdates fail.
		if _, err := a.bot.DeleteWebhook(ctx, &bot.DeleteWebhookParams{}); err != nil {
			a.lg.Warn("cannot delete a webhook before polling", "err", a.redact(err))
		}
		ups, err := a.getUpdates(ctx, 0)
		if err != nil {
			cancel()
			a.conn.Down(errors.New(a.redact(err)))
			return fmt.Errorf("telegram: getUpdates: %s", a.redact(err))
		}
		a.conn.Connected()
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.poll(rctx, a.process(rctx, ups, true))
		}()
	}
	a.lg.Info("connected to Telegram", "bot", me.Username, "webhook", a.cfg.WebhookURL != "")
	go func() {
		select {
		case <-ctx.Done():
			a.Stop(context.Background())
		case <-rctx.Done():
		}
	}()
	return nil
}

// Stop disconnects; it is safe to call more than once.
func (a *Adapter) Stop(ctx context.Context) error {
	a.mu.Lock()
	if a.stopping || !a.started {
		a.mu.Unlock()
		return nil
	}
	a.stopping = true
	cancel, srv := a.cancel, a.srv
	a.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	var err error
	if srv != nil {
		err = srv.Shutdown(ctx)
	}
	a.conn.Down(nil)
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("telegram: stop webhook listener: %w", err)
	}
	return nil
}

// ---- what the adapter knows ----

// Users implements chat.Adapter: everyone seen talking.
func (a *Adapter) Users() []chat.UserInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]chat.UserInfo, 0, len(a.users))
	for _, u := range a.users {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return strings.ToLower(out[i].Username) < strings.ToLower(out[j].Username) })
	return out
}

// Channels implements chat.Adapter: the chats and topics seen.
func (a *Adapter) Channels() []chat.ChannelInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	return chat.SortedChannels(a.chans)
}

// ChannelID is the channel id of a chat, or of a forum topic in it.
func ChannelID(chatID int64, topic int) string {
	if topic != 0 {
		return strconv.FormatInt(chatID, 10) + "_" + strconv.Itoa(topic)
	}
	return strconv.FormatInt(chatID, 10)
}

// parseChannel splits a channel id into the chat and the forum topic.
func parseChannel(channelID string) (chatID int64, topic int, err error) {
	c, t, hasTopic := strings.Cut(channelID, "_")
	chatID, err = strconv.ParseInt(c, 10, 64)
	if err != nil || chatID == 0 {
		return 0, 0, fmt.Errorf("%q is not a Telegram chat id", channelID)
	}
	if hasTopic {
		topic, err = strconv.Atoi(t)
		if err != nil || topic <= 0 {
			return 0, 0, fmt.Errorf("%q: bad topic id", channelID)
		}
	}
	return chatID, topic, nil
}

// newer compares message ids (per chat, increasing).
func newer(a, b string) bool {
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	if err2 != nil {
		return err1 == nil
	}
	return err1 == nil && x > y
}

// isMessageID tells a Telegram message id from one Mother made up.
func isMessageID(id string) bool {
	n, err := strconv.ParseInt(id, 10, 64)
	return err == nil && n > 0
}

func fullName(first, last string) string {
	return strings.TrimSpace(first + " " + last)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// pacer keeps the messages sent to each group within rate per window.
type pacer struct {
	rate   int
	window time.Duration
	clock  clock.Clock
	// private paces private chats too (edits); otherwise only groups.
	private bool

	mu   sync.Mutex
	sent map[int64][]time.Time
}

// wait blocks until one more message may go to chat, and counts it.
// Private chats (positive ids) are paced only when p.private is set.
func (p *pacer) wait(ctx context.Context, chat int64) error {
	if chat > 0 && !p.private {
		return nil
	}
	for {
		p.mu.Lock()
		now := p.clock.Now()
		times := p.sent[chat]
		for len(times) > 0 && now.Sub(times[0]) >= p.window {
			times = times[1:]
		}
		if len(times) < p.rate {
			p.sent[chat] = append(times, now)
			p.mu.Unlock()
			return nil
		}
		p.sent[chat] = times
		wait := p.window - now.Sub(times[0])
		p.mu.Unlock()
		if clock.Sleep(ctx, p.clock, wait) != nil {
			return ctx.Err()
		}
	}
}
