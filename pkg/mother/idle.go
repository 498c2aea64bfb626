package mother

import (
	"runtime/debug"
	"time"
)

// trimDelay is how long Mother must stay idle before she hands freed memory
// back to the operating system.
const trimDelay = 2 * time.Second

// workAdd counts one queued job (Idle waits for it).
func (m *Mother) workAdd() {
	m.work.Add(1)
	m.active.Add(1)
}

// workDone marks a job finished. When nothing is left in flight, memory is
// returned to the OS after trimDelay of quiet: a model call through the
// official Ollama client allocates an 8 MB stream buffer, and without this
// the Pi would carry tens of MB of freed pages between conversations.
func (m *Mother) workDone() {
	if m.active.Add(-1) == 0 {
		m.scheduleTrim()
	}
	m.work.Done()
}

// scheduleTrim arms (or re-arms) the idle trim.
func (m *Mother) scheduleTrim() {
	m.trimMu.Lock()
	defer m.trimMu.Unlock()
	if m.trim == nil {
		m.trim = time.AfterFunc(trimDelay, m.trimIfIdle)
	} else {
		m.trim.Reset(trimDelay)
	}
}

// trimIfIdle returns freed heap to the OS and unmaps the code pages of
// Mother's binary (see releaseCode) when nothing is in flight.
func (m *Mother) trimIfIdle() {
	if m.active.Load() == 0 {
		debug.FreeOSMemory()
		if err := releaseCode(); err != nil {
			m.logger.Debug("code pages not released", "err", err)
		}
	}
}
