// Package discord connects Mother to Discord with github.com/bwmarrin/discordgo:
// guild messages, DMs and threads arrive over the gateway (intents guilds,
// guild messages, message content, direct messages) and become
// chat.ChannelMessages; agent runs are rendered as a working message with a
// stop button, replaced by the answer, with tool details in a thread.
// Questions such as a chick's access request carry buttons (chat.Chooser);
// clicks arrive as interactions, are acknowledged and delivered as choices.
//
// The gateway connection is supervised: a drop, or a connection that looks
// open but stops acknowledging heartbeats, is reconnected with backoff and
// logged; after a reconnect or a restart, messages missed meanwhile are
// fetched over REST (backfill) and delivered late.
package discord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/mother-chat/mother/pkg/adapters/internal/feed"
	"github.com/mother-chat/mother/pkg/adapters/internal/upload"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
)

// Platform limits and defaults.
const (
	// MessageLimit is what one message may hold; parts are cut near it.
	MessageLimit = 2000
	splitAt      = 1900
	// UploadLimit is the largest file a bot can upload without boosts.
	UploadLimit = 25 << 20
	// stopButtonID is the custom_id of the stop button.
	stopButtonID = "mother:stop"
)

// Intents Mother asks for.
const Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentsMessageContent | discordgo.IntentsDirectMessages

// Options tune an adapter beyond config.json (tests shorten the timings).
type Options struct {
	// Transport is the HTTP transport under the API URL rewrite (default
	// http.DefaultTransport).
	Transport http.RoundTripper
	// WatchdogInterval is how often the gateway's liveness is checked
	// (default 15 s); StaleAfter is the heartbeat-acknowledgement age at
	// which a connection counts as dead (default 100 s, about two and a
	// half of Discord's heartbeat intervals).
	WatchdogInterval, StaleAfter time.Duration
	// BackoffMin and BackoffMax bound reconnect waits (1 s .. 2 min).
	BackoffMin, BackoffMax time.Duration
	// MinEdit is the least time between edits of one message (1 s).
	MinEdit time.Duration
	// Grace is how long a run may take before a working message is shown
	// (default 1.5 s).
	Grace time.Duration
	// MaxAttachment is the largest file downloaded (default 25 MiB).
	MaxAttachment int64
	// BackfillLimit caps messages fetched per channel after a restart
	// (default 500).
	BackfillLimit int
}

func (o *Options) defaults() {
	if o.Transport == nil {
		o.Transport = http.DefaultTransport
	}
	if o.WatchdogInterval <= 0 {
		o.WatchdogInterval = 15 * time.Second
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = 100 * time.Second
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
}

// Adapter is one Discord bot account.
type Adapter struct {
	name  string
	cfg   Settings
	env   chat.Env
	clock clock.Clock
	opts  Options
	lg    *slog.Logger
	s     *discordgo.Session

	queue  *feed.Queue
	seen   *feed.Seen
	conn   feed.Conn
	cursor *feed.Cursor
	intake feed.Intake

	mu       sync.Mutex
	inbox    chat.Inbox
	selfID   string
	selfName string
	users    map[string]chat.UserInfo
	chans    map[string]*channelInfo
	// clicks are the interactions of recent choice clicks, by id.
	clicks   map[string]click
	started  bool
	stopping bool
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	// disconnected is signalled by the Disconnect handler.
	disconnected chan struct{}
	// uploads bounds the uploads running at once.
	uploads *upload.Slots
}

// channelInfo is what the adapter knows about a channel or thread.
type channelInfo struct {
	ID, Name, GuildID, ParentID, OwnerID string
	Type                                 discordgo.ChannelType
	// Mine is set for threads Mother started.
	Mine bool
}

var (
	_ chat.Adapter         = (*Adapter)(nil)
	_ chat.Uploader        = (*Adapter)(nil)
	_ chat.StatusReporter  = (*Adapter)(nil)
	_ chat.DirectMessenger = (*Adapter)(nil)
)

// New builds a Discord adapter from its configuration.
func New(env chat.Env, opts Options) (*Adapter, error) {
	cfg := settingsOf(env)
	if cfg.BotToken.Value() == "" {
		return nil, errors.New("discord: botToken is required")
	}
	opts.defaults()
	lg := env.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("component", "discord", "adapter", env.Name)
	s, err := discordgo.New("Bot " + cfg.BotToken.Value())
	if err != nil {
		return nil, fmt.Errorf("discord: %w", err)
	}
	rt, err := apiTransport(cfg.APIURL, opts.Transport)
	if err != nil {
		return nil, fmt.Errorf("discord: apiURL: %w", err)
	}
	s.Client = &http.Client{Transport: rt, Timeout: 60 * time.Second}
	s.Identify.Intents = Intents
	s.ShouldReconnectOnError = false // the adapter supervises reconnects
	s.SyncEvents = true              // handlers run in gateway order
	s.StateEnabled = true
	s.LogLevel = discordgo.LogError
	routeLibraryLog(lg)
	a := &Adapter{
		name:         env.Name,
		cfg:          cfg,
		env:          env,
		clock:        clock.OrReal(env.Clock),
		opts:         opts,
		lg:           lg,
		s:            s,
		queue:        feed.NewQueue(),
		seen:         feed.NewSeen(0),
		users:        map[string]chat.UserInfo{},
		chans:        map[string]*channelInfo{},
		clicks:       map[string]click{},
		disconnected: make(chan struct{}, 1),
		uploads:      upload.NewSlots(upload.Concurrent),
		cursor:       &feed.Cursor{Files: env.Files, Newer: newer, IsPlatformID: isSnowflake, LoggedChannel: isSnowflake, Log: lg},
		intake:       feed.Intake{Files: env.Files, Max: opts.MaxAttachment, Log: lg},
	}
	s.AddHandler(a.onReady)
	s.AddHandler(a.onGuildCreate)
	s.AddHandler(a.onChannelCreate)
	s.AddHandler(a.onThreadCreate)
	s.AddHandler(a.onMessageCreate)
	s.AddHandler(a.onInteraction)
	s.AddHandler(a.onDisconnect)
	return a, nil
}

var logOnce sync.Once

// routeLibraryLog sends discordgo's own log lines (a package-wide hook,
// errors only) to the first adapter's logger.
func routeLibraryLog(lg *slog.Logger) {
	logOnce.Do(func() {
		discordgo.Logger = func(level, _ int, format string, args ...any) {
			l := slog.LevelWarn
			if level >= discordgo.LogInformational {
				l = slog.LevelDebug
			}
			lg.Log(context.Background(), l, "discordgo: "+fmt.Sprintf(format, args...))
		}
	})
}

// apiTransport sends requests meant for https://discord.com to apiURL
// instead (a REST proxy, or a local fake in tests). Other hosts (the
// gateway, the CDN) are left alone: their URLs come from Discord's answers.
func apiTransport(apiURL string, base http.RoundTripper) (http.RoundTripper, error) {
	if apiURL == "" {
		return base, nil
	}
	u, err := url.Parse(apiURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%q: want an http(s) URL such as https://proxy.example:8080", apiURL)
	}
	return &rewrite{to: u, base: base}, nil
}

type rewrite struct {
	to   *url.URL
	base http.RoundTripper
}

func (r *rewrite) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != "discord.com" {
		return r.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.URL.Scheme = r.to.Scheme
	req.URL.Host = r.to.Host
	req.URL.Path = strings.TrimSuffix(r.to.Path, "/") + req.URL.Path
	req.Host = r.to.Host
	return r.base.RoundTrip(req)
}

// Name implements chat.Adapter.
func (a *Adapter) Name() string { return a.name }

// SelfID implements chat.Adapter.
func (a *Adapter) SelfID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.selfID
}

// Start connects to the gateway, then backfills what was missed while
// Mother was down and keeps the connection alive until Stop or ctx ends.
func (a *Adapter) Start(ctx context.Context, in chat.Inbox) error {
	a.mu.Lock()
	if a.started {
		a.mu.Unlock()
		return errors.New("discord: already started")
	}
	a.started = true
	a.inbox = in
	a.mu.Unlock()

	if err := a.s.Open(); err != nil {
		a.conn.Down(err)
		return fmt.Errorf("discord: connect to gateway: %w", err)
	}
	a.conn.Connected()
	a.lg.Info("connected to the Discord gateway", "user", a.SelfID())
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.mu.Lock()
	a.cancel = cancel
	a.mu.Unlock()
	a.wg.Add(2)
	go func() {
		defer a.wg.Done()
		// Backfill first, then live events in arrival order.
		a.backfillLogged(rctx)
		a.queue.Run(rctx)
	}()
	go func() {
		defer a.wg.Done()
		a.supervise(rctx)
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

// Stop disconnects; it is safe to call more than once.
func (a *Adapter) Stop(ctx context.Context) error {
	a.mu.Lock()
	if a.stopping || !a.started {
		a.mu.Unlock()
		return nil
	}
	a.stopping = true
	cancel := a.cancel
	a.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	err := a.s.Close()
	a.conn.Down(nil)
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("discord: close gateway: %w", err)
	}
	return nil
}

func (a *Adapter) isStopping() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stopping
}

func (a *Adapter) onDisconnect(_ *discordgo.Session, _ *discordgo.Disconnect) {
	select {
	case a.disconnected <- struct{}{}:
	default:
	}
}

// supervise reconnects the gateway when it drops or goes silent.
func (a *Adapter) supervise(ctx context.Context) {
	tick := clock.NewTicker(a.clock, a.opts.WatchdogInterval)
	defer tick.Stop()
	bo := feed.Backoff{Min: a.opts.BackoffMin, Max: a.opts.BackoffMax}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if age, open := a.heartbeatAge(); open && age > a.opts.StaleAfter {
				a.lg.Warn("gateway looks connected but has not acknowledged a heartbeat; reconnecting", "last_ack_age", age.Round(time.Second))
				_ = a.s.Close() // emits Disconnect
			}
			continue
		case <-a.disconnected:
		}
		if a.isStopping() {
			return
		}
		a.conn.Lost(nil)
		for attempt := 1; ; attempt++ {
			err := a.s.Open()
			if errors.Is(err, discordgo.ErrWSAlreadyOpen) && attempt == 1 {
				a.conn.Connected()
				break // a stale signal: the connection is up
			}
			if err == nil && a.isStopping() {
				_ = a.s.Close() // Stop raced this reconnect
				return
			}
			if err == nil || errors.Is(err, discordgo.ErrWSAlreadyOpen) {
				a.lg.Warn("gateway connection was lost; reconnected", "attempts", attempt)
				a.conn.Reconnected()
				bo.Reset()
				until := a.clock.Now()
				a.queue.Push(func(ctx context.Context) { a.backfillSeen(ctx, until) })
				break
			}
			wait := bo.Next()
			a.conn.Lost(err)
			a.lg.Warn("gateway connection lost; reconnect failed", "attempt", attempt, "retry_in", wait.Round(time.Millisecond), "err", err)
			if clock.Sleep(ctx, a.clock, wait) != nil || a.isStopping() {
				return
			}
		}
	}
}

// heartbeatAge is the time since the gateway last acknowledged a
// heartbeat, and whether a connection is open at all.
func (a *Adapter) heartbeatAge() (time.Duration, bool) {
	a.s.RLock()
	defer a.s.RUnlock()
	return time.Since(a.s.LastHeartbeatAck), a.s.DataReady
}

// Status implements chat.StatusReporter.
func (a *Adapter) Status() chat.AdapterStatus { return a.conn.Status() }

// ---- what the adapter knows ----

func (a *Adapter) onReady(_ *discordgo.Session, r *discordgo.Ready) {
	if r.User == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.selfID, a.selfName = r.User.ID, r.User.Username
	a.users[r.User.ID] = chat.UserInfo{ID: r.User.ID, Username: r.User.Username, DisplayName: r.User.GlobalName}
}

func (a *Adapter) wantGuild(id string) bool {
	return a.cfg.GuildID == "" || id == a.cfg.GuildID
}

func (a *Adapter) onGuildCreate(_ *discordgo.Session, g *discordgo.GuildCreate) {
	if g.Guild == nil || !a.wantGuild(g.ID) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range g.Channels {
		a.learnChannelLocked(c)
	}
	for _, c := range g.Threads {
		a.learnChannelLocked(c)
	}
	for _, m := range g.Members {
		if m != nil && m.User != nil {
			a.learnUserLocked(m.User, m.Nick)
		}
	}
}

func (a *Adapter) onChannelCreate(_ *discordgo.Session, c *discordgo.ChannelCreate) {
	if c.Channel == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.learnChannelLocked(c.Channel)
}

func (a *Adapter) onThreadCreate(_ *discordgo.Session, c *discordgo.ThreadCreate) {
	if c.Channel == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.learnChannelLocked(c.Channel)
}

func (a *Adapter) learnChannelLocked(c *discordgo.Channel) *channelInfo {
	if c == nil || c.ID == "" {
		return nil
	}
	ci := a.chans[c.ID]
	if ci == nil {
		ci = &channelInfo{ID: c.ID}
		a.chans[c.ID] = ci
	}
	ci.Type, ci.GuildID, ci.ParentID, ci.OwnerID = c.Type, c.GuildID, c.ParentID, c.OwnerID
	if c.Name != "" {
		ci.Name = c.Name
	}
	if c.OwnerID != "" && c.OwnerID == a.selfID {
		ci.Mine = true
	}
	if c.Type == discordgo.ChannelTypeDM && ci.Name == "" && len(c.Recipients) > 0 && c.Recipients[0] != nil {
		ci.Name = "dm-" + c.Recipients[0].Username
	}
	return ci
}

func (a *Adapter) learnUserLocked(u *discordgo.User, nick string) chat.UserInfo {
	info := chat.UserInfo{ID: u.ID, Username: u.Username, DisplayName: u.GlobalName}
	if nick != "" {
		info.DisplayName = nick
	}
	if old, ok := a.users[u.ID]; ok && info.DisplayName == "" {
		info.DisplayName = old.DisplayName
	}
	if u.ID != "" && u.Username != "" {
		a.users[u.ID] = info
	}
	return info
}

// channel returns what is known about a channel, asking Discord when the
// adapter has not seen it yet.
//
// It returns a copy: the gateway's events update the map's entries under
// a.mu while the caller reads this one.
func (a *Adapter) channel(ctx context.Context, id string) (*channelInfo, error) {
	a.mu.Lock()
	ci, ok := a.chans[id]
	var cp channelInfo
	if ok {
		cp = *ci
	}
	a.mu.Unlock()
	if ok {
		return &cp, nil
	}
	c, err := a.s.Channel(id, discordgo.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("look up channel %s: %w", id, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	cp = *a.learnChannelLocked(c)
	return &cp, nil
}

// Users implements chat.Adapter: guild members and everyone seen talking.
func (a *Adapter) Users() []chat.UserInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]chat.UserInfo, 0, len(a.users))
	for _, u := range a.users {
		out = append(out, u)
	}
	sortUsers(out)
	return out
}

// Channels implements chat.Adapter: the guild's text channels and the DMs
// seen.
func (a *Adapter) Channels() []chat.ChannelInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []chat.ChannelInfo
	for _, c := range a.chans {
		switch c.Type {
		case discordgo.ChannelTypeGuildText, discordgo.ChannelTypeGuildNews:
			if a.wantGuild(c.GuildID) {
				out = append(out, chat.ChannelInfo{ID: c.ID, Name: c.Name, Type: chat.ChannelPublic})
			}
		case discordgo.ChannelTypeDM:
			out = append(out, chat.ChannelInfo{ID: c.ID, Name: c.Name, Type: chat.ChannelDM})
		case discordgo.ChannelTypeGroupDM:
			out = append(out, chat.ChannelInfo{ID: c.ID, Name: c.Name, Type: chat.ChannelGroup})
		}
	}
	sortChannels(out)
	return out
}
