package mother

import "time"

// trimDelay is how long Mother must stay idle before she hands freed memory
// back to the operating system (see package memtrim).
const trimDelay = 2 * time.Second

// workAdd counts one queued job (Shutdown waits for it).
func (m *Mother) workAdd() {
	m.work.Add(1)
	m.trimmer.Begin()
}

// workDone marks a job finished. When nothing is left in flight, memory is
// returned to the OS after trimDelay of quiet: a model call through the
// official Ollama client allocates an 8 MB stream buffer, and without this
// the Pi would carry tens of MB of freed pages between conversations.
func (m *Mother) workDone() {
	m.trimmer.End()
	m.work.Done()
}
