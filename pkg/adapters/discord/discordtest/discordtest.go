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
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
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
	data        []byte
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
	Mentions    []User
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
}

// Server is the fake.
type Server struct {
	*httptest.Server
	opts Options

	mu        sync.Mutex
	changed   chan struct{}
	channels  map[string]*Channel
	members   []User
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
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
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
		"embeds": []any{}, "type": 0, "tts": false, "mention_everyone": false, "pinned": false, "mention_roles": []string{},
	}
	if m.GuildID != "" {
		v["guild_id"] = m.GuildID
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

// ---- REST ----

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/ws/" || r.URL.Path == "/ws":
		s.gateway(w, r)
		return
	case strings.HasPrefix(r.URL.Path, "/cdn/attachments/"):
		s.cdn(w, r)
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/api/v9")
	// Recorded on arrival (status filled in after), so a test that sees a
	// call's effect also sees the call.
	s.mu.Lock()
	i := len(s.requests)
	s.requests = append(s.requests, Request{Method: r.Method, Path: path, At: time.Now()})
	s.mu.Unlock()
	status := s.rest(w, r, path)
	s.mu.Lock()
	s.requests[i].Status = status
	s.notify()
	s.mu.Unlock()
}

func writeJSON(w http.ResponseWriter, status int, v any) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
	return status
}

func notFound(w http.ResponseWriter) int {
	return writeJSON(w, http.StatusNotFound, map[string]any{"message": "Unknown", "code": 10003})
}

func (s *Server) rest(w http.ResponseWriter, r *http.Request, path string) int {
	if r.Header.Get("Authorization") != "Bot "+s.opts.Token && !strings.HasPrefix(path, "/interactions/") {
		return writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "401: Unauthorized", "code": 0})
	}
	s.mu.Lock()
	for i := range s.limits {
		l := &s.limits[i]
		if l.n > 0 && l.method == r.Method && strings.HasPrefix(path, l.prefix) {
			l.n--
			s.mu.Unlock()
			return writeJSON(w, http.StatusTooManyRequests, map[string]any{"message": "You are being rate limited.", "retry_after": l.retryAfter, "global": false})
		}
	}
	s.mu.Unlock()

	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case path == "/gateway" || path == "/gateway/bot":
		return writeJSON(w, http.StatusOK, map[string]any{"url": "ws://" + r.Host + "/ws", "shards": 1,
			"session_start_limit": map[string]int{"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}})
	case path == "/users/@me":
		return writeJSON(w, http.StatusOK, s.opts.Bot)
	case path == "/users/@me/guilds" && r.Method == http.MethodGet:
		return writeJSON(w, http.StatusOK, []map[string]any{{"id": s.opts.Guild.ID, "name": s.opts.Guild.Name, "owner": false, "permissions": "0", "features": []string{}}})
	case len(parts) == 3 && parts[0] == "guilds" && parts[2] == "members" && r.Method == http.MethodGet:
		if parts[1] != s.opts.Guild.ID {
			return writeJSON(w, http.StatusNotFound, map[string]any{"message": "Unknown Guild", "code": 10004})
		}
		return s.listMembers(w)
	case path == "/users/@me/channels" && r.Method == http.MethodPost:
		return s.openDM(w, r)
	case len(parts) == 2 && parts[0] == "channels" && r.Method == http.MethodGet:
		c, ok := s.Channel(parts[1])
		if !ok {
			return notFound(w)
		}
		return writeJSON(w, http.StatusOK, c)
	case len(parts) == 3 && parts[0] == "channels" && parts[2] == "typing":
		w.WriteHeader(http.StatusNoContent)
		return http.StatusNoContent
	case len(parts) == 3 && parts[0] == "channels" && parts[2] == "messages" && r.Method == http.MethodGet:
		return s.listMessages(w, r, parts[1])
	case len(parts) == 3 && parts[0] == "channels" && parts[2] == "messages" && r.Method == http.MethodPost:
		return s.createMessage(w, r, parts[1])
	case len(parts) == 4 && parts[0] == "channels" && parts[2] == "messages" && r.Method == http.MethodPatch:
		return s.editMessage(w, r, parts[1], parts[3])
	case len(parts) == 4 && parts[0] == "channels" && parts[2] == "messages" && r.Method == http.MethodDelete:
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, m := range s.messages[parts[1]] {
			if m.ID == parts[3] {
				m.Deleted = true
				s.notify()
				w.WriteHeader(http.StatusNoContent)
				return http.StatusNoContent
			}
		}
		return notFound(w)
	case len(parts) == 5 && parts[0] == "channels" && parts[2] == "messages" && parts[4] == "threads" && r.Method == http.MethodPost:
		return s.startThread(w, r, parts[1], parts[3])
	case len(parts) == 4 && parts[0] == "interactions" && parts[3] == "callback" && r.Method == http.MethodPost:
		return s.interactionCallback(w, r, parts[1], parts[2])
	case len(parts) == 3 && parts[0] == "webhooks" && r.Method == http.MethodPost:
		return s.followup(w, r, parts[1], parts[2])
	}
	return notFound(w)
}

// openDM answers POST /users/@me/channels (Create DM): the DM channel
// with the recipient, made if there is none yet. Only a member of the
// guild can be written to (as a bot sharing no guild with a user cannot).
func (s *Server) openDM(w http.ResponseWriter, r *http.Request) int {
	var body struct {
		RecipientID string `json:"recipient_id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.RecipientID == "" {
		return writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": 50035})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var to *User
	for i := range s.members {
		if s.members[i].ID == body.RecipientID {
			to = &s.members[i]
		}
	}
	if to == nil {
		return writeJSON(w, http.StatusForbidden, map[string]any{"message": "Cannot send messages to this user", "code": 50007})
	}
	for _, c := range s.channels {
		if c.Type == 1 && len(c.Recipients) == 1 && c.Recipients[0].ID == to.ID {
			return writeJSON(w, http.StatusOK, c)
		}
	}
	c := &Channel{ID: s.newIDLocked(), Type: 1, Recipients: []User{*to}}
	s.channels[c.ID] = c
	return writeJSON(w, http.StatusOK, c)
}

// DMWith is the DM channel with user id, if one was opened.
func (s *Server) DMWith(userID string) (Channel, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.channels {
		if c.Type == 1 && len(c.Recipients) == 1 && c.Recipients[0].ID == userID {
			return *c, true
		}
	}
	return Channel{}, false
}

// listMembers answers GET /guilds/{id}/members: the bot and the members,
// as guild member objects.
func (s *Server) listMembers(w http.ResponseWriter) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []map[string]any{}
	for _, u := range append([]User{s.opts.Bot}, s.members...) {
		out = append(out, map[string]any{"user": u, "roles": []string{}, "joined_at": "2024-01-01T00:00:00Z", "deaf": false, "mute": false})
	}
	return writeJSON(w, http.StatusOK, out)
}

// interactionCallback answers an interaction once, as Discord does.
func (s *Server) interactionCallback(w http.ResponseWriter, r *http.Request, id, token string) int {
	var body struct {
		Type int             `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Type == 0 {
		return writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": 50035})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.interactions[token]
	if !ok || in.id != id {
		return writeJSON(w, http.StatusNotFound, map[string]any{"message": "Unknown interaction", "code": 10062})
	}
	if in.acked {
		return writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Interaction has already been acknowledged.", "code": 40060})
	}
	in.acked = true
	s.callbacks = append(s.callbacks, Callback{InteractionID: id, Type: body.Type, Data: body.Data})
	s.notify()
	w.WriteHeader(http.StatusNoContent)
	return http.StatusNoContent
}

// followup posts a message with an interaction's webhook; Discord takes
// one only after the interaction was answered.
func (s *Server) followup(w http.ResponseWriter, r *http.Request, appID, token string) int {
	var body struct {
		Content string `json:"content"`
		Flags   int    `json:"flags"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Content == "" || len([]rune(body.Content)) > 2000 {
		return writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": 50035})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.interactions[token]
	if !ok || appID != s.opts.Bot.ID || !in.acked {
		return writeJSON(w, http.StatusNotFound, map[string]any{"message": "Unknown Webhook", "code": 10015})
	}
	f := Followup{InteractionID: in.id, ChannelID: in.channelID, UserID: in.userID, Content: body.Content, Ephemeral: body.Flags&(1<<6) != 0}
	s.followups = append(s.followups, f)
	s.notify()
	m := &Message{ID: s.newIDLocked(), ChannelID: in.channelID, Author: s.opts.Bot, Content: body.Content, Timestamp: time.Now().UTC()}
	w.Header().Set("Content-Type", "application/json")
	w.Write(s.messageJSON(m))
	return http.StatusOK
}

func (s *Server) listMessages(w http.ResponseWriter, r *http.Request, channelID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.channels[channelID]; !ok {
		return notFound(w)
	}
	after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	n, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if n <= 0 || n > 100 {
		n = 50
	}
	// Discord: the n messages right after "after", newest first.
	var out []json.RawMessage
	for _, m := range s.messages[channelID] {
		id, _ := strconv.ParseUint(m.ID, 10, 64)
		if m.Deleted || id <= after {
			continue
		}
		out = append(out, s.messageJSON(m))
		if len(out) == n {
			break
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	if out == nil {
		out = []json.RawMessage{}
	}
	return writeJSON(w, http.StatusOK, out)
}

type messageBody struct {
	Content          *string         `json:"content"`
	Components       json.RawMessage `json:"components"`
	MessageReference *struct {
		MessageID string `json:"message_id"`
	} `json:"message_reference"`
	AllowedMentions json.RawMessage `json:"allowed_mentions"`
}

func readBody(r *http.Request) (messageBody, []File, error) {
	var body messageBody
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "multipart/form-data" {
		err := json.NewDecoder(r.Body).Decode(&body)
		return body, nil, err
	}
	var files []File
	mr := multipart.NewReader(r.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return body, nil, err
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return body, nil, err
		}
		if p.FormName() == "payload_json" {
			if err := json.Unmarshal(data, &body); err != nil {
				return body, nil, err
			}
			continue
		}
		files = append(files, File{Name: p.FileName(), ContentType: p.Header.Get("Content-Type"), Data: data})
	}
	return body, files, nil
}

func (s *Server) createMessage(w http.ResponseWriter, r *http.Request, channelID string) int {
	body, files, err := readBody(r)
	if err != nil {
		return writeJSON(w, http.StatusBadRequest, map[string]any{"message": "bad body: " + err.Error(), "code": 50109})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.channels[channelID]
	if !ok {
		return notFound(w)
	}
	content := ""
	if body.Content != nil {
		content = *body.Content
	}
	if content == "" && len(files) == 0 {
		return writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Cannot send an empty message", "code": 50006})
	}
	if err := checkComponents(body.Components); err != nil {
		return writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body: " + err.Error(), "code": 50035})
	}
	if len([]rune(content)) > 2000 {
		return writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": 50035,
			"errors": map[string]any{"content": map[string]any{"_errors": []any{map[string]any{"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}}}}})
	}
	m := &Message{ID: s.newIDLocked(), ChannelID: channelID, GuildID: c.GuildID, Author: s.opts.Bot, Content: content,
		Timestamp: time.Now().UTC(), Components: body.Components, Files: files, AllowedMentions: body.AllowedMentions, History: []string{content}}
	if body.MessageReference != nil {
		m.ReplyTo = body.MessageReference.MessageID
	}
	for _, f := range files {
		m.Attachments = append(m.Attachments, Attachment{ID: s.newIDLocked(), Filename: f.Name, ContentType: f.ContentType, Size: len(f.Data), data: f.Data})
	}
	s.messages[channelID] = append(s.messages[channelID], m)
	s.notify()
	js := s.messageJSON(m)
	// Discord echoes the bot's own messages on the gateway.
	s.dispatchLocked("MESSAGE_CREATE", js)
	w.Header().Set("Content-Type", "application/json")
	w.Write(js)
	return http.StatusOK
}

func (s *Server) editMessage(w http.ResponseWriter, r *http.Request, channelID, id string) int {
	body, _, err := readBody(r)
	if err != nil {
		return writeJSON(w, http.StatusBadRequest, map[string]any{"message": "bad body", "code": 50109})
	}
	if err := checkComponents(body.Components); err != nil {
		return writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body: " + err.Error(), "code": 50035})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.messages[channelID] {
		if m.ID != id || m.Deleted {
			continue
		}
		if body.Content != nil {
			if len([]rune(*body.Content)) > 2000 {
				return writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": 50035})
			}
			m.Content = *body.Content
		}
		if body.Components != nil {
			m.Components = body.Components
		}
		m.Edits++
		m.History = append(m.History, m.Content)
		s.notify()
		js := s.messageJSON(m)
		s.dispatchLocked("MESSAGE_UPDATE", js)
		w.Header().Set("Content-Type", "application/json")
		w.Write(js)
		return http.StatusOK
	}
	return notFound(w)
}

func (s *Server) startThread(w http.ResponseWriter, r *http.Request, channelID, messageID string) int {
	var body struct {
		Name string `json:"name"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	s.mu.Lock()
	defer s.mu.Unlock()
	parent, ok := s.channels[channelID]
	if !ok || parent.Type != TypeText {
		return writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Cannot execute action on this channel type", "code": 50024})
	}
	if _, exists := s.channels[messageID]; exists {
		return writeJSON(w, http.StatusBadRequest, map[string]any{"message": "A thread has already been created for this message", "code": 160004})
	}
	if body.Name == "" || len([]rune(body.Name)) > 100 {
		return writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body (name)", "code": 50035})
	}
	th := &Channel{ID: messageID, Type: TypePublicThread, GuildID: parent.GuildID, Name: body.Name, ParentID: channelID, OwnerID: s.opts.Bot.ID}
	s.channels[messageID] = th
	s.notify()
	b, _ := json.Marshal(th)
	s.dispatchLocked("THREAD_CREATE", b)
	return writeJSON(w, http.StatusCreated, th)
}

func (s *Server) cdn(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/cdn/attachments/"), "/")
	if len(parts) < 2 {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.messages[parts[0]] {
		for _, a := range m.Attachments {
			if a.ID == parts[1] {
				w.Header().Set("Content-Type", a.ContentType)
				w.Write(a.data)
				return
			}
		}
	}
	http.NotFound(w, r)
}

// ---- gateway ----

type gwConn struct {
	ws     *websocket.Conn
	out    chan any // frames to write, in order; a close frame is a closeFrame
	done   chan struct{}
	ready  bool
	silent bool
}

type closeFrame struct {
	code int
	text string
}

// send queues a frame; frames are written in queue order by one writer.
func (c *gwConn) send(v any) {
	select {
	case c.out <- v:
	case <-c.done:
	}
}

func (c *gwConn) writer() {
	for {
		select {
		case <-c.done:
			return
		case v := <-c.out:
			c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if cf, ok := v.(closeFrame); ok {
				c.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(cf.code, cf.text))
				c.ws.Close()
				return
			}
			if err := c.ws.WriteJSON(v); err != nil {
				return
			}
		}
	}
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (s *Server) gateway(w http.ResponseWriter, r *http.Request) {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &gwConn{ws: ws, out: make(chan any, 4096), done: make(chan struct{})}
	go c.writer()
	s.mu.Lock()
	c.silent = s.silent
	s.conns[c] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.notify()
		s.mu.Unlock()
		close(c.done)
		ws.Close()
	}()
	c.send(map[string]any{"op": 10, "d": map[string]any{"heartbeat_interval": s.opts.HeartbeatInterval.Milliseconds()}})
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var f struct {
			Op int             `json:"op"`
			D  json.RawMessage `json:"d"`
		}
		if json.Unmarshal(data, &f) != nil {
			continue
		}
		s.mu.Lock()
		silent := c.silent
		s.mu.Unlock()
		switch f.Op {
		case 1:
			if !silent {
				s.mu.Lock()
				s.ackCount++
				s.mu.Unlock()
				c.send(map[string]any{"op": 11})
			}
		case 2:
			var id struct {
				Token string `json:"token"`
			}
			json.Unmarshal(f.D, &id)
			if id.Token != "Bot "+s.opts.Token {
				c.send(closeFrame{4004, "Authentication failed."})
				continue
			}
			s.mu.Lock()
			s.identify = append(s.identify, f.D)
			s.seq = 0
			s.mu.Unlock()
			s.ready(c)
		case 6:
			s.mu.Lock()
			s.resumes++
			s.seq++
			seq := s.seq
			c.ready = true
			s.notify()
			s.mu.Unlock()
			c.send(map[string]any{"op": 0, "t": "RESUMED", "s": seq, "d": map[string]any{}})
		}
	}
}

func (s *Server) ready(c *gwConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	guild := map[string]any{"id": s.opts.Guild.ID, "unavailable": true}
	c.send(map[string]any{"op": 0, "t": "READY", "s": s.seq, "d": map[string]any{
		"v": 9, "user": s.opts.Bot, "session_id": s.sessionID, "resume_gateway_url": "ws://" + s.Listener.Addr().String() + "/ws",
		"guilds": []any{guild}, "private_channels": []any{}, "application": map[string]any{"id": s.opts.Bot.ID},
	}})
	var chans, threads []Channel
	ids := make([]string, 0, len(s.channels))
	for id := range s.channels {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		ch := s.channels[id]
		if ch.GuildID != s.opts.Guild.ID {
			continue
		}
		if ch.Type == TypePublicThread {
			threads = append(threads, *ch)
		} else {
			chans = append(chans, *ch)
		}
	}
	var members []map[string]any
	for _, u := range append([]User{s.opts.Bot}, s.members...) {
		members = append(members, map[string]any{"user": u, "roles": []string{}, "joined_at": "2024-01-01T00:00:00Z"})
	}
	s.seq++
	c.send(map[string]any{"op": 0, "t": "GUILD_CREATE", "s": s.seq, "d": map[string]any{
		"id": s.opts.Guild.ID, "name": s.opts.Guild.Name, "channels": chans, "threads": threads, "members": members,
		"member_count": len(members), "roles": []any{}, "emojis": []any{}, "unavailable": false,
	}})
	c.ready = true
	s.notify()
}

// dispatchLocked sends an event to every ready, non-silent connection.
func (s *Server) dispatchLocked(event string, data json.RawMessage) {
	s.seq++
	for c := range s.conns {
		if c.ready && !c.silent {
			select {
			case c.out <- map[string]any{"op": 0, "t": event, "s": s.seq, "d": data}:
			default: // a stuck client loses events, as with Discord
			}
		}
	}
}
