// Package slack connects Mother to Slack with github.com/slack-go/slack in
// Socket Mode (an app-level xapp- token opens the socket, the bot's xoxb-
// token calls the Web API): app_mention and message events (channels, DMs,
// thread replies) become chat.ChannelMessages; agent runs are rendered as
// a working message with a stop button, replaced by the answer, with tool
// details and usage in the message's thread; files go up with
// files.uploadV2. Questions such as a chick's access request carry Block
// Kit buttons (chat.Chooser); clicks arrive as block_actions and are
// delivered as choices.
//
// slack-go keeps the socket alive (it expects Slack's PINGs and reconnects
// with backoff when they stop); the adapter logs each reconnect, restarts
// the client if it gives up, and backfills what was missed.
package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/mother-chat/mother/pkg/adapters/internal/feed"
	"github.com/mother-chat/mother/pkg/adapters/internal/upload"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
)

// Limits and identifiers.
const (
	// messageLimit keeps each message well under Slack's 40,000 (Slack
	// recommends at most 4,000 characters for readability).
	messageLimit = 3900
	// stopActionID is the action_id of the stop button.
	stopActionID = "mother_stop"
	// DefaultAPIURL is Slack's Web API.
	DefaultAPIURL = "https://slack.com/api/"
)

// Options tune an adapter beyond config.json (tests shorten the timings).
type Options struct {
	HTTPClient *http.Client
	// PingTimeout: a socket that has not received Slack's PING for this
	// long is dead and reopened (default 30 s).
	PingTimeout time.Duration
	// BackoffMin and BackoffMax bound restarts of the socket client.
	BackoffMin, BackoffMax time.Duration
	MinEdit, Grace         time.Duration
	MaxAttachment          int64
	BackfillLimit          int
	// ConnectTimeout bounds Start's wait for the first connection.
	ConnectTimeout time.Duration
}

func (o *Options) defaults() {
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 60 * time.Second}
	}
	if o.PingTimeout <= 0 {
		o.PingTimeout = 30 * time.Second
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = time.Second
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 2 * time.Minute
	}
	if o.MinEdit <= 0 {
		o.MinEdit = time.Second
	}
	if o.Grace <= 0 {
		o.Grace = 1500 * time.Millisecond
	}
	if o.MaxAttachment <= 0 {
		o.MaxAttachment = chat.DefaultMaxAttachment
	}
	if o.BackfillLimit <= 0 {
		o.BackfillLimit = 500
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 30 * time.Second
	}
}

// Adapter is one Slack app installation.
type Adapter struct {
	name  string
	env   chat.Env
	clock clock.Clock
	opts  Options
	lg    *slog.Logger
	api   *slack.Client
	// uploads bounds the uploads running at once.
	uploads *upload.Slots

	queue  *feed.Queue
	seen   *feed.Seen
	conn   feed.Conn
	cursor *feed.Cursor
	intake feed.Intake

	mu       sync.Mutex
	inbox    chat.Inbox
	selfID   string
	botID    string
	users    map[string]chat.UserInfo
	chans    map[string]chat.ChannelInfo
	started  bool
	stopping bool
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

var (
	_ chat.Adapter         = (*Adapter)(nil)
	_ chat.Uploader        = (*Adapter)(nil)
	_ chat.StatusReporter  = (*Adapter)(nil)
	_ chat.DirectMessenger = (*Adapter)(nil)
)

// New builds a Slack adapter.
func New(env chat.Env, opts Options) (*Adapter, error) {
	cfg := settingsOf(env)
	bot, app := cfg.BotToken.Value(), cfg.AppToken.Value()
	if bot == "" || app == "" {
		return nil, errors.New("slack: botToken (xoxb-) and appToken (xapp-) are required")
	}
	if !strings.HasPrefix(app, "xapp-") {
		return nil, errors.New("slack: appToken must be an app-level token (xapp-...) with connections:write")
	}
	opts.defaults()
	lg := env.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	apiURL := cfg.APIURL
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	if !strings.HasSuffix(apiURL, "/") {
		apiURL += "/"
	}
	a := &Adapter{
		uploads: upload.NewSlots(upload.Concurrent),
		name:    env.Name,
		env:     env,
		clock:   clock.OrReal(env.Clock),
		opts:    opts,
		lg:      lg.With("component", "slack", "adapter", env.Name),
		api:     slack.New(bot, slack.OptionAPIURL(apiURL), slack.OptionAppLevelToken(app), slack.OptionHTTPClient(opts.HTTPClient)),
		queue:   feed.NewQueue(),
		seen:    feed.NewSeen(0),
		users:   map[string]chat.UserInfo{},
		chans:   map[string]chat.ChannelInfo{},
	}
	a.cursor = &feed.Cursor{Files: env.Files, Newer: tsAfter, IsPlatformID: isTS, Log: a.lg}
	a.intake = feed.Intake{Files: env.Files, Max: opts.MaxAttachment, Log: a.lg}
	return a, nil
}

// Name implements chat.Adapter.
func (a *Adapter) Name() string { return a.name }

// SelfID implements chat.Adapter: the bot's user id.
func (a *Adapter) SelfID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.selfID
}

// Start checks the bot token, learns users and channels, opens the socket
// and returns once it is connected.
func (a *Adapter) Start(ctx context.Context, in chat.Inbox) error {
	a.mu.Lock()
	if a.started {
		a.mu.Unlock()
		return errors.New("slack: already started")
	}
	a.started = true
	a.inbox = in
	a.mu.Unlock()

	auth, err := a.api.AuthTestContext(ctx)
	if err != nil {
		a.conn.Down(err)
		return fmt.Errorf("slack: auth.test with the bot token: %w", err)
	}
	a.mu.Lock()
	a.selfID, a.botID = auth.UserID, auth.BotID
	a.users[auth.UserID] = chat.UserInfo{ID: auth.UserID, Username: auth.User}
	a.mu.Unlock()
	a.refreshDirectory(ctx)

	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.mu.Lock()
	a.cancel = cancel
	a.mu.Unlock()
	connected := make(chan error, 1)
	a.wg.Add(2)
	go func() {
		defer a.wg.Done()
		a.runSocket(rctx, connected)
	}()
	select {
	case err := <-connected:
		if err != nil {
			cancel()
			a.wg.Done()
			a.wg.Wait()
			a.conn.Down(err)
			return fmt.Errorf("slack: open socket: %w", err)
		}
	case <-clock.After(a.clock, a.opts.ConnectTimeout):
		cancel()
		a.wg.Done()
		a.wg.Wait()
		a.conn.Down(errors.New("no socket connection in time"))
		return fmt.Errorf("slack: no socket connection within %v", a.opts.ConnectTimeout)
	}
	a.conn.Connected()
	a.lg.Info("connected to Slack in Socket Mode", "user", a.SelfID())
	go func() {
		defer a.wg.Done()
		a.backfillLogged(rctx)
		a.queue.Run(rctx)
	}()
	go func() {
		select {
		case <-ctx.Done():
			a.Stop(context.Background())
		case <-rctx.Done():
		}
	}()
	return nil
}

// Stop closes the socket; it is safe to call more than once.
func (a *Adapter) Stop(ctx context.Context) error {
	a.mu.Lock()
	if a.stopping || !a.started || a.cancel == nil {
		a.mu.Unlock()
		return nil
	}
	a.stopping = true
	cancel := a.cancel
	a.mu.Unlock()
	cancel()
	a.conn.Down(nil)
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runSocket runs the Socket Mode client, restarting it with backoff if it
// ever gives up, and handles its events. The first connection (or a fatal
// error before it) is reported on connected.
func (a *Adapter) runSocket(ctx context.Context, connected chan<- error) {
	bo := feed.Backoff{Min: a.opts.BackoffMin, Max: a.opts.BackoffMax}
	first := true
	for ctx.Err() == nil {
		sm := socketmode.New(a.api, socketmode.OptionPingInterval(a.opts.PingTimeout))
		cctx, cancel := context.WithCancel(ctx)
		evDone := make(chan struct{})
		go func() {
			defer close(evDone)
			a.events(cctx, sm, &first, connected)
		}()
		err := sm.RunContext(cctx)
		cancel()
		<-evDone
		if ctx.Err() != nil {
			return
		}
		if first {
			connected <- err
			return
		}
		wait := bo.Next()
		a.conn.Lost(err)
		a.lg.Warn("Slack socket client stopped; restarting", "err", err, "retry_in", wait.Round(time.Millisecond))
		if clock.Sleep(ctx, a.clock, wait) != nil {
			return
		}
	}
}

// events consumes the Socket Mode client's events until ctx ends.
func (a *Adapter) events(ctx context.Context, sm *socketmode.Client, first *bool, connected chan<- error) {
	for {
		var evt socketmode.Event
		select {
		case <-ctx.Done():
			return
		case evt = <-sm.Events:
		}
		a.lg.Debug("socket event", "type", evt.Type)
		switch evt.Type {
		case socketmode.EventTypeConnecting:
			a.lg.Debug("opening Slack socket")
			if !*first {
				a.conn.Lost(nil)
			}
		case socketmode.EventTypeConnectionError:
			if ce, ok := evt.Data.(*slack.ConnectionErrorEvent); ok {
				if !*first {
					a.conn.Lost(ce.ErrorObj)
				}
				a.lg.Warn("Slack socket connection failed; retrying", "attempt", ce.Attempt, "retry_in", ce.Backoff, "err", ce.ErrorObj)
			}
		case socketmode.EventTypeInvalidAuth:
			a.lg.Error("Slack refused the app token (invalid_auth)")
		case socketmode.EventTypeConnected:
			if *first {
				*first = false
				connected <- nil
			} else {
				a.lg.Warn("Slack socket was lost; reconnected")
				a.conn.Reconnected()
				until := a.clock.Now()
				a.queue.Push(func(ctx context.Context) { a.backfillSeen(ctx, until) })
			}
		case socketmode.EventTypeHello:
			a.lg.Debug("Slack socket hello")
		case socketmode.EventTypeIncomingError:
			a.lg.Warn("Slack socket read error", "err", evt.Data)
		case socketmode.EventTypeErrorBadMessage:
			a.badMessage(ctx, sm, evt)
		case socketmode.EventTypeEventsAPI:
			a.ack(ctx, sm, evt.Request)
			ev, ok := evt.Data.(slackevents.EventsAPIEvent)
			if !ok {
				a.lg.Warn("skipping events_api envelope without an event")
				continue
			}
			a.onEvent(ev)
		case socketmode.EventTypeInteractive:
			a.ack(ctx, sm, evt.Request)
			if cb, ok := evt.Data.(slack.InteractionCallback); ok {
				a.onInteraction(cb)
			}
		default:
			if evt.Request != nil {
				a.ack(ctx, sm, evt.Request)
			}
		}
	}
}

func (a *Adapter) ack(ctx context.Context, sm *socketmode.Client, req *socketmode.Request) {
	if req == nil || req.EnvelopeID == "" {
		return
	}
	if err := sm.AckCtx(ctx, req.EnvelopeID, nil); err != nil && ctx.Err() == nil {
		a.lg.Warn("cannot acknowledge Slack envelope", "err", err)
	}
}

// badMessage logs a frame slack-go could not parse and still acknowledges
// its envelope, so Slack does not send it again and again.
func (a *Adapter) badMessage(ctx context.Context, sm *socketmode.Client, evt socketmode.Event) {
	bad, ok := evt.Data.(*socketmode.ErrorBadMessage)
	if !ok {
		a.lg.Warn("skipping malformed Slack event")
		return
	}
	a.lg.Warn("skipping malformed Slack event", "err", bad.Cause)
	var env struct {
		EnvelopeID string `json:"envelope_id"`
	}
	if json.Unmarshal(bad.Message, &env) == nil && env.EnvelopeID != "" {
		a.ack(ctx, sm, &socketmode.Request{EnvelopeID: env.EnvelopeID})
	}
}

// Status implements chat.StatusReporter.
func (a *Adapter) Status() chat.AdapterStatus { return a.conn.Status() }

// refreshDirectory loads users and conversations (users:read,
// channels:read, groups:read, im:read). Missing scopes are logged, not
// fatal: the lists then hold who and where Mother has seen.
func (a *Adapter) refreshDirectory(ctx context.Context) {
	users, err := a.api.GetUsersContext(ctx)
	if err != nil {
		a.lg.Warn("cannot list Slack users (scope users:read?)", "err", err)
	}
	a.mu.Lock()
	for _, u := range users {
		if !u.Deleted {
			a.users[u.ID] = userInfo(u)
		}
	}
	a.mu.Unlock()
	cursor := ""
	for {
		cs, next, err := a.api.GetConversationsContext(ctx, &slack.GetConversationsParameters{
			Cursor: cursor, ExcludeArchived: true, Limit: 200,
			Types: []string{"public_channel", "private_channel", "im", "mpim"},
		})
		if err != nil {
			a.lg.Warn("cannot list Slack conversations (scopes channels:read, groups:read, im:read?)", "err", err)
			return
		}
		a.mu.Lock()
		for _, c := range cs {
			a.learnChannelLocked(c)
		}
		a.mu.Unlock()
		if next == "" {
			return
		}
		cursor = next
	}
}

func userInfo(u slack.User) chat.UserInfo {
	display := u.Profile.DisplayName
	if display == "" {
		display = u.RealName
	}
	return chat.UserInfo{ID: u.ID, Username: u.Name, DisplayName: display}
}

func (a *Adapter) learnChannelLocked(c slack.Channel) chat.ChannelInfo {
	info := chat.ChannelInfo{ID: c.ID, Name: c.Name, Type: chat.ChannelPublic}
	switch {
	case c.IsIM:
		info.Type = chat.ChannelDM
		if u, ok := a.users[c.User]; ok {
			info.Name = "dm-" + u.Username
		} else if info.Name == "" {
			info.Name = "dm-" + c.User
		}
	case c.IsMpIM:
		info.Type = chat.ChannelGroup
	case c.IsPrivate:
		info.Type = chat.ChannelGroup
	}
	if c.ID != "" {
		a.chans[c.ID] = info
	}
	return info
}

// channel returns what is known about a conversation, asking Slack once.
func (a *Adapter) channel(ctx context.Context, id string) (chat.ChannelInfo, bool) {
	a.mu.Lock()
	c, ok := a.chans[id]
	a.mu.Unlock()
	if ok {
		return c, true
	}
	ch, err := a.api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: id})
	if err != nil {
		a.lg.Debug("cannot look up conversation", "channel", id, "err", err)
		return chat.ChannelInfo{ID: id}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.learnChannelLocked(*ch), true
}

// user returns what is known about a user, asking Slack once.
func (a *Adapter) user(ctx context.Context, id string) chat.UserInfo {
	a.mu.Lock()
	u, ok := a.users[id]
	a.mu.Unlock()
	if ok || id == "" {
		return u
	}
	su, err := a.api.GetUserInfoContext(ctx, id)
	if err != nil {
		a.lg.Debug("cannot look up user", "user", id, "err", err)
		return chat.UserInfo{ID: id, Username: id}
	}
	info := userInfo(*su)
	a.mu.Lock()
	a.users[id] = info
	a.mu.Unlock()
	return info
}

// Users implements chat.Adapter.
func (a *Adapter) Users() []chat.UserInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]chat.UserInfo, 0, len(a.users))
	for _, u := range a.users {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Username < out[j].Username })
	return out
}

// Channels implements chat.Adapter.
func (a *Adapter) Channels() []chat.ChannelInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	return chat.SortedChannels(a.chans)
}
