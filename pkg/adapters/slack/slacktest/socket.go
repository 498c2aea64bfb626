package slacktest

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
)

// ---- Socket Mode ----

type sockConn struct {
	ws     *websocket.Conn
	out    chan any
	done   chan struct{}
	silent bool
}

func (c *sockConn) send(v any) {
	select {
	case c.out <- v:
	case <-c.done:
	default: // a stuck client loses events
	}
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (s *Server) socket(w http.ResponseWriter, r *http.Request) {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &sockConn{ws: ws, out: make(chan any, 4096), done: make(chan struct{})}
	go s.writer(c)
	c.send(map[string]any{"type": "hello", "num_connections": 1, "debug_info": map[string]any{"host": "fake", "approximate_connection_time": 3600}, "connection_info": map[string]any{"app_id": "A1"}})
	s.mu.Lock()
	c.silent = s.silent
	s.conns[c] = true
	if !c.silent {
		for _, env := range s.pending {
			c.send(env)
		}
		s.pending = nil
	}
	s.notify()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.notify()
		s.mu.Unlock()
		close(c.done)
		ws.Close()
	}()
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var ack struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if json.Unmarshal(data, &ack) == nil && ack.EnvelopeID != "" {
			s.mu.Lock()
			s.acks = append(s.acks, ack.EnvelopeID)
			s.notify()
			s.mu.Unlock()
		}
	}
}

func (s *Server) writer(c *sockConn) {
	ping := time.NewTicker(s.opts.PingInterval)
	defer ping.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-ping.C:
			s.mu.Lock()
			silent := c.silent
			s.mu.Unlock()
			if !silent {
				c.ws.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(5*time.Second))
			}
		case v := <-c.out:
			c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if err := c.ws.WriteJSON(v); err != nil {
				return
			}
		}
	}
}
