// Package whatsapp connects Mother to WhatsApp as a linked device of an
// ordinary WhatsApp account (the way WhatsApp Web is linked), through
// go.mau.fi/whatsmeow: DMs and groups become channels; agent runs are
// rendered as one message of hers, edited as the run goes (throttled) and
// replaced by the answer, with "typing…" shown meanwhile.
//
// # Session
//
// The linked device's keys and Signal sessions live in whatsmeow's SQL
// store, in one SQLite file under the data directory (Session; the driver
// is modernc.org/sqlite, pure Go, so Mother stays a CGO_ENABLED=0 binary).
// Linking shows a QR code in the terminal or gives a phone-number pairing
// code (Link). A session the phone logs out is recorded, reported in the
// log, in momctl status and by mother --check-config.
//
// # Identities
//
// Users are named by their phone-number JIDs, "4915112345678@s.whatsapp.net"
// (admins and dm lists use the same form); a sender WhatsApp addresses by
// its hidden LID is mapped back to the phone number where the library
// knows it. A channel id is the chat's JID with "@" made "_"
// ("4915112345678_s.whatsapp.net", "120363012345678901_g.us"): "@" may not
// be part of a directory name.
//
// # The seam
//
// WhatsApp's protocol is end-to-end encrypted to WhatsApp's own servers,
// so it cannot be faked at the wire. The adapter talks to the library
// through Client, the handful of *whatsmeow.Client methods it calls; tests
// drive it with the library's real event and message types through that
// interface (see docs/adapters.md for exactly what is tested so).
package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"golang.org/x/term"

	"github.com/mother-chat/mother/pkg/adapters/internal/feed"
	"github.com/mother-chat/mother/pkg/adapters/internal/upload"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
)

// Limits.
const (
	// MessageLimit is where Mother cuts long answers. WhatsApp takes
	// about 65,000 characters but folds anything long behind "Read
	// more"; parts of at most 4,000 read better.
	MessageLimit = 4000
	// DownloadLimit is the largest file taken in (WhatsApp documents may
	// be up to 2 GB).
	DownloadLimit = chat.DefaultMaxAttachment
	// UploadLimit is the largest file sent (WhatsApp's limit for
	// documents is 2 GB; Mother keeps to what phones handle well).
	UploadLimit = 100 << 20
	// imageLimit is the largest image sent as an image (WhatsApp
	// recompresses images; larger ones go as documents).
	imageLimit = 16 << 20
	// EditWindow is how long WhatsApp lets a message be edited (15
	// minutes); Mother stops editing a little before it and posts anew.
	EditWindow = 15 * time.Minute
	userServer = types.DefaultUserServer
)

// Client is the seam between the adapter and whatsmeow: the methods of
// *whatsmeow.Client the adapter calls, nothing more.
type Client interface {
	Connect() error
	Disconnect()
	AddEventHandler(handler whatsmeow.EventHandler) uint32
	RemoveEventHandler(id uint32) bool
	SendMessage(ctx context.Context, to types.JID, message *waE2E.Message, extra ...whatsmeow.SendRequestExtra) (whatsmeow.SendResponse, error)
	SendPresence(ctx context.Context, state types.Presence) error
	SendChatPresence(ctx context.Context, jid types.JID, state types.ChatPresence, media types.ChatPresenceMedia) error
	Download(ctx context.Context, msg whatsmeow.DownloadableMessage) ([]byte, error)
	UploadReader(ctx context.Context, plaintext io.Reader, tempFile io.ReadWriteSeeker, appInfo whatsmeow.MediaType) (whatsmeow.UploadResponse, error)
	BuildEdit(chat types.JID, id types.MessageID, newContent *waE2E.Message) *waE2E.Message
	BuildRevoke(chat, sender types.JID, id types.MessageID) *waE2E.Message
	GetGroupInfo(ctx context.Context, jid types.JID) (*types.GroupInfo, error)
}

var _ Client = (*whatsmeow.Client)(nil)

// Options tune an adapter beyond config.json (tests give a Client).
type Options struct {
	// Client, when set, is used instead of a whatsmeow client on the
	// session file; Self (and SelfLID) are then the account's JIDs.
	Client  Client
	Self    types.JID
	SelfLID types.JID
	// LIDs maps hidden user ids to phone numbers (default: the session's
	// store; nil with Client: no mapping).
	LIDs store.LIDStore
	// Session keeps handled message ids across restarts (default: the
	// session file; nil with Client: in memory only).
	Session *Session
	// MinEdit is the least time between edits of one message (default
	// 3 s: every edit is a new encrypted message to every device in the
	// chat).
	MinEdit time.Duration
	// Grace is how long a run may take before a working message is shown
	// (default 2 s).
	Grace time.Duration
	// PresenceEvery is how often "typing…" is renewed (default 10 s;
	// WhatsApp shows it for about 25 s).
	PresenceEvery time.Duration
	// MaxAttachment is the largest file downloaded (default
	// DownloadLimit).
	MaxAttachment int64
	// RateWait is how long to wait when WhatsApp answers a send with 429
	// (it gives no retry-after; default 5 s).
	RateWait time.Duration
	// ConnectTimeout bounds the wait for the first connection (default
	// 60 s).
	ConnectTimeout time.Duration
	// LinkOut is where a first start without a session shows the QR code
	// (default: standard error when it is a terminal; otherwise Start
	// fails with a message saying to run mother link).
	LinkOut io.Writer
	// NoLinkPrompt makes a start without a session fail even on a
	// terminal.
	NoLinkPrompt bool
}

func (o *Options) defaults() {
	if o.MinEdit <= 0 {
		o.MinEdit = 3 * time.Second
	}
	if o.Grace <= 0 {
		o.Grace = 2 * time.Second
	}
	if o.PresenceEvery <= 0 {
		o.PresenceEvery = 10 * time.Second
	}
	if o.MaxAttachment <= 0 {
		o.MaxAttachment = DownloadLimit
	}
	if o.RateWait <= 0 {
		o.RateWait = 5 * time.Second
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = time.Minute
	}
}

// Adapter is one linked WhatsApp account.
type Adapter struct {
	name   string
	cfg    Settings
	env    chat.Env
	clock  clock.Clock
	opts   Options
	lg     *slog.Logger
	intake feed.Intake
	seen   *feed.Seen
	// uploads bounds the uploads running at once.
	uploads *upload.Slots
	conn    feed.Conn

	mu       sync.Mutex
	client   Client
	session  *Session
	own      bool // the adapter opened session and client
	lids     store.LIDStore
	self     types.JID
	selfLID  types.JID
	inbox    chat.Inbox
	users    map[string]chat.UserInfo
	chans    map[string]chat.ChannelInfo
	groups   map[string]string // group JID -> subject
	handler  uint32
	queue    *feed.Queue
	started  bool
	stopping bool
	lost     bool // the connection dropped; the next Connected is a reconnect
	offline  bool // between Connected and OfflineSyncCompleted: what arrives was missed
	ready    chan error
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	// sent remembers when Mother's own messages went out, for the edit
	// window.
	sent map[string]time.Time
}

var (
	_ chat.Adapter         = (*Adapter)(nil)
	_ chat.Uploader        = (*Adapter)(nil)
	_ chat.StatusReporter  = (*Adapter)(nil)
	_ chat.DirectMessenger = (*Adapter)(nil)
)

// New builds a WhatsApp adapter from its configuration. It touches neither
// the session file nor the network; Start does.
func New(env chat.Env, opts Options) (*Adapter, error) {
	if err := checkIDs(env.Config); err != nil {
		return nil, fmt.Errorf("whatsapp: %w", err)
	}
	if opts.Client == nil && env.DataDir == "" && !filepath.IsAbs(settingsOf(env).Session) {
		return nil, errors.New("whatsapp: no data directory to keep the session in")
	}
	opts.defaults()
	lg := env.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("component", "whatsapp", "adapter", env.Name)
	cfg := settingsOf(env)
	if cfg.DeviceName == "" {
		cfg.DeviceName = DefaultDeviceName
	}
	a := &Adapter{
		name:    env.Name,
		cfg:     cfg,
		env:     env,
		clock:   clock.OrReal(env.Clock),
		opts:    opts,
		lg:      lg,
		seen:    feed.NewSeen(0),
		intake:  feed.Intake{Files: env.Files, Max: opts.MaxAttachment, Log: lg},
		uploads: upload.NewSlots(upload.Concurrent),
		users:   map[string]chat.UserInfo{},
		chans:   map[string]chat.ChannelInfo{},
		groups:  map[string]string{},
		sent:    map[string]time.Time{},
	}
	return a, nil
}

// Name implements chat.Adapter.
func (a *Adapter) Name() string { return a.name }

// SelfID implements chat.Adapter: the account's phone-number JID.
func (a *Adapter) SelfID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.self.IsEmpty() {
		return ""
	}
	return a.self.ToNonAD().String()
}

// Status implements chat.StatusReporter.
func (a *Adapter) Status() chat.AdapterStatus { return a.conn.Status() }

// linkOut is where a first start shows the QR code, or nil.
func (a *Adapter) linkOut() io.Writer {
	if a.opts.LinkOut != nil {
		return a.opts.LinkOut
	}
	if a.opts.NoLinkPrompt {
		return nil
	}
	if term.IsTerminal(int(os.Stderr.Fd())) {
		return os.Stderr
	}
	return nil
}

// open opens the session and builds the whatsmeow client on it, linking
// first when there is no session and a terminal to show the QR code on.
func (a *Adapter) open(ctx context.Context) error {
	path := sessionPath(a.env)
	s, err := OpenSession(ctx, path, a.lg)
	if err != nil {
		return err
	}
	if _, err := s.State(ctx, a.name); err != nil {
		out := a.linkOut()
		if out == nil {
			s.Close()
			return err
		}
		a.lg.Warn("WhatsApp session not usable; showing a QR code to link", "reason", err.Error())
		if err := linkSession(ctx, s, a.cfg.DeviceName, a.lg, chat.Terminal{Out: out}, a.clock); err != nil {
			s.Close()
			return err
		}
	}
	dev, err := s.Device(ctx)
	if err != nil {
		s.Close()
		return err
	}
	cli := whatsmeow.NewClient(dev, waLogger(a.lg, "client"))
	a.mu.Lock()
	a.client, a.session, a.own = cli, s, true
	a.lids = dev.LIDs
	a.self, a.selfLID = dev.ID.ToNonAD(), dev.LID.ToNonAD()
	a.mu.Unlock()
	return nil
}

// Start opens the session, connects, and delivers messages until Stop or
// ctx ends. It returns once WhatsApp accepted the connection (or failed,
// or logged the device out).
func (a *Adapter) Start(ctx context.Context, in chat.Inbox) error {
	a.mu.Lock()
	if a.started {
		a.mu.Unlock()
		return errors.New("whatsapp: already started")
	}
	a.started = true
	a.inbox = in
	a.ready = make(chan error, 1)
	if a.opts.Client != nil {
		a.client, a.session = a.opts.Client, a.opts.Session
		a.self, a.selfLID, a.lids = a.opts.Self.ToNonAD(), a.opts.SelfLID.ToNonAD(), a.opts.LIDs
	}
	a.mu.Unlock()
	if a.opts.Client == nil {
		if err := a.open(ctx); err != nil {
			a.conn.Down(err)
			return fmt.Errorf("whatsapp: %w", err)
		}
	}
	if a.session != nil {
		if err := a.session.TrimSeen(ctx, a.clock.Now()); err != nil {
			a.lg.Warn("cannot trim the handled message ids", "err", err)
		}
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	q := feed.NewQueue()
	a.mu.Lock()
	a.cancel, a.queue = cancel, q
	a.handler = a.client.AddEventHandler(a.onEvent)
	a.mu.Unlock()
	a.wg.Add(1)
	go func() { defer a.wg.Done(); q.Run(rctx) }()

	if err := a.client.Connect(); err != nil {
		a.conn.Down(err)
		a.shutdown()
		return fmt.Errorf("whatsapp: connect: %w", err)
	}
	select {
	case err := <-a.ready:
		if err != nil {
			a.shutdown()
			return fmt.Errorf("whatsapp: %w", err)
		}
	case <-clock.After(a.clock, a.opts.ConnectTimeout):
		// whatsmeow keeps trying on its own; the status says so.
		a.conn.Lost(errors.New("no connection to WhatsApp yet"))
		a.lg.Warn("WhatsApp has not accepted the connection yet; still trying", "waited", a.opts.ConnectTimeout)
	case <-ctx.Done():
		a.shutdown()
		return ctx.Err()
	}
	a.lg.Info("connected to WhatsApp", "account", a.self.User)
	go func() {
		select {
		case <-ctx.Done():
			a.Stop(context.Background())
		case <-rctx.Done():
		}
	}()
	return nil
}

// shutdown disconnects and releases what Start took.
func (a *Adapter) shutdown() {
	a.mu.Lock()
	cancel, cli, h, own, s := a.cancel, a.client, a.handler, a.own, a.session
	a.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if cli != nil {
		cli.RemoveEventHandler(h)
		cli.Disconnect()
	}
	a.wg.Wait()
	if own && s != nil {
		s.Close()
	}
}

// Stop disconnects; it is safe to call more than once.
func (a *Adapter) Stop(ctx context.Context) error {
	a.mu.Lock()
	if a.stopping || !a.started {
		a.mu.Unlock()
		return nil
	}
	a.stopping = true
	a.mu.Unlock()
	done := make(chan struct{})
	go func() { a.shutdown(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	a.conn.Down(nil)
	return nil
}

// signalReady reports the first connection outcome to Start.
func (a *Adapter) signalReady(err error) {
	a.mu.Lock()
	ch := a.ready
	a.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- err:
	default:
	}
}

// onEvent is whatsmeow's event handler. It runs on the library's event
// goroutine, so it only records state and queues messages; downloads and
// delivery happen on the adapter's queue, in arrival order.
func (a *Adapter) onEvent(evt any) {
	switch e := evt.(type) {
	case *events.Message:
		a.mu.Lock()
		late, q, stopping := a.offline, a.queue, a.stopping
		a.mu.Unlock()
		if stopping || q == nil {
			return
		}
		q.Push(func(ctx context.Context) { a.handleMessage(ctx, e, late) })
	case *events.Connected:
		a.mu.Lock()
		reconnect := a.lost
		a.lost, a.offline = false, true
		a.mu.Unlock()
		if reconnect {
			a.conn.Reconnected()
			a.lg.Warn("connection to WhatsApp was lost; reconnected")
		} else {
			a.conn.Connected()
		}
		a.signalReady(nil)
		// Online, so that "typing…" shows in chats (WhatsApp shows chat
		// presence only from an available account).
		a.mu.Lock()
		cli := a.client
		a.mu.Unlock()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := cli.SendPresence(ctx, types.PresenceAvailable); err != nil {
				a.lg.Debug("cannot send the available presence", "err", err)
			}
		}()
	case *events.OfflineSyncPreview:
		a.lg.Info("WhatsApp is delivering what arrived while Mother was away", "messages", e.Messages)
	case *events.OfflineSyncCompleted:
		a.mu.Lock()
		a.offline = false
		a.mu.Unlock()
		a.lg.Info("offline sync completed", "count", e.Count)
	case *events.Disconnected:
		a.mu.Lock()
		stopping := a.stopping
		if !stopping {
			a.lost = true
		}
		a.mu.Unlock()
		if !stopping {
			a.conn.Lost(errors.New("disconnected from WhatsApp"))
			a.lg.Warn("disconnected from WhatsApp; the library reconnects")
		}
	case *events.KeepAliveTimeout:
		a.lg.Warn("WhatsApp keepalive timed out", "errors", e.ErrorCount)
	case *events.LoggedOut:
		a.loggedOut(e.PermanentDisconnectDescription())
	case *events.StreamReplaced:
		err := errors.New("another client connected with this session (the same session file used twice?); not reconnecting")
		a.lg.Error("WhatsApp replaced this connection", "err", err)
		a.conn.Down(err)
		a.signalReady(err)
	case *events.TemporaryBan:
		err := fmt.Errorf("WhatsApp banned this account temporarily: %s", e.String())
		a.lg.Error("WhatsApp refused the connection", "err", err)
		a.conn.Down(err)
		a.signalReady(err)
	case *events.ConnectFailure:
		err := fmt.Errorf("WhatsApp refused the connection: %s", e.PermanentDisconnectDescription())
		a.lg.Error("WhatsApp refused the connection", "err", err)
		a.conn.Down(err)
		a.signalReady(err)
	case *events.ClientOutdated:
		err := errors.New("WhatsApp says this client is outdated: update Mother (whatsmeow)")
		a.lg.Error("WhatsApp refused the connection", "err", err)
		a.conn.Down(err)
		a.signalReady(err)
	}
}

// loggedOut records and reports that the phone (or WhatsApp) ended the
// linked session. whatsmeow has already deleted the device from the store.
func (a *Adapter) loggedOut(reason string) {
	err := fmt.Errorf("%w of WhatsApp (%s): link again with `mother link whatsapp %s DATA`", ErrLoggedOut, reason, a.name)
	a.lg.Error("WhatsApp logged this device out; Mother cannot read or send until it is linked again", "reason", reason, "relink", "mother link whatsapp "+a.name+" DATA")
	a.mu.Lock()
	s := a.session
	a.mu.Unlock()
	if s != nil {
		if merr := s.MarkLoggedOut(context.Background(), reason, a.clock.Now()); merr != nil {
			a.lg.Error("cannot record the logout in the session", "err", merr)
		}
	}
	a.conn.Down(err)
	a.signalReady(err)
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
	sort.Slice(out, func(i, j int) bool { return out[i].Username < out[j].Username })
	return out
}

// Channels implements chat.Adapter: the chats seen.
func (a *Adapter) Channels() []chat.ChannelInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	return chat.SortedChannels(a.chans)
}

// ChannelID is the channel id of a chat: its JID with "@" made "_".
func ChannelID(jid types.JID) string {
	return jid.ToNonAD().User + "_" + jid.Server
}

// parseChannel turns a channel id back into the chat's JID.
func parseChannel(channelID string) (types.JID, error) {
	i := strings.LastIndexByte(channelID, '_')
	if i <= 0 || i == len(channelID)-1 {
		return types.EmptyJID, fmt.Errorf("%q is not a WhatsApp channel id (number_s.whatsapp.net or id_g.us)", channelID)
	}
	jid := types.NewJID(channelID[:i], channelID[i+1:])
	switch jid.Server {
	case types.DefaultUserServer, types.GroupServer, types.HiddenUserServer:
		return jid, nil
	}
	return types.EmptyJID, fmt.Errorf("%q is not a WhatsApp channel id: unknown server %q", channelID, jid.Server)
}
