// Package telegramtest is a wire-level fake of the Telegram Bot API for
// tests: an HTTP server that answers getMe, getUpdates (long polling with
// offsets), sendMessage, editMessageText, deleteMessage,
// answerCallbackQuery, getFile and file downloads, sendDocument,
// sendPhoto, sendChatAction, setWebhook and deleteWebhook the way
// api.telegram.org does (JSON answers, multipart or JSON requests), plus
// what tests need to play users: Post a message, Click a button, queue raw
// (malformed) updates, rate-limit a method with 429 and retry_after, drop
// the connection, and read what the bot posted.
//
// MarkdownV2 is checked like Telegram checks it: an unescaped special
// character or an unclosed entity is refused with 400 "can't parse
// entities".
package telegramtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// BotToken is the token the fake accepts.
const BotToken = "123456789:TEST-fake-token_abc"

// Bot is the bot's own account.
var Bot = User{ID: 123456789, IsBot: true, FirstName: "Mother", Username: "mother_bot"}

// User is a Telegram user.
type User struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
	Username  string `json:"username,omitempty"`
}

// Chat is a Telegram chat.
type Chat struct {
	ID      int64  `json:"id"`
	Type    string `json:"type"` // private, group, supergroup
	Title   string `json:"title,omitempty"`
	IsForum bool   `json:"is_forum,omitempty"`
}

// Message is one message in a chat as the fake keeps it.
type Message struct {
	ID     int
	Chat   int64
	Topic  int
	From   User
	Text   string
	Parse  string // parse_mode it was sent with
	Edits  int
	Button bool // carries the Stop keyboard now
	// ReplyTo is the message this one answers (0: none).
	ReplyTo int
	Deleted bool
	Date    time.Time
	// Versions is each text the message had, as sent and edited, with its
	// parse_mode (see Notifies).
	Versions []Version
}

// Version is one text of a message, as the bot sent it.
type Version struct {
	Text  string
	Parse string
}

// Shown is the text as users see it: MarkdownV2 escapes removed.
func (m Message) Shown() string {
	if m.Parse == "MarkdownV2" {
		return plainOf(m.Text)
	}
	return m.Text
}

// Upload is a file the bot sent.
type Upload struct {
	Chat    int64
	Topic   int
	Method  string // sendDocument, sendPhoto or sendVoice
	Name    string
	Data    []byte
	Caption string
	// Duration and ReplyTo are a voice message's duration and the
	// message it answers (reply_parameters).
	Duration int
	ReplyTo  int
}

// Request is one API call the fake answered.
type Request struct {
	Method string
	Status int
	Params map[string]string
}

type file struct {
	id, unique, path, name string
	data                   []byte
}

type update struct {
	id  int64
	raw json.RawMessage
}

// Server is the fake Bot API.
type Server struct {
	*httptest.Server

	mu        sync.Mutex
	changed   chan struct{}
	chats     map[int64]Chat
	users     map[int64]User
	nextMsg   map[int64]int
	messages  []*Message
	updates   []update
	history   []update
	held      []update
	nextUpd   int64
	confirmed int64
	files     map[string]*file
	uploads   []Upload
	requests  []Request
	actions   map[int64]int
	answers   []string
	limits    map[string]int // method -> retry_after seconds, once
	failPolls int
	rejectMD  int
	webhook   string
	secret    string
	hookBusy  bool
	// admins are each chat's administrators (getChatAdministrators); the
	// first is the creator.
	admins map[int64][]int64
}

// New starts a fake on a loopback port; Close it when done.
func New() *Server {
	s := &Server{
		changed:   make(chan struct{}),
		chats:     map[int64]Chat{},
		users:     map[int64]User{Bot.ID: Bot},
		nextMsg:   map[int64]int{},
		files:     map[string]*file{},
		actions:   map[int64]int{},
		limits:    map[string]int{},
		nextUpd:   1000,
		confirmed: 0,
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// APIURL is the apiURL setting that points the adapter here.
func (s *Server) APIURL() string { return s.URL }

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// AddChat makes a chat known (Post needs it).
func (s *Server) AddChat(c Chat) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chats[c.ID] = c
}

// SetAdmins makes users (known by AddUser) the chat's administrators,
// the first its creator, as getChatAdministrators lists them.
func (s *Server) SetAdmins(chatID int64, userIDs ...int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admins == nil {
		s.admins = map[int64][]int64{}
	}
	s.admins[chatID] = append([]int64(nil), userIDs...)
}

// AddUser makes a user known.
func (s *Server) AddUser(u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[u.ID] = u
}

// PostOption shapes a posted message.
type PostOption func(*postCfg)

type postCfg struct {
	offline  bool
	topic    int
	replyTo  int
	file     *file
	photo    bool
	fileSize int64
	// voice and audio send the file as a voice message or an audio file
	// of duration seconds (mime for audio).
	voice, audio bool
	duration     int
	mime         string
}

// Offline posts without the bot hearing it live: the update is held until
// the next Drop, as if it arrived while the bot was disconnected.
func Offline() PostOption { return func(c *postCfg) { c.offline = true } }

// InTopic posts into a forum topic.
func InTopic(thread int) PostOption { return func(c *postCfg) { c.topic = thread } }

// ReplyTo makes the message a reply.
func ReplyTo(id int) PostOption { return func(c *postCfg) { c.replyTo = id } }

// WithDocument attaches a document.
func WithDocument(name string, data []byte) PostOption {
	return func(c *postCfg) { c.file = &file{name: name, data: data} }
}

// WithPhoto attaches a photo.
func WithPhoto(data []byte) PostOption {
	return func(c *postCfg) { c.file = &file{name: "photo.jpg", data: data}; c.photo = true }
}

// WithVoice attaches a voice message (OGG/Opus, as Telegram's clients
// record them) that lasts seconds, as Telegram says in voice.duration.
func WithVoice(data []byte, seconds int) PostOption {
	return func(c *postCfg) {
		c.file = &file{name: "voice.oga", data: data}
		c.voice, c.duration = true, seconds
	}
}

// WithAudio attaches an audio file (a music or recording file sent as
// audio) of type mime that lasts seconds.
func WithAudio(name string, data []byte, mime string, seconds int) PostOption {
	return func(c *postCfg) {
		c.file = &file{name: name, data: data}
		c.audio, c.duration, c.mime = true, seconds, mime
	}
}

// ClaimedSize makes the attachment claim a size (to test limits).
func ClaimedSize(n int64) PostOption { return func(c *postCfg) { c.fileSize = n } }

// Post has user post text in chat and returns the message id.
func (s *Server) Post(chatID, userID int64, text string, opts ...PostOption) int {
	var cfg postCfg
	for _, o := range opts {
		o(&cfg)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.chats[chatID]; !ok {
		panic(fmt.Sprintf("telegramtest: unknown chat %d", chatID))
	}
	u := s.users[userID]
	if u.ID == 0 {
		u = User{ID: userID, FirstName: "User" + strconv.FormatInt(userID, 10)}
	}
	s.nextMsg[chatID]++
	m := &Message{ID: s.nextMsg[chatID], Chat: chatID, Topic: cfg.topic, From: u, Text: text, ReplyTo: cfg.replyTo, Date: time.Now()}
	s.messages = append(s.messages, m)
	msg := s.messageJSONLocked(m)
	if cfg.file != nil {
		delete(msg, "text")
		if text != "" {
			msg["caption"] = text
		}
		f := cfg.file
		f.id = fmt.Sprintf("file-%d-%d", chatID, m.ID)
		f.unique = fmt.Sprintf("u%d%d", -chatID, m.ID)
		f.path = "documents/" + f.id
		s.files[f.id] = f
		size := int64(len(f.data))
		if cfg.fileSize > 0 {
			size = cfg.fileSize
		}
		switch {
		case cfg.voice:
			f.path = "voice/" + f.id + ".oga"
			msg["voice"] = map[string]any{"file_id": f.id, "file_unique_id": f.unique, "duration": cfg.duration, "mime_type": "audio/ogg", "file_size": size}
		case cfg.audio:
			f.path = "music/" + f.id + path.Ext(f.name)
			msg["audio"] = map[string]any{"file_id": f.id, "file_unique_id": f.unique, "duration": cfg.duration, "file_name": f.name, "mime_type": cfg.mime, "file_size": size}
		case cfg.photo:
			msg["photo"] = []map[string]any{
				{"file_id": f.id + "-small", "file_unique_id": f.unique + "s", "width": 90, "height": 90, "file_size": 10},
				{"file_id": f.id, "file_unique_id": f.unique, "width": 800, "height": 600, "file_size": size},
			}
		default:
			msg["document"] = map[string]any{"file_id": f.id, "file_unique_id": f.unique, "file_name": f.name, "mime_type": "text/csv", "file_size": size}
		}
	}
	s.queueLocked(map[string]any{"message": msg}, cfg.offline)
	return m.ID
}

func (s *Server) messageJSONLocked(m *Message) map[string]any {
	c := s.chats[m.Chat]
	msg := map[string]any{
		"message_id": m.ID,
		"date":       m.Date.Unix(),
		"chat":       c,
		"from":       m.From,
		"text":       m.Text,
	}
	if m.Topic != 0 {
		msg["message_thread_id"] = m.Topic
		msg["is_topic_message"] = true
	}
	if m.ReplyTo != 0 {
		for _, r := range s.messages {
			if r.Chat == m.Chat && r.ID == m.ReplyTo {
				msg["reply_to_message"] = map[string]any{"message_id": r.ID, "date": r.Date.Unix(), "chat": c, "from": r.From, "text": r.Text}
			}
		}
	}
	return msg
}

// queueLocked adds an update (with the next update_id) for getUpdates or
// the webhook.
func (s *Server) queueLocked(body map[string]any, offline bool) int64 {
	s.nextUpd++
	body["update_id"] = s.nextUpd
	raw, _ := json.Marshal(body)
	u := update{id: s.nextUpd, raw: raw}
	s.history = append(s.history, u)
	if offline {
		s.held = append(s.held, u)
	} else {
		s.updates = append(s.updates, u)
	}
	s.notifyLocked()
	if s.webhook != "" && !s.hookBusy {
		s.hookBusy = true
		go s.pushWebhook()
	}
	return s.nextUpd
}

// PostRaw queues an update exactly as given (update_id included or not):
// for malformed updates.
func (s *Server) PostRaw(raw string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextUpd++
	u := update{id: s.nextUpd, raw: json.RawMessage(raw)}
	s.history = append(s.history, u)
	s.updates = append(s.updates, u)
	s.notifyLocked()
}

// Unconfirm makes every update after id pending again, as if Telegram
// never got the confirmation (the bot died between handling an update and
// its next poll): only the bot's own stored offset keeps it from handling
// them twice.
func (s *Server) Unconfirm(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pending := map[int64]bool{}
	for _, u := range s.updates {
		pending[u.id] = true
	}
	var again []update
	for _, u := range s.history {
		if u.id > id && u.id <= s.confirmed && !pending[u.id] {
			again = append(again, u)
		}
	}
	s.updates = append(again, s.updates...)
	s.confirmed = min(s.confirmed, id)
	s.notifyLocked()
}

// NextUpdateID is the update_id the next queued update gets.
func (s *Server) NextUpdateID() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextUpd + 1
}

// Click presses the Stop button (callback data data) of message id as
// user, and returns the callback query id.
func (s *Server) Click(chatID int64, msgID int, userID int64, data string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var m *Message
	for _, x := range s.messages {
		if x.Chat == chatID && x.ID == msgID {
			m = x
		}
	}
	if m == nil {
		panic("telegramtest: no such message")
	}
	u := s.users[userID]
	if u.ID == 0 {
		u = User{ID: userID, FirstName: "User"}
	}
	id := fmt.Sprintf("cb-%d", s.nextUpd+1)
	s.queueLocked(map[string]any{"callback_query": map[string]any{
		"id": id, "from": u, "chat_instance": "x", "data": data, "message": s.messageJSONLocked(m),
	}}, false)
	return id
}

// Answers are the callback query answers, as "id:text".
func (s *Server) Answers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.answers...)
}

// Messages lists the messages of a chat (a topic: topic != 0), oldest
// first, deleted ones included.
func (s *Server) Messages(chatID int64, topic int) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.messages {
		if m.Chat == chatID && m.Topic == topic {
			out = append(out, *m)
		}
	}
	return out
}

// BotMessages lists the bot's live (not deleted) messages in a chat or
// topic.
func (s *Server) BotMessages(chatID int64, topic int) []Message {
	var out []Message
	for _, m := range s.Messages(chatID, topic) {
		if m.From.ID == Bot.ID && !m.Deleted {
			out = append(out, m)
		}
	}
	return out
}

// Uploads lists the files the bot sent.
func (s *Server) Uploads() []Upload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Upload(nil), s.uploads...)
}

// Requests lists the calls answered, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// ChatActions counts sendChatAction calls for a chat.
func (s *Server) ChatActions(chatID int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.actions[chatID]
}

// Confirmed is the highest update_id the bot confirmed (by asking for a
// later offset).
func (s *Server) Confirmed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.confirmed
}

// Webhook is the registered webhook URL and secret ("" when polling).
func (s *Server) Webhook() (url, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.webhook, s.secret
}

// RateLimit answers the next call of method with 429 and retry_after.
func (s *Server) RateLimit(method string, retryAfter int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits[method] = retryAfter
}

// RejectMarkdown refuses the next n MarkdownV2 texts as unparsable.
func (s *Server) RejectMarkdown(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejectMD = n
}

// Drop breaks the bot's connection: the pending long poll (or, if none,
// the next one) fails with 502, and messages posted Offline become
// pending.
func (s *Server) Drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failPolls++
	s.updates = append(s.updates, s.held...)
	s.held = nil
	s.notifyLocked()
}

// Wait blocks until cond (called with the fake locked) holds or timeout.
func (s *Server) Wait(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ok := cond()
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return false
		}
	}
}

// ---- the HTTP side ----

type params map[string]string

func (p params) int64(k string) int64 {
	n, _ := strconv.ParseInt(p[k], 10, 64)
	return n
}

func (p params) int(k string) int {
	n, _ := strconv.Atoi(p[k])
	return n
}

// readParams reads multipart, url-encoded or JSON parameters; uploaded
// files come back by field name.
func readParams(r *http.Request) (params, map[string]Upload, error) {
	p := params{}
	files := map[string]Upload{}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, nil, err
	}
	if len(body) == 0 {
		return p, files, nil // a call without parameters (getMe)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	ct := r.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "multipart/form-data"):
		if err := r.ParseMultipartForm(64 << 20); err != nil {
			return nil, nil, err
		}
		for k, v := range r.MultipartForm.Value {
			p[k] = v[0]
		}
		for k, fhs := range r.MultipartForm.File {
			f, err := fhs[0].Open()
			if err != nil {
				return nil, nil, err
			}
			data, _ := io.ReadAll(f)
			f.Close()
			files[k] = Upload{Name: fhs[0].Filename, Data: data}
		}
	case strings.HasPrefix(ct, "application/json"):
		var m map[string]json.RawMessage
		body, _ := io.ReadAll(r.Body)
		if len(body) > 0 {
			if err := json.Unmarshal(body, &m); err != nil {
				return nil, nil, err
			}
		}
		for k, v := range m {
			var str string
			if json.Unmarshal(v, &str) == nil {
				p[k] = str
			} else {
				p[k] = string(v)
			}
		}
	default:
		if err := r.ParseForm(); err != nil {
			return nil, nil, err
		}
		for k, v := range r.Form {
			p[k] = v[0]
		}
	}
	return p, files, nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if rest, ok := strings.CutPrefix(path, "/file/bot"+BotToken+"/"); ok {
		s.mu.Lock()
		var f *file
		for _, x := range s.files {
			if x.path == rest {
				f = x
			}
		}
		s.mu.Unlock()
		if f == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(f.data)
		return
	}
	rest, ok := strings.CutPrefix(path, "/bot")
	tok, method, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		http.NotFound(w, r)
		return
	}
	if tok != BotToken {
		s.answer(w, method, nil, http.StatusUnauthorized, map[string]any{"ok": false, "error_code": 401, "description": "Unauthorized"})
		return
	}
	p, files, err := readParams(r)
	if err != nil {
		s.answer(w, method, p, 400, fail(400, "Bad Request: cannot read parameters: "+err.Error()))
		return
	}
	s.mu.Lock()
	if after, limited := s.limits[method]; limited {
		delete(s.limits, method)
		s.mu.Unlock()
		s.answer(w, method, p, 429, map[string]any{"ok": false, "error_code": 429, "description": fmt.Sprintf("Too Many Requests: retry after %d", after), "parameters": map[string]any{"retry_after": after}})
		return
	}
	s.mu.Unlock()
	if method == "getUpdates" {
		s.getUpdates(w, r, p)
		return
	}
	status, body := s.call(method, p, files)
	s.answer(w, method, p, status, body)
}

func fail(code int, desc string) map[string]any {
	return map[string]any{"ok": false, "error_code": code, "description": desc}
}

func ok(result any) map[string]any { return map[string]any{"ok": true, "result": result} }

func (s *Server) answer(w http.ResponseWriter, method string, p params, status int, body map[string]any) {
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: method, Status: status, Params: p})
	s.notifyLocked()
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request, p params) {
	offset := p.int64("offset")
	timeout := time.Duration(p.int("timeout")) * time.Second
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		if s.webhook != "" {
			s.mu.Unlock()
			s.answer(w, "getUpdates", p, 409, fail(409, "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"))
			return
		}
		if s.failPolls > 0 {
			s.failPolls--
			s.mu.Unlock()
			s.answer(w, "getUpdates", p, 502, fail(502, "Bad Gateway"))
			return
		}
		if offset > 0 {
			// Asking for offset confirms every update before it.
			s.confirmed = max(s.confirmed, offset-1)
			kept := s.updates[:0]
			for _, u := range s.updates {
				if u.id >= offset {
					kept = append(kept, u)
				}
			}
			s.updates = kept
		}
		if len(s.updates) > 0 || timeout <= 0 {
			out := make([]json.RawMessage, 0, len(s.updates))
			for _, u := range s.updates {
				out = append(out, u.raw)
				if len(out) == 100 {
					break
				}
			}
			s.mu.Unlock()
			s.answer(w, "getUpdates", p, 200, ok(out))
			return
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			timeout = 0
		case <-r.Context().Done():
			return
		}
	}
}

// call answers every method but getUpdates.
func (s *Server) call(method string, p params, files map[string]Upload) (int, map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	switch method {
	case "getMe":
		return 200, ok(Bot)
	case "deleteWebhook":
		s.webhook, s.secret = "", ""
		return 200, ok(true)
	case "setWebhook":
		if p["url"] == "" {
			return 400, fail(400, "Bad Request: bad webhook: an HTTPS URL must be provided for webhook")
		}
		s.webhook, s.secret = p["url"], p["secret_token"]
		if len(s.updates) > 0 && !s.hookBusy {
			s.hookBusy = true
			go s.pushWebhook()
		}
		return 200, ok(true)
	case "getChatAdministrators":
		c, known := s.chats[p.int64("chat_id")]
		if !known {
			return 400, fail(400, "Bad Request: chat not found")
		}
		if c.Type == "private" {
			return 400, fail(400, "Bad Request: there are no administrators in the private chat")
		}
		out := []map[string]any{}
		for i, id := range s.admins[c.ID] {
			status := "administrator"
			if i == 0 {
				status = "creator"
			}
			out = append(out, map[string]any{"status": status, "user": s.users[id], "is_anonymous": false, "can_be_edited": false})
		}
		return 200, ok(out)
	case "sendChatAction":
		s.actions[p.int64("chat_id")]++
		return 200, ok(true)
	case "answerCallbackQuery":
		s.answers = append(s.answers, p["callback_query_id"]+":"+p["text"])
		return 200, ok(true)
	case "getFile":
		f, found := s.files[p["file_id"]]
		if !found {
			return 400, fail(400, "Bad Request: invalid file_id")
		}
		return 200, ok(map[string]any{"file_id": f.id, "file_unique_id": f.unique, "file_size": len(f.data), "file_path": f.path})
	case "sendMessage":
		chatID := p.int64("chat_id")
		if _, found := s.chats[chatID]; !found {
			return 400, fail(400, "Bad Request: chat not found")
		}
		text := p["text"]
		if code, desc := s.checkTextLocked(text, p["parse_mode"]); code != 0 {
			return code, fail(code, desc)
		}
		s.nextMsg[chatID]++
		m := &Message{ID: s.nextMsg[chatID], Chat: chatID, Topic: p.int("message_thread_id"), From: Bot, Text: text, Parse: p["parse_mode"], Button: hasButton(p["reply_markup"]), Date: time.Now()}
		m.Versions = []Version{{Text: text, Parse: m.Parse}}
		if rp := p["reply_parameters"]; rp != "" {
			var r struct {
				MessageID int `json:"message_id"`
			}
			json.Unmarshal([]byte(rp), &r)
			m.ReplyTo = r.MessageID
		}
		s.messages = append(s.messages, m)
		return 200, ok(s.messageJSONLocked(m))
	case "editMessageText":
		m := s.findLocked(p.int64("chat_id"), p.int("message_id"))
		if m == nil {
			return 400, fail(400, "Bad Request: message to edit not found")
		}
		if m.From.ID != Bot.ID {
			return 400, fail(400, "Bad Request: message can't be edited")
		}
		text := p["text"]
		if code, desc := s.checkTextLocked(text, p["parse_mode"]); code != 0 {
			return code, fail(code, desc)
		}
		button := hasButton(p["reply_markup"])
		if text == m.Text && button == m.Button {
			return 400, fail(400, "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")
		}
		m.Text, m.Parse, m.Button = text, p["parse_mode"], button
		m.Versions = append(m.Versions, Version{Text: text, Parse: m.Parse})
		m.Edits++
		return 200, ok(s.messageJSONLocked(m))
	case "deleteMessage":
		m := s.findLocked(p.int64("chat_id"), p.int("message_id"))
		if m == nil {
			return 400, fail(400, "Bad Request: message to delete not found")
		}
		m.Deleted = true
		return 200, ok(true)
	case "sendDocument", "sendPhoto", "sendVoice":
		field := "document"
		switch method {
		case "sendPhoto":
			field = "photo"
		case "sendVoice":
			field = "voice"
		}
		f, found := files[field]
		if !found {
			return 400, fail(400, "Bad Request: there is no "+field+" in the request")
		}
		chatID := p.int64("chat_id")
		if _, found := s.chats[chatID]; !found {
			return 400, fail(400, "Bad Request: chat not found")
		}
		f.Chat, f.Topic, f.Method, f.Caption, f.Duration = chatID, p.int("message_thread_id"), method, p["caption"], p.int("duration")
		if method == "sendVoice" && !bytes.HasPrefix(f.Data, []byte("OggS")) {
			return 400, fail(400, "Bad Request: wrong file type: a voice message must be OGG/Opus")
		}
		var rp struct {
			MessageID int `json:"message_id"`
		}
		if json.Unmarshal([]byte(p["reply_parameters"]), &rp) == nil {
			f.ReplyTo = rp.MessageID
		}
		s.uploads = append(s.uploads, f)
		s.nextMsg[chatID]++
		m := &Message{ID: s.nextMsg[chatID], Chat: chatID, Topic: f.Topic, From: Bot, Text: p["caption"], Date: time.Now()}
		s.messages = append(s.messages, m)
		return 200, ok(s.messageJSONLocked(m))
	}
	return 404, fail(404, "Not Found: method not found")
}

func (s *Server) findLocked(chatID int64, id int) *Message {
	for _, m := range s.messages {
		if m.Chat == chatID && m.ID == id && !m.Deleted {
			return m
		}
	}
	return nil
}

func hasButton(markup string) bool {
	return strings.Contains(markup, "callback_data")
}

func (s *Server) checkTextLocked(text, mode string) (int, string) {
	if strings.TrimSpace(text) == "" {
		return 400, "Bad Request: message text is empty"
	}
	if mode == "MarkdownV2" {
		if s.rejectMD > 0 {
			s.rejectMD--
			return 400, "Bad Request: can't parse entities: character '.' is reserved and must be escaped with the preceding '\\'"
		}
		if err := CheckMarkdownV2(text); err != nil {
			return 400, "Bad Request: can't parse entities: " + err.Error()
		}
		text = plainOf(text)
	}
	if n := utf8.RuneCountInString(text); n > 4096 {
		return 400, "Bad Request: message is too long"
	}
	return 0, ""
}

// plainOf is roughly the text a MarkdownV2 message shows (for the length
// check): escapes removed.
func plainOf(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// CheckMarkdownV2 checks text the way Telegram parses MarkdownV2: outside
// code, the characters _*[]()~`>#+-=|{}.! must be escaped unless they
// are markup (* _ ~ || pairs, [text](url), ` and ``` code, > at a line
// start); entities must be closed; inside code only ` and \ are special.
func CheckMarkdownV2(s string) error {
	open := map[string]bool{}
	link := 0 // 1: in [text], 2: expecting (, 3: in (url)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return fmt.Errorf("a lone backslash at the end")
			}
			i++
		case strings.HasPrefix(s[i:], "```"):
			end := strings.Index(s[i+3:], "```")
			if end < 0 {
				return fmt.Errorf("can't find end of pre entity at byte offset %d", i)
			}
			if err := checkCode(s[i+3 : i+3+end]); err != nil {
				return err
			}
			i += 3 + end + 2
		case c == '`':
			end := strings.IndexByte(s[i+1:], '`')
			for end >= 0 && strings.HasSuffix(s[i+1:i+1+end], "\\") && !strings.HasSuffix(s[i+1:i+1+end], "\\\\") {
				next := strings.IndexByte(s[i+2+end:], '`')
				if next < 0 {
					end = -1
					break
				}
				end += 1 + next
			}
			if end < 0 {
				return fmt.Errorf("can't find end of code entity at byte offset %d", i)
			}
			if err := checkCode(s[i+1 : i+1+end]); err != nil {
				return err
			}
			i += 1 + end
		case c == '*' || c == '_' || c == '~':
			open[string(c)] = !open[string(c)]
		case c == '|' && i+1 < len(s) && s[i+1] == '|':
			open["||"] = !open["||"]
			i++
		case c == '[':
			if link != 0 {
				return fmt.Errorf("character '[' is reserved and must be escaped")
			}
			link = 1
		case c == ']' && link == 1:
			link = 2
		case c == '(' && link == 2:
			end := strings.IndexByte(s[i:], ')')
			for end > 0 && s[i+end-1] == '\\' {
				next := strings.IndexByte(s[i+end+1:], ')')
				if next < 0 {
					end = -1
					break
				}
				end += 1 + next
			}
			if end < 0 {
				return fmt.Errorf("can't find end of URL at byte offset %d", i)
			}
			i += end
			link = 0
		case c == '>' && (i == 0 || s[i-1] == '\n'):
		case strings.IndexByte("_*[]()~`>#+-=|{}.!", c) >= 0:
			return fmt.Errorf("character '%c' is reserved and must be escaped with the preceding '\\'", c)
		default:
			if link == 2 {
				return fmt.Errorf("character ']' is reserved and must be escaped")
			}
		}
	}
	for k, v := range open {
		if v {
			return fmt.Errorf("can't find end of %s entity", k)
		}
	}
	if link != 0 {
		return fmt.Errorf("can't find end of a link")
	}
	return nil
}

func checkCode(body string) error {
	for i := 0; i < len(body); i++ {
		if body[i] == '\\' {
			i++
			continue
		}
		if body[i] == '`' {
			return fmt.Errorf("character '`' is reserved in code and must be escaped")
		}
	}
	return nil
}

// pushWebhook posts pending updates to the webhook one at a time, with
// the secret header, dropping each one the bot accepted.
func (s *Server) pushWebhook() {
	for {
		s.mu.Lock()
		if s.webhook == "" || len(s.updates) == 0 {
			s.hookBusy = false
			s.mu.Unlock()
			return
		}
		u, url, secret := s.updates[0], s.webhook, s.secret
		s.mu.Unlock()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(u.raw))
		req.Header.Set("Content-Type", "application/json")
		if secret != "" {
			req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		}
		resp, err := http.DefaultClient.Do(req)
		accepted := err == nil && resp.StatusCode == http.StatusOK
		if resp != nil {
			resp.Body.Close()
		}
		s.mu.Lock()
		if accepted && len(s.updates) > 0 && s.updates[0].id == u.id {
			s.updates = s.updates[1:]
			s.confirmed = max(s.confirmed, u.id)
			s.notifyLocked()
		}
		s.mu.Unlock()
		if !accepted {
			time.Sleep(50 * time.Millisecond)
		}
	}
}
