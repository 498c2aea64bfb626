package mother

import (
	"github.com/mother-chat/mother/pkg/chat"
)

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
