package slacktest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ---- Web API ----

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/socket":
		s.socket(w, r)
		return
	case strings.HasPrefix(r.URL.Path, "/files/"):
		s.download(w, r)
		return
	case strings.HasPrefix(r.URL.Path, "/upload/"):
		s.upload(w, r)
		return
	}
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	// Recorded on arrival (status filled in after), so a test that sees a
	// call's effect also sees the call.
	s.mu.Lock()
	i := len(s.requests)
	s.requests = append(s.requests, Request{Method: method, At: time.Now()})
	s.mu.Unlock()
	status := s.api(w, r, method)
	s.mu.Lock()
	s.requests[i].Status = status
	s.notify()
	s.mu.Unlock()
}

func reply(w http.ResponseWriter, v map[string]any) int {
	if _, ok := v["ok"]; !ok {
		v["ok"] = true
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
	return http.StatusOK
}

func fail(w http.ResponseWriter, code string) int {
	return reply(w, map[string]any{"ok": false, "error": code})
}

func token(r *http.Request) string {
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		return strings.TrimPrefix(h, "Bearer ")
	}
	return r.Form.Get("token")
}

func (s *Server) api(w http.ResponseWriter, r *http.Request, method string) int {
	if err := r.ParseMultipartForm(32 << 20); err != nil && err != http.ErrNotMultipart {
		return fail(w, "invalid_form_data")
	}
	want := BotToken
	if method == "apps.connections.open" {
		want = AppToken
	}
	if token(r) != want {
		return fail(w, "invalid_auth")
	}
	s.mu.Lock()
	if waits := s.limits[method]; len(waits) > 0 {
		s.limits[method] = waits[1:]
		s.mu.Unlock()
		w.Header().Set("Retry-After", strconv.Itoa(int(waits[0].Seconds())))
		w.WriteHeader(http.StatusTooManyRequests)
		return http.StatusTooManyRequests
	}
	s.mu.Unlock()
	f := r.Form.Get
	switch method {
	case "auth.test":
		return reply(w, map[string]any{"url": "https://fake.slack.com/", "team": "Fake", "user": s.opts.Bot.Name, "team_id": "T1", "user_id": s.opts.Bot.ID, "bot_id": "B1"})
	case "apps.connections.open":
		s.mu.Lock()
		s.opens++
		n := s.opens
		s.notify()
		s.mu.Unlock()
		return reply(w, map[string]any{"url": fmt.Sprintf("ws://%s/socket?ticket=%d", r.Host, n)})
	case "users.list":
		s.mu.Lock()
		defer s.mu.Unlock()
		var ms []map[string]any
		for _, u := range s.users {
			ms = append(ms, map[string]any{"id": u.ID, "name": u.Name, "real_name": u.RealName, "is_bot": u.IsBot,
				"profile": map[string]any{"real_name": u.RealName, "display_name": u.RealName}})
		}
		return reply(w, map[string]any{"members": ms, "response_metadata": map[string]any{"next_cursor": ""}})
	case "usergroups.list":
		// include_users adds each group's members, as Slack does.
		var gs []map[string]any
		for _, g := range s.opts.UserGroups {
			v := map[string]any{"id": g.ID, "team_id": "T1", "handle": g.Handle, "name": g.Handle, "user_count": len(g.Users)}
			if f("include_users") == "true" || f("include_users") == "1" {
				v["users"] = g.Users
			}
			gs = append(gs, v)
		}
		return reply(w, map[string]any{"usergroups": gs})
	case "usergroups.users.list":
		for _, g := range s.opts.UserGroups {
			if g.ID == f("usergroup") {
				return reply(w, map[string]any{"users": g.Users})
			}
		}
		return fail(w, "no_such_subteam")
	case "users.info":
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, u := range s.users {
			if u.ID == f("user") {
				return reply(w, map[string]any{"user": map[string]any{"id": u.ID, "name": u.Name, "real_name": u.RealName, "profile": map[string]any{"real_name": u.RealName}}})
			}
		}
		return fail(w, "user_not_found")
	case "conversations.list":
		s.mu.Lock()
		defer s.mu.Unlock()
		var cs []Channel
		for _, c := range s.channels {
			cs = append(cs, *c)
		}
		sort.Slice(cs, func(i, j int) bool { return cs[i].ID < cs[j].ID })
		return reply(w, map[string]any{"channels": cs, "response_metadata": map[string]any{"next_cursor": ""}})
	case "conversations.info":
		s.mu.Lock()
		defer s.mu.Unlock()
		if c, ok := s.channels[f("channel")]; ok {
			return reply(w, map[string]any{"channel": c})
		}
		return fail(w, "channel_not_found")
	case "conversations.open":
		// The DM with one user: the IM there is, or a new one.
		s.mu.Lock()
		defer s.mu.Unlock()
		user := f("users")
		known := false
		for _, u := range s.users {
			known = known || u.ID == user
		}
		if !known || strings.Contains(user, ",") {
			return fail(w, "user_not_found")
		}
		for _, c := range s.channels {
			if c.IsIM && c.User == user {
				return reply(w, map[string]any{"channel": map[string]any{"id": c.ID}, "already_open": true})
			}
		}
		c := &Channel{ID: "D" + user, IsIM: true, IsMember: true, User: user}
		s.channels[c.ID] = c
		return reply(w, map[string]any{"channel": map[string]any{"id": c.ID}})
	case "conversations.history":
		return s.history(w, f("channel"), f("oldest"), "")
	case "conversations.replies":
		return s.history(w, f("channel"), f("oldest"), f("ts"))
	case "chat.postMessage":
		return s.postMessage(w, r)
	case "chat.update":
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, m := range s.messages[f("channel")] {
			if m.TS == f("ts") && !m.Deleted {
				if len([]rune(f("text"))) > 40000 {
					return fail(w, "msg_too_long")
				}
				if _, ok := r.Form["blocks"]; ok {
					if checkBlocks(f("blocks")) != nil {
						return fail(w, "invalid_blocks")
					}
					m.Blocks = f("blocks")
				}
				m.Text = f("text")
				m.Edits++
				m.History = append(m.History, m.Text)
				m.Sent = append(m.Sent, Message{Text: m.Text, Blocks: m.Blocks})
				s.notify()
				return reply(w, map[string]any{"channel": m.Channel, "ts": m.TS, "text": m.Text})
			}
		}
		return fail(w, "message_not_found")
	case "chat.postEphemeral":
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.channels[f("channel")]; !ok {
			return fail(w, "channel_not_found")
		}
		if f("user") == "" {
			return fail(w, "user_not_in_channel")
		}
		if f("text") == "" && f("blocks") == "" {
			return fail(w, "no_text")
		}
		s.ephemerals = append(s.ephemerals, Ephemeral{Channel: f("channel"), User: f("user"), Text: f("text"), ThreadTS: f("thread_ts")})
		s.notify()
		return reply(w, map[string]any{"message_ts": s.newTSLocked()})
	case "chat.delete":
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, m := range s.messages[f("channel")] {
			if m.TS == f("ts") {
				m.Deleted = true
				s.notify()
				return reply(w, map[string]any{"channel": m.Channel, "ts": m.TS})
			}
		}
		return fail(w, "message_not_found")
	case "files.getUploadURLExternal":
		s.mu.Lock()
		defer s.mu.Unlock()
		s.seq++
		id := fmt.Sprintf("F%04d", s.seq)
		s.files[id] = &File{ID: id, Name: f("filename")}
		return reply(w, map[string]any{"upload_url": s.URL + "/upload/" + id, "file_id": id})
	case "files.completeUploadExternal":
		var list []struct{ ID, Title string }
		if err := json.Unmarshal([]byte(f("files")), &list); err != nil {
			return fail(w, "invalid_arguments")
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		var out []map[string]any
		for _, it := range list {
			file, ok := s.files[it.ID]
			if !ok || file.Data == nil {
				return fail(w, "file_not_found")
			}
			ch := f("channel_id")
			if ch == "" {
				ch = strings.Split(f("channels"), ",")[0]
			}
			if _, ok := s.channels[ch]; !ok {
				return fail(w, "channel_not_found")
			}
			file.Channel, file.ThreadTS, file.Title = ch, f("thread_ts"), it.Title
			out = append(out, map[string]any{"id": file.ID, "title": it.Title})
		}
		s.notify()
		return reply(w, map[string]any{"files": out})
	}
	return fail(w, "unknown_method")
}

func (s *Server) history(w http.ResponseWriter, channel, oldest, thread string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.channels[channel]; !ok {
		return fail(w, "channel_not_found")
	}
	old, _ := strconv.ParseFloat(oldest, 64)
	var out []map[string]any
	for _, m := range s.messages[channel] {
		ts, _ := strconv.ParseFloat(m.TS, 64)
		if m.Deleted {
			continue
		}
		if thread == "" && m.ThreadTS != "" && m.ThreadTS != m.TS {
			continue // replies are not in the channel history
		}
		if thread != "" && m.ThreadTS != thread && m.TS != thread {
			continue
		}
		if oldest != "" && ts <= old && m.TS != thread {
			continue
		}
		out = append(out, s.messageJSONLocked(m))
	}
	if thread == "" {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 { // newest first
			out[i], out[j] = out[j], out[i]
		}
	}
	if out == nil {
		out = []map[string]any{}
	}
	return reply(w, map[string]any{"messages": out, "has_more": false, "response_metadata": map[string]any{"next_cursor": ""}})
}

func (s *Server) postMessage(w http.ResponseWriter, r *http.Request) int {
	f := r.Form.Get
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := f("channel")
	if _, ok := s.channels[ch]; !ok {
		return fail(w, "channel_not_found")
	}
	if f("text") == "" && f("blocks") == "" {
		return fail(w, "no_text")
	}
	if len([]rune(f("text"))) > 40000 {
		return fail(w, "msg_too_long")
	}
	if checkBlocks(f("blocks")) != nil {
		return fail(w, "invalid_blocks")
	}
	m := &Message{TS: s.newTSLocked(), Channel: ch, User: s.opts.Bot.ID, BotID: "B1", Text: f("text"), ThreadTS: f("thread_ts"), Blocks: f("blocks"), History: []string{f("text")}}
	m.Sent = []Message{{Text: m.Text, Blocks: m.Blocks}}
	s.messages[ch] = append(s.messages[ch], m)
	s.notify()
	// Slack sends the bot its own messages as events too.
	s.sendEventLocked(s.messageEventLocked(m))
	return reply(w, map[string]any{"channel": ch, "ts": m.TS, "message": s.messageJSONLocked(m)})
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/upload/")
	file, hdr, err := r.FormFile("file")
	if err != nil {
		http.Error(w, "no file", http.StatusBadRequest)
		return
	}
	defer file.Close()
	data, _ := io.ReadAll(file)
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[id]
	if !ok {
		http.Error(w, "unknown upload", http.StatusNotFound)
		return
	}
	f.Data = data
	if f.Name == "" {
		f.Name = hdr.Filename
	}
	fmt.Fprintf(w, "OK - %d", len(data))
}

func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+BotToken {
		http.Error(w, "not authed", http.StatusUnauthorized)
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/files/"), "/")
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[parts[0]]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", f.Mimetype)
	w.Write(f.Data)
}
