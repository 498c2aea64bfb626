// Package discordtest is a fake Discord for tests: one loopback HTTP server
// that speaks Discord's REST API (v9, the calls Mother makes) and its
// gateway websocket (HELLO, IDENTIFY/RESUME, READY, heartbeats, dispatches),
// so the real discordgo client is exercised end to end. Tests script users
// posting messages, clicking buttons (with the interaction callback and
// follow-ups Discord expects), rate-limit answers (429 with
// retry_after), dropped and silent connections, and inspect what Mother
// posted, edited, uploaded and threaded.
package discordtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Channel types (Discord's numbers).
const (
	TypeText         = 0
	TypeDM           = 1
	TypePublicThread = 11
)

// User is a Discord user.
type User struct {
	ID         string `json:"id"`
	Username   string `json:"username"`
	GlobalName string `json:"global_name,omitempty"`
	Bot        bool   `json:"bot,omitempty"`
}

// Channel is a guild channel, DM or thread.
type Channel struct {
	ID       string `json:"id"`
	Type     int    `json:"type"`
	GuildID  string `json:"guild_id,omitempty"`
	Name     string `json:"name,omitempty"`
	ParentID string `json:"parent_id,omitempty"`
	OwnerID  string `json:"owner_id,omitempty"`
	// Recipient is the other user of a DM.
	Recipients []User `json:"recipients,omitempty"`
}

// File is an uploaded file.
type File struct {
	Name        string
	ContentType string
	Data        []byte
}

// Attachment is a file on a user's message, served by the fake's CDN.
type Attachment struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type,omitempty"`
	Size        int    `json:"size"`
	URL         string `json:"url"`
	// DurationSecs and Waveform are a voice message's (its message has
	// the IS_VOICE_MESSAGE flag, 1<<13).
	DurationSecs float64 `json:"duration_secs,omitempty"`
	Waveform     string  `json:"waveform,omitempty"`
	data         []byte
}

// Message is a message as the fake stores it.
type Message struct {
	ID          string
	ChannelID   string
	GuildID     string
	Author      User
	Content     string
	Timestamp   time.Time
	Attachments []Attachment
	// Flags are the message's flags (1<<13: a voice message).
	Flags    int
	Mentions []User
	// ReplyTo is the message_reference's message id.
	ReplyTo string
	// Components is the raw components array last set.
	Components json.RawMessage
	// Edits counts PATCHes; History holds every content it had.
	Edits   int
	History []string
	Deleted bool
	Files   []File
	// AllowedMentions is the raw allowed_mentions of the last write.
	AllowedMentions json.RawMessage
}

// HasButton reports whether the message carries a button with
// custom_id id.
func (m Message) HasButton(customID string) bool {
	return bytes.Contains(m.Components, []byte(`"custom_id":"`+customID+`"`))
}

// Button is a button of a message's components.
type Button struct {
	CustomID string `json:"custom_id"`
	Label    string `json:"label"`
	// Style is Discord's number: 1 primary, 2 secondary, 3 success, 4
	// danger.
	Style int `json:"style"`
}

type component struct {
	Type       int         `json:"type"`
	Components []component `json:"components"`
	CustomID   string      `json:"custom_id"`
	Label      string      `json:"label"`
	Style      int         `json:"style"`
	URL        string      `json:"url"`
}

// Buttons returns the buttons of the message's action rows, in order.
func (m Message) Buttons() []Button {
	var rows []component
	_ = json.Unmarshal(m.Components, &rows)
	var out []Button
	for _, r := range rows {
		for _, c := range r.Components {
			if c.Type == 2 {
				out = append(out, Button{CustomID: c.CustomID, Label: c.Label, Style: c.Style})
			}
		}
	}
	return out
}

// checkComponents applies Discord's rules for message components: at
// most 5 action rows of at most 5 buttons, each with a label of at most
// 80 characters and (except link buttons) a custom_id of 1 to 100
// characters unique in the message.
func checkComponents(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var rows []component
	if err := json.Unmarshal(raw, &rows); err != nil {
		return fmt.Errorf("components: %v", err)
	}
	if len(rows) > 5 {
		return fmt.Errorf("components: %d action rows, at most 5", len(rows))
	}
	ids := map[string]bool{}
	for _, r := range rows {
		if r.Type != 1 || len(r.Components) == 0 || len(r.Components) > 5 {
			return fmt.Errorf("components: an action row (type 1) holds 1 to 5 components, got type %d with %d", r.Type, len(r.Components))
		}
		for _, c := range r.Components {
			if c.Type != 2 {
				continue
			}
			if c.Style < 1 || c.Style > 5 || len([]rune(c.Label)) > 80 {
				return fmt.Errorf("components: button style %d, label %q", c.Style, c.Label)
			}
			if c.Style == 5 {
				continue
			}
			if c.CustomID == "" || len([]rune(c.CustomID)) > 100 || ids[c.CustomID] {
				return fmt.Errorf("components: custom_id %q (1 to 100 characters, unique)", c.CustomID)
			}
			ids[c.CustomID] = true
		}
	}
	return nil
}

// Callback is an interaction response Mother sent
// (POST /interactions/{id}/{token}/callback).
type Callback struct {
	InteractionID string
	// Type is the response type (6: deferred update, 4: a message ...).
	Type int
	// Data is the raw response data, if any.
	Data json.RawMessage
}

// Followup is a message Mother sent with an interaction's webhook (POST
// /webhooks/{application}/{token}).
type Followup struct {
	InteractionID string
	ChannelID     string
	// UserID is who clicked, the only one to see it if Ephemeral.
	UserID    string
	Content   string
	Ephemeral bool
}

// interaction is a click the fake dispatched.
type interaction struct {
	id, channelID, userID string
	acked                 bool
}

// Request is one REST call the fake received.
type Request struct {
	Method string
	Path   string
	// At is when the call arrived; Status is 0 while it is being handled.
	At     time.Time
	Status int
}

// Options configure a fake.
type Options struct {
	Bot   User
	Guild struct{ ID, Name string }
	// Channels and Members the guild starts with.
	Channels []Channel
	Members  []User
	// HeartbeatInterval sent in HELLO (default 41.25 s).
	HeartbeatInterval time.Duration
	// Token is the bot token the fake accepts (default "test-token").
	Token string
	// MemberRoles gives members guild role ids (user id to role ids): in
	// GET /guilds/{id}/members/{user}, the member list, GUILD_CREATE and
	// the member object of MESSAGE_CREATE, as Discord sends them.
	MemberRoles map[string][]string
}

// Server is the fake.
type Server struct {
	*httptest.Server
	opts Options

	mu        sync.Mutex
	changed   chan struct{}
	channels  map[string]*Channel
	members   []User
	roles     map[string][]string
	messages  map[string][]*Message
	requests  []Request
	limits    []limit
	conns     map[*gwConn]bool
	identify  []json.RawMessage
	resumes   int
	silent    bool
	seq       int64
	lastID    uint64
	sessionID string
	ackCount  int
	// interactions by token; callbacks and followups received.
	interactions map[string]*interaction
	callbacks    []Callback
	followups    []Followup
}

type limit struct {
	method, prefix string
	retryAfter     float64
	n              int
}

// New starts a fake Discord with a bot user, one guild and its channels.
func New(opts Options) *Server {
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = 41250 * time.Millisecond
	}
	if opts.Token == "" {
		opts.Token = "test-token"
	}
	if opts.Bot.ID == "" {
		opts.Bot = User{ID: "900000000000000001", Username: "mother", Bot: true}
	}
	if opts.Guild.ID == "" {
		opts.Guild.ID, opts.Guild.Name = "800000000000000001", "Test Guild"
	}
	s := &Server{
		opts:         opts,
		changed:      make(chan struct{}),
		channels:     map[string]*Channel{},
		members:      append([]User(nil), opts.Members...),
		roles:        map[string][]string{},
		messages:     map[string][]*Message{},
		conns:        map[*gwConn]bool{},
		sessionID:    "fake-session",
		interactions: map[string]*interaction{},
	}
	for _, c := range opts.Channels {
		c := c
		if c.Type == TypeText && c.GuildID == "" {
			c.GuildID = opts.Guild.ID
		}
		s.channels[c.ID] = &c
	}
	for u, rs := range opts.MemberRoles {
		s.roles[u] = append([]string(nil), rs...)
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// SetMemberRoles replaces a member's guild role ids.
func (s *Server) SetMemberRoles(userID string, roles ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roles[userID] = append([]string{}, roles...)
}

// memberLocked is the guild member object of u, with its roles.
func (s *Server) memberLocked(u User) map[string]any {
	roles := s.roles[u.ID]
	if roles == nil {
		roles = []string{}
	}
	return map[string]any{"user": u, "roles": roles, "joined_at": "2024-01-01T00:00:00Z", "deaf": false, "mute": false}
}

// isMemberLocked reports whether id is the bot or a member.
func (s *Server) isMemberLocked(id string) (User, bool) {
	for _, u := range append([]User{s.opts.Bot}, s.members...) {
		if u.ID == id {
			return u, true
		}
	}
	return User{}, false
}

// Bot is the bot user.
func (s *Server) Bot() User { return s.opts.Bot }

// GuildID is the guild's id.
func (s *Server) GuildID() string { return s.opts.Guild.ID }

// notify wakes Wait; call with s.mu held.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Wait blocks until cond (called with the fake locked) is true, failing
// the test after timeout.
func (s *Server) Wait(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ok := cond()
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("discordtest: timed out after %v waiting for %s", timeout, what)
		}
	}
}

// Lock and Unlock let Wait conditions and tests read state consistently.
func (s *Server) Lock()   { s.mu.Lock() }
func (s *Server) Unlock() { s.mu.Unlock() }

// MessagesLocked returns the messages of a channel (the fake locked).
func (s *Server) MessagesLocked(channelID string) []*Message { return s.messages[channelID] }

// Messages returns copies of a channel's messages, oldest first.
func (s *Server) Messages(channelID string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.messages[channelID] {
		out = append(out, *m)
	}
	return out
}

// Channel returns a channel or thread by id.
func (s *Server) Channel(id string) (Channel, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.channels[id]
	if !ok {
		return Channel{}, false
	}
	return *c, true
}

// Requests returns the REST calls received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Identifies returns the IDENTIFY payloads received.
func (s *Server) Identifies() []json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]json.RawMessage(nil), s.identify...)
}

// Sessions is the number of gateway sessions established (identify or
// resume answered).
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessionsLocked()
}

func (s *Server) sessionsLocked() int { return len(s.identify) + s.resumes }

// SessionsLocked is Sessions for Wait conditions (the fake locked).
func (s *Server) SessionsLocked() int { return s.sessionsLocked() }

// RateLimit makes the next n requests whose method matches and whose path
// (after /api/v9) starts with prefix answer 429 with retry_after seconds.
func (s *Server) RateLimit(method, prefix string, retryAfter float64, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits = append(s.limits, limit{method, prefix, retryAfter, n})
}

// DropConnections closes every gateway connection at the TCP level, as a
// network failure would.
func (s *Server) DropConnections() {
	s.mu.Lock()
	conns := make([]*gwConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.ws.UnderlyingConn().Close()
	}
}

// SetSilent makes the gateway stop answering heartbeats and sending
// anything while keeping connections open: it looks connected but
// delivers nothing. New connections are served normally.
func (s *Server) SetSilent(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.silent = v
	for c := range s.conns {
		c.silent = v
	}
}

// Connected is the number of open gateway connections that completed the
// handshake.
func (s *Server) Connected() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ConnectedLocked()
}

// ConnectedLocked is Connected for Wait conditions (the fake locked).
func (s *Server) ConnectedLocked() int {
	n := 0
	for c := range s.conns {
		if c.ready {
			n++
		}
	}
	return n
}

// NewID returns a fresh snowflake (time-ordered).
func (s *Server) NewID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newIDLocked()
}

func (s *Server) newIDLocked() string {
	id := uint64(time.Now().UnixMilli()-1420070400000) << 22
	if id <= s.lastID {
		id = s.lastID + 1
	}
	s.lastID = id
	return strconv.FormatUint(id, 10)
}

// AddChannel adds a channel (a DM, say) to the fake.
func (s *Server) AddChannel(c Channel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels[c.ID] = &c
}

// SayOption tunes Say.
type SayOption func(*Message, *sayCfg)

type sayCfg struct{ offline bool }

// WithAttachment attaches a file served by the fake's CDN.
func WithAttachment(name, contentType string, data []byte) SayOption {
	return func(m *Message, _ *sayCfg) {
		m.Attachments = append(m.Attachments, Attachment{Filename: name, ContentType: contentType, Size: len(data), data: data})
	}
}

// WithVoiceMessage makes the message a voice message, as Discord's
// clients send them: the IS_VOICE_MESSAGE flag and one OGG/Opus
// attachment, voice-message.ogg, with its duration and waveform.
func WithVoiceMessage(data []byte, seconds float64) SayOption {
	return func(m *Message, _ *sayCfg) {
		m.Flags |= 1 << 13
		m.Attachments = append(m.Attachments, Attachment{Filename: "voice-message.ogg", ContentType: "audio/ogg", Size: len(data), data: data,
			DurationSecs: seconds, Waveform: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="})
	}
}

// Offline stores the message without dispatching it (it was posted while
// Mother was not connected).
func Offline() SayOption { return func(_ *Message, c *sayCfg) { c.offline = true } }

// ReplyingTo sets the message_reference.
func ReplyingTo(id string) SayOption { return func(m *Message, _ *sayCfg) { m.ReplyTo = id } }

// Say posts a message from author in a channel (or thread) and dispatches
// MESSAGE_CREATE to connected gateways. Mentions (<@id>) are resolved
// from the bot and the members.
func (s *Server) Say(channelID string, author User, content string, opts ...SayOption) Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := &Message{ID: s.newIDLocked(), ChannelID: channelID, Author: author, Content: content, Timestamp: time.Now().UTC()}
	if c, ok := s.channels[channelID]; ok {
		m.GuildID = c.GuildID
	}
	var cfg sayCfg
	for _, o := range opts {
		o(m, &cfg)
	}
	for i := range m.Attachments {
		a := &m.Attachments[i]
		a.ID = s.newIDLocked()
		a.URL = fmt.Sprintf("%s/cdn/attachments/%s/%s/%s", s.URL, channelID, a.ID, a.Filename)
	}
	for _, u := range append([]User{s.opts.Bot}, s.members...) {
		if strings.Contains(content, "<@"+u.ID+">") || strings.Contains(content, "<@!"+u.ID+">") {
			m.Mentions = append(m.Mentions, u)
		}
	}
	s.messages[channelID] = append(s.messages[channelID], m)
	s.notify()
	if !cfg.offline {
		s.dispatchLocked("MESSAGE_CREATE", s.messageJSON(m))
	}
	return *m
}

// DispatchRaw sends a dispatch with any payload (malformed events too).
func (s *Server) DispatchRaw(event string, data json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dispatchLocked(event, data)
}

// Callbacks returns the interaction responses received.
func (s *Server) Callbacks() []Callback {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Callback(nil), s.callbacks...)
}

// CallbacksLocked is Callbacks for Wait conditions (the fake locked).
func (s *Server) CallbacksLocked() []Callback { return s.callbacks }

// Followups returns the interaction follow-ups received.
func (s *Server) Followups() []Followup {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Followup(nil), s.followups...)
}

// FollowupsLocked is Followups for Wait conditions (the fake locked).
func (s *Server) FollowupsLocked() []Followup { return s.followups }

// Click dispatches a button click (INTERACTION_CREATE, message component)
// on a message by user, and returns the interaction's id.
func (s *Server) Click(channelID, messageID string, user User, customID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channels[channelID]
	id := s.newIDLocked()
	token := "itoken-" + id
	s.interactions[token] = &interaction{id: id, channelID: channelID, userID: user.ID}
	payload := map[string]any{
		"id": id, "application_id": s.opts.Bot.ID, "type": 3, "token": token,
		"channel_id": channelID, "version": 1,
		"data":    map[string]any{"custom_id": customID, "component_type": 2},
		"message": json.RawMessage(s.messageJSON(s.findLocked(channelID, messageID))),
	}
	if c != nil && c.GuildID != "" {
		payload["guild_id"] = c.GuildID
		payload["member"] = map[string]any{"user": user}
	} else {
		payload["user"] = user
	}
	b, _ := json.Marshal(payload)
	s.dispatchLocked("INTERACTION_CREATE", b)
	return id
}

func (s *Server) findLocked(channelID, id string) *Message {
	for _, m := range s.messages[channelID] {
		if m.ID == id {
			return m
		}
	}
	return &Message{ID: id, ChannelID: channelID}
}

func (s *Server) messageJSON(m *Message) json.RawMessage {
	atts := m.Attachments
	if atts == nil {
		atts = []Attachment{}
	}
	mentions := m.Mentions
	if mentions == nil {
		mentions = []User{}
	}
	v := map[string]any{
		"id": m.ID, "channel_id": m.ChannelID, "content": m.Content, "author": m.Author,
		"timestamp": m.Timestamp.Format(time.RFC3339Nano), "attachments": atts, "mentions": mentions,
		"embeds": []any{}, "type": 0, "flags": m.Flags, "tts": false, "mention_everyone": false, "pinned": false, "mention_roles": []string{},
	}
	if m.GuildID != "" {
		v["guild_id"] = m.GuildID
		if u, ok := s.isMemberLocked(m.Author.ID); ok {
			// Discord sends the author's partial member (no user) with a
			// guild message.
			mem := s.memberLocked(u)
			delete(mem, "user")
			v["member"] = mem
		}
	}
	if m.ReplyTo != "" {
		v["message_reference"] = map[string]any{"message_id": m.ReplyTo, "channel_id": m.ChannelID}
		v["type"] = 19
	}
	if len(m.Components) > 0 {
		v["components"] = m.Components
	}
	b, _ := json.Marshal(v)
	return b
}
