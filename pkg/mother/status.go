package mother

import (
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/model"
)

// Metrics hears what Mother's core can count; pkg/metrics implements it
// (nil in Options: nothing is counted). Calls must be quick.
type Metrics interface {
	// MessageIn: a message from someone else was received and logged.
	MessageIn(adapter string)
	// MessageOut: Mother posted a message (an answer, a notice, a chick's
	// result, a file).
	MessageOut(adapter string)
	// RunEnded: one of Mother's own runs ended (kind "message", "event"
	// or "chick", stop the agent's stop reason) after d, using her own
	// model's tokens.
	RunEnded(adapter string, kind JobKind, stop string, d time.Duration, usage model.Usage)
}

type nopMetrics struct{}

func (nopMetrics) MessageIn(string)                                             {}
func (nopMetrics) MessageOut(string)                                            {}
func (nopMetrics) RunEnded(string, JobKind, string, time.Duration, model.Usage) {}

// AdapterReports says how each adapter's connection is, in the order they
// were added. An adapter that cannot tell (no chat.StatusReporter) counts
// as connected once Mother has started.
func (m *Mother) AdapterReports() []chat.AdapterReport {
	m.mu.Lock()
	names := append([]string(nil), m.order...)
	m.mu.Unlock()
	started := false
	select {
	case <-m.ready:
		started = m.ctx.Err() == nil
	default:
	}
	out := make([]chat.AdapterReport, 0, len(names))
	for _, n := range names {
		a, _ := m.Adapter(n)
		typ := "cli"
		if ac, ok := m.cfg.Adapters[n]; ok && ac.Type != "" {
			typ = ac.Type
		}
		r := chat.AdapterReport{Name: n, Type: typ}
		switch sr, ok := a.(chat.StatusReporter); {
		case ok:
			r.Status = sr.Status()
		case started:
			r.Status = chat.AdapterStatus{State: chat.ConnConnected}
		default:
			r.Status = chat.AdapterStatus{State: chat.ConnDown}
		}
		out = append(out, r)
	}
	return out
}

// QueueDepths is the number of jobs waiting (not running) per adapter,
// over all its channels. Every added adapter is in the map.
func (m *Mother) QueueDepths() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int, len(m.order))
	for _, n := range m.order {
		out[n] = 0
	}
	for _, cs := range m.channels {
		out[cs.adapter.Name()] += len(cs.pending)
	}
	return out
}
