package mother

import "time"

// trimDelay is how long Mother must stay idle before she hands freed memory
// back to the operating system (see package memtrim).
const trimDelay = 2 * time.Second

// codeReleaseDelay is how long she must stay idle before the pages of her
// binary that a burst of work mapped go back to the page cache (issue
// 45: most of her RSS after a burst), ahead of the heap's trim. A message
// after that quiet maps again what it runs, as one after trimDelay did.
const codeReleaseDelay = 500 * time.Millisecond

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

// Busy counts work done for Mother outside a job (the history index's
// indexing, pkg/recall): begin it, and call the func it returns when done.
// Her memory and the code pages it touched are handed back after the
// same quiet as a job's.
func (m *Mother) Busy() (end func()) {
	m.trimmer.Begin()
	return m.trimmer.End
}
