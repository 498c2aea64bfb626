package confwatch

import "github.com/mother-chat/mother/pkg/config"

// Current is the configuration last applied (only tests ask).
func (w *Watcher) Current() *config.Config {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur
}
