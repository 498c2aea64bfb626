package discordtest

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"
)

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
	case len(parts) == 4 && parts[0] == "guilds" && parts[2] == "members" && r.Method == http.MethodGet:
		if parts[1] != s.opts.Guild.ID {
			return writeJSON(w, http.StatusNotFound, map[string]any{"message": "Unknown Guild", "code": 10004})
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		u, ok := s.isMemberLocked(parts[3])
		if !ok {
			return writeJSON(w, http.StatusNotFound, map[string]any{"message": "Unknown Member", "code": 10007})
		}
		return writeJSON(w, http.StatusOK, s.memberLocked(u))
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
		out = append(out, s.memberLocked(u))
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
	// Flags and Attachments: a voice message's flag (1<<13) and its
	// attachment's duration and waveform.
	Flags       int `json:"flags"`
	Attachments []struct {
		ID           json.RawMessage `json:"id"`
		Filename     string          `json:"filename"`
		DurationSecs float64         `json:"duration_secs"`
		Waveform     string          `json:"waveform"`
	} `json:"attachments"`
}

// checkVoice refuses a voice message Discord would refuse: text, not one
// OGG file, no duration or no waveform.
func checkVoice(body messageBody, files []File) string {
	if body.Content != nil && *body.Content != "" {
		return "voice messages cannot have content"
	}
	if len(files) != 1 || len(body.Attachments) != 1 {
		return "a voice message has exactly one attachment"
	}
	if !strings.HasSuffix(files[0].Name, ".ogg") || !strings.HasPrefix(string(files[0].Data), "OggS") {
		return "a voice message's attachment must be an OGG file"
	}
	at := body.Attachments[0]
	if at.DurationSecs <= 0 {
		return "attachments.0.duration_secs: required"
	}
	if wf, err := base64.StdEncoding.DecodeString(at.Waveform); err != nil || len(wf) == 0 || len(wf) > 256 {
		return "attachments.0.waveform: base64 of at most 256 samples"
	}
	return ""
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
	voice := body.Flags&(1<<13) != 0
	if voice {
		if msg := checkVoice(body, files); msg != "" {
			return writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body: " + msg, "code": 50035})
		}
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
	if voice {
		m.Flags = body.Flags
		m.Attachments[0].DurationSecs, m.Attachments[0].Waveform = body.Attachments[0].DurationSecs, body.Attachments[0].Waveform
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
