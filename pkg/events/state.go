package events

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/mother-chat/mother/pkg/atomicfile"
)

// The watcher's own files under StateDir: an accepted occurrence's marker
// (written before its run is handed to the Sink, removed when the run
// ends) and the event files moved aside.

func (w *Watcher) moveAside(name, sub string) (string, error) {
	stamp := w.o.Clock.Now().UTC().Format("20060102T150405Z")
	dst := filepath.Join(w.o.StateDir, sub, stamp+"-"+name)
	if err := os.Rename(filepath.Join(w.o.Dir, name), dst); err != nil {
		return "", err
	}
	return dst, nil
}

type marker struct {
	Due      time.Time `json:"due"`
	Accepted time.Time `json:"accepted"`
}

func (w *Watcher) markerPath(name string) string {
	return filepath.Join(w.o.StateDir, acceptedDir, name)
}

func (w *Watcher) writeMarker(name string, due time.Time) error {
	b, _ := json.Marshal(marker{Due: due, Accepted: w.o.Clock.Now()})
	return atomicfile.WriteFile(w.markerPath(name), b, 0o600)
}

func (w *Watcher) readMarker(name string) (time.Time, bool) {
	b, err := os.ReadFile(w.markerPath(name))
	if err != nil {
		return time.Time{}, false
	}
	var m marker
	_ = json.Unmarshal(b, &m) // a torn marker still means "accepted"
	return m.Due, true
}

func (w *Watcher) removeMarker(name string) {
	if err := os.Remove(w.markerPath(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		w.logger.Error("cannot remove accepted marker", "file", name, "err", err)
	}
}
