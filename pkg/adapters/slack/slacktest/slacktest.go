// Package slacktest is a fake Slack for tests: one loopback HTTP server
// speaking the Web API methods Mother calls (auth.test, users.list,
// conversations.*, chat.postMessage/update/delete/postEphemeral (blocks
// checked against Block Kit's limits), files.uploadV2's three
// steps, file downloads) and Socket Mode (apps.connections.open, then a
// websocket with hello, events_api and interactive envelopes, acks, and
// server PINGs), so the real slack-go client is exercised end to end.
// Tests script users posting, clicking, rate limits (429 with
// Retry-After), dropped and silent sockets, and inspect what Mother did.
//
// It is written from Slack's documented wire format; slack-go's own
// slacktest package targets the retired RTM API and has no Socket Mode.
package slacktest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tokens the fake accepts.
const (
	BotToken = "xoxb-test"
	AppToken = "xapp-test"
)

// User is a workspace member.
type User struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	RealName string `json:"real_name,omitempty"`
	IsBot    bool   `json:"is_bot,omitempty"`
}

// Channel is a conversation.
type Channel struct {
	ID        string `json:"id"`
	Name      string `json:"name,omitempty"`
	IsChannel bool   `json:"is_channel,omitempty"`
	IsIM      bool   `json:"is_im,omitempty"`
	IsPrivate bool   `json:"is_private,omitempty"`
	IsMember  bool   `json:"is_member"`
	// User is the other member of an IM.
	User string `json:"user,omitempty"`
}

// File is an uploaded or shared file.
type File struct {
	ID       string
	Name     string
	Title    string
	Mimetype string
	Data     []byte
	// Subtype is "slack_audio" for an audio clip recorded in Slack, with
	// its DurationMs.
	Subtype    string
	DurationMs int
	// Channel and ThreadTS say where completeUploadExternal shared it.
	Channel, ThreadTS string
}

// Message is a stored message.
type Message struct {
	TS       string
	Channel  string
	User     string
	BotID    string
	Text     string
	ThreadTS string
	// Blocks is the raw blocks JSON last set ("" or "[]" for none).
	Blocks  string
	Files   []*File
	Edits   int
	History []string
	// Sent is each version of the message as posted and edited: its
	// text and blocks (see Notifies).
	Sent    []Message
	Deleted bool
}

// HasButton reports whether the message's blocks hold a button with
// action_id id.
func (m Message) HasButton(id string) bool {
	return strings.Contains(m.Blocks, `"action_id":"`+id+`"`)
}

// Button is a button of a message's actions blocks.
type Button struct {
	BlockID  string
	ActionID string
	Value    string
	Label    string
	// Style is "", "primary" or "danger".
	Style string
}

type textObject struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type block struct {
	Type     string      `json:"type"`
	BlockID  string      `json:"block_id"`
	Text     *textObject `json:"text"`
	Elements []struct {
		Type     string      `json:"type"`
		ActionID string      `json:"action_id"`
		Value    string      `json:"value"`
		Style    string      `json:"style"`
		Text     *textObject `json:"text"`
	} `json:"elements"`
}

// Buttons returns the buttons of the message's actions blocks, in order.
func (m Message) Buttons() []Button {
	var bs []block
	_ = json.Unmarshal([]byte(m.Blocks), &bs)
	var out []Button
	for _, b := range bs {
		if b.Type != "actions" {
			continue
		}
		for _, e := range b.Elements {
			if e.Type == "button" && e.Text != nil {
				out = append(out, Button{BlockID: b.BlockID, ActionID: e.ActionID, Value: e.Value, Label: e.Text.Text, Style: e.Style})
			}
		}
	}
	return out
}

// checkBlocks applies Block Kit's rules to the blocks Mother sends:
// section text (mrkdwn or plain_text) of at most 3,000 characters;
// actions blocks of 1 to 25 elements; buttons with a plain_text label of
// at most 75 characters, a value of at most 2,000, a style of primary,
// danger or none, and an action_id of at most 255 characters unique in
// the message. Slack answers invalid_blocks otherwise.
func checkBlocks(raw string) error {
	if raw == "" {
		return nil
	}
	var bs []block
	if err := json.Unmarshal([]byte(raw), &bs); err != nil {
		return err
	}
	ids := map[string]bool{}
	for _, b := range bs {
		switch b.Type {
		case "section":
			if b.Text == nil || (b.Text.Type != "mrkdwn" && b.Text.Type != "plain_text") || b.Text.Text == "" || len([]rune(b.Text.Text)) > 3000 {
				return fmt.Errorf("section text")
			}
		case "actions":
			if len(b.Elements) == 0 || len(b.Elements) > 25 {
				return fmt.Errorf("actions: %d elements", len(b.Elements))
			}
			for _, e := range b.Elements {
				if e.Type != "button" {
					continue
				}
				if e.Text == nil || e.Text.Type != "plain_text" || e.Text.Text == "" || len([]rune(e.Text.Text)) > 75 ||
					len(e.Value) > 2000 || (e.Style != "" && e.Style != "primary" && e.Style != "danger") ||
					e.ActionID == "" || len(e.ActionID) > 255 || ids[e.ActionID] {
					return fmt.Errorf("button %q", e.ActionID)
				}
				ids[e.ActionID] = true
			}
		}
	}
	return nil
}

// Ephemeral is a message shown to one user only (chat.postEphemeral).
type Ephemeral struct {
	Channel, User, Text, ThreadTS string
}

// Request is one Web API call received.
type Request struct {
	Method string // the API method ("chat.update")
	// At is when the call arrived; Status is 0 while it is being handled.
	At     time.Time
	Status int
}

// Options configure the fake.
type Options struct {
	Bot      User
	Users    []User
	Channels []Channel
	// PingInterval is how often the socket sends PING frames (default 5 s).
	PingInterval time.Duration
	// UserGroups are served by usergroups.list and usergroups.users.list.
	UserGroups []UserGroup
}

// UserGroup is a Slack user group ("@ops") and its members' ids.
type UserGroup struct {
	ID, Handle string
	Users      []string
}

// Server is the fake.
type Server struct {
	*httptest.Server
	opts Options

	mu       sync.Mutex
	changed  chan struct{}
	users    []User
	channels map[string]*Channel
	messages map[string][]*Message
	files    map[string]*File
	requests []Request
	limits   map[string][]time.Duration
	conns    map[*sockConn]bool
	opens    int
	acks     []string
	silent   bool
	// pending holds envelopes sent while no socket was open; like Slack,
	// the fake delivers them once an app connects.
	pending []any
	lastTS  int64
	seq     int
	// ephemerals are the chat.postEphemeral messages received.
	ephemerals []Ephemeral
}

// New starts a fake Slack workspace.
func New(opts Options) *Server {
	if opts.Bot.ID == "" {
		opts.Bot = User{ID: "UBOT", Name: "mother", IsBot: true}
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = 5 * time.Second
	}
	s := &Server{
		opts:     opts,
		changed:  make(chan struct{}),
		users:    append([]User{opts.Bot}, opts.Users...),
		channels: map[string]*Channel{},
		messages: map[string][]*Message{},
		files:    map[string]*File{},
		limits:   map[string][]time.Duration{},
		conns:    map[*sockConn]bool{},
	}
	for _, c := range opts.Channels {
		c := c
		s.channels[c.ID] = &c
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// APIURL is the Web API base URL, for slack.OptionAPIURL and apiURL.
func (s *Server) APIURL() string { return s.URL + "/api/" }

// Bot is the bot user.
func (s *Server) Bot() User { return s.opts.Bot }

func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Lock and Unlock guard state for Wait conditions.
func (s *Server) Lock()   { s.mu.Lock() }
func (s *Server) Unlock() { s.mu.Unlock() }

// Wait blocks until cond (called with the fake locked) holds.
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
			t.Fatalf("slacktest: timed out after %v waiting for %s", timeout, what)
		}
	}
}

// MessagesLocked returns a channel's messages (the fake locked).
func (s *Server) MessagesLocked(channel string) []*Message { return s.messages[channel] }

// Messages returns copies of a channel's messages (thread replies
// included), oldest first.
func (s *Server) Messages(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.messages[channel] {
		out = append(out, *m)
	}
	return out
}

// Thread returns the replies in a thread (without the parent).
func (s *Server) Thread(channel, ts string) []Message {
	var out []Message
	for _, m := range s.Messages(channel) {
		if m.ThreadTS == ts && m.TS != ts {
			out = append(out, m)
		}
	}
	return out
}

// Files returns the files shared so far.
func (s *Server) Files() []File {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []File
	for _, f := range s.files {
		if f.Channel != "" {
			out = append(out, *f)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Requests returns the Web API calls received.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Acks returns the envelope ids acknowledged over the socket.
func (s *Server) Acks() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.acks...)
}

// AcksLocked is Acks for Wait conditions.
func (s *Server) AcksLocked() []string { return s.acks }

// Opens is how many Socket Mode connections were opened.
func (s *Server) Opens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opens
}

// OpensLocked is Opens for Wait conditions.
func (s *Server) OpensLocked() int { return s.opens }

// RateLimit makes the next calls of an API method answer 429 with
// Retry-After, one per wait given (in whole seconds, as Slack sends).
func (s *Server) RateLimit(method string, retryAfter ...time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits[method] = append(s.limits[method], retryAfter...)
}

// DropConnections closes the sockets at the TCP level.
func (s *Server) DropConnections() {
	s.mu.Lock()
	var cs []*sockConn
	for c := range s.conns {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	for _, c := range cs {
		c.ws.UnderlyingConn().Close()
	}
}

// SetSilent stops PINGs and events on open sockets (they look connected
// but deliver nothing); new sockets are served normally.
func (s *Server) SetSilent(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.silent = v
	for c := range s.conns {
		c.silent = v
	}
}

func (s *Server) newTSLocked() string {
	now := time.Now().UnixMicro()
	if now <= s.lastTS {
		now = s.lastTS + 1
	}
	s.lastTS = now
	return fmt.Sprintf("%d.%06d", now/1e6, now%1e6)
}

// IMWith is the id of the IM with user, if there is one.
func (s *Server) IMWith(user string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.channels {
		if c.IsIM && c.User == user {
			return c.ID, true
		}
	}
	return "", false
}

// AddChannel adds a conversation.
func (s *Server) AddChannel(c Channel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels[c.ID] = &c
}

// PostOption tunes Post.
type PostOption func(*Message, *postCfg)

type postCfg struct {
	offline bool
	files   []*File
}

// InThread posts as a reply in the thread of ts.
func InThread(ts string) PostOption { return func(m *Message, _ *postCfg) { m.ThreadTS = ts } }

// AsBot posts as the bot botID (a bot_message with bot_id), as another
// app's bot would.
func AsBot(botID string) PostOption { return func(m *Message, _ *postCfg) { m.BotID = botID } }

// Offline stores without sending events (posted while Mother was away).
func Offline() PostOption { return func(_ *Message, c *postCfg) { c.offline = true } }

// WithFile shares a file with the message.
func WithFile(name, mimetype string, data []byte) PostOption {
	return func(_ *Message, c *postCfg) {
		c.files = append(c.files, &File{Name: name, Mimetype: mimetype, Data: data})
	}
}

// WithAudioClip shares an audio clip as Slack's clients record them
// (subtype slack_audio, with duration_ms).
func WithAudioClip(name, mimetype string, data []byte, durationMs int) PostOption {
	return func(_ *Message, c *postCfg) {
		c.files = append(c.files, &File{Name: name, Mimetype: mimetype, Data: data, Subtype: "slack_audio", DurationMs: durationMs})
	}
}

// Post stores a message from user and sends its events: message (with the
// channel type), and app_mention when it mentions the bot.
func (s *Server) Post(channel, user, text string, opts ...PostOption) Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := &Message{TS: s.newTSLocked(), Channel: channel, User: user, Text: text}
	var cfg postCfg
	for _, o := range opts {
		o(m, &cfg)
	}
	for _, f := range cfg.files {
		s.seq++
		f.ID = fmt.Sprintf("F%04d", s.seq)
		f.Channel = channel
		s.files[f.ID] = f
		m.Files = append(m.Files, f)
	}
	s.messages[channel] = append(s.messages[channel], m)
	s.notify()
	if cfg.offline {
		return *m
	}
	ev := s.messageEventLocked(m)
	s.sendEventLocked(ev)
	if strings.Contains(text, "<@"+s.opts.Bot.ID+">") {
		am := map[string]any{"type": "app_mention", "user": user, "text": text, "ts": m.TS, "channel": channel, "event_ts": m.TS}
		if m.ThreadTS != "" {
			am["thread_ts"] = m.ThreadTS
		}
		s.sendEventLocked(am)
	}
	return *m
}

func (s *Server) channelType(id string) string {
	c := s.channels[id]
	switch {
	case c == nil:
		return "channel"
	case c.IsIM:
		return "im"
	case c.IsPrivate:
		return "group"
	}
	return "channel"
}

func (s *Server) parentUserLocked(channel, threadTS string) string {
	for _, p := range s.messages[channel] {
		if p.TS == threadTS {
			return p.User
		}
	}
	return ""
}

func (s *Server) messageJSONLocked(m *Message) map[string]any {
	v := map[string]any{"type": "message", "user": m.User, "text": m.Text, "ts": m.TS}
	if m.BotID != "" {
		v["bot_id"] = m.BotID
	}
	if m.ThreadTS != "" {
		v["thread_ts"] = m.ThreadTS
		if m.ThreadTS != m.TS {
			v["parent_user_id"] = s.parentUserLocked(m.Channel, m.ThreadTS)
		}
	}
	if len(m.Files) > 0 {
		var fs []map[string]any
		for _, f := range m.Files {
			fj := map[string]any{"id": f.ID, "name": f.Name, "title": f.Name, "mimetype": f.Mimetype, "size": len(f.Data),
				"url_private_download": s.URL + "/files/" + f.ID + "/" + f.Name, "url_private": s.URL + "/files/" + f.ID + "/" + f.Name}
			if f.Subtype != "" {
				fj["subtype"], fj["duration_ms"], fj["media_display_type"] = f.Subtype, f.DurationMs, "audio"
			}
			fs = append(fs, fj)
		}
		v["files"] = fs
		v["subtype"] = "file_share"
	}
	replies := 0
	latest := ""
	for _, r := range s.messages[m.Channel] {
		if r.ThreadTS == m.TS && r.TS != m.TS && !r.Deleted {
			replies++
			latest = r.TS
		}
	}
	if replies > 0 {
		v["reply_count"], v["latest_reply"], v["thread_ts"] = replies, latest, m.TS
	}
	return v
}

func (s *Server) messageEventLocked(m *Message) map[string]any {
	ev := s.messageJSONLocked(m)
	ev["channel"] = m.Channel
	ev["channel_type"] = s.channelType(m.Channel)
	ev["event_ts"] = m.TS
	delete(ev, "reply_count")
	delete(ev, "latest_reply")
	if m.ThreadTS == "" {
		delete(ev, "thread_ts")
	}
	return ev
}

// SendEvent sends any inner event (malformed ones too) in an events_api
// envelope.
func (s *Server) SendEvent(event any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sendEventLocked(event)
}

// SendRaw sends a raw frame on the socket.
func (s *Server) SendRaw(frame string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deliverLocked(json.RawMessage(frame))
}

func (s *Server) sendEventLocked(event any) {
	s.seq++
	env := map[string]any{
		"envelope_id": fmt.Sprintf("env-%d", s.seq), "type": "events_api", "accepts_response_payload": false, "retry_attempt": 0,
		"payload": map[string]any{"token": "verif", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
			"event_id": fmt.Sprintf("Ev%d", s.seq), "event_time": time.Now().Unix(), "event": event},
	}
	s.deliverLocked(env)
}

func (s *Server) deliverLocked(env any) {
	if len(s.conns) == 0 {
		s.pending = append(s.pending, env)
		return
	}
	for c := range s.conns {
		if !c.silent {
			c.send(env)
		}
	}
}

// Ephemerals returns the messages shown to single users so far.
func (s *Server) Ephemerals() []Ephemeral {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Ephemeral(nil), s.ephemerals...)
}

// EphemeralsLocked is Ephemerals for Wait conditions.
func (s *Server) EphemeralsLocked() []Ephemeral { return s.ephemerals }

// Click sends a block_actions interaction: user pressed the button
// actionID on message ts (its value as the message holds it, "stop" if
// none). It returns the envelope id.
func (s *Server) Click(channel, ts, user, actionID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	value, blockID := "stop", "mother"
	for _, m := range s.messages[channel] {
		if m.TS != ts {
			continue
		}
		for _, b := range m.Buttons() {
			if b.ActionID == actionID {
				value, blockID = b.Value, b.BlockID
			}
		}
	}
	name := ""
	for _, u := range s.users {
		if u.ID == user {
			name = u.Name
		}
	}
	s.seq++
	envID := fmt.Sprintf("env-%d", s.seq)
	action := map[string]any{"action_id": actionID, "block_id": blockID, "type": "button", "value": value, "action_ts": s.newTSLocked(),
		"text": map[string]any{"type": "plain_text", "text": "button"}}
	env := map[string]any{
		"envelope_id": envID, "type": "interactive", "accepts_response_payload": false,
		"payload": map[string]any{"type": "block_actions", "user": map[string]any{"id": user, "username": name, "name": name, "team_id": "T1"},
			"channel":   map[string]any{"id": channel},
			"container": map[string]any{"type": "message", "message_ts": ts, "channel_id": channel},
			"message":   map[string]any{"ts": ts, "type": "message"}, "trigger_id": fmt.Sprintf("trig-%d", s.seq),
			"actions": []any{action}},
	}
	s.deliverLocked(env)
	return envID
}

// SendInteractive sends any payload (malformed ones too) in an
// interactive envelope and returns the envelope id.
func (s *Server) SendInteractive(payload any) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	envID := fmt.Sprintf("env-%d", s.seq)
	s.deliverLocked(map[string]any{"envelope_id": envID, "type": "interactive", "accepts_response_payload": false, "payload": payload})
	return envID
}
