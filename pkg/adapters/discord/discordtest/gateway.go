package discordtest

import (
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"github.com/gorilla/websocket"
)

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
		members = append(members, s.memberLocked(u))
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
