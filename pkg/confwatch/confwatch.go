// Package confwatch reloads <data>/config.json while Mother runs: when the
// file changes (fsnotify on the data directory, so an editor's rename-save
// is seen, debounced so a half-written file is not read) or when asked to
// (SIGHUP). Each valid new configuration goes to a callback; an invalid
// one is logged with every problem and the running configuration stays.
package confwatch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
)

// Options configure a Watcher.
type Options struct {
	// Dir is the data directory holding config.json.
	Dir string
	// Current is the configuration Mother started with.
	Current *config.Config
	// Load reads the configuration (default config.Load(Dir, os.Getenv)).
	Load func() (*config.Config, error)
	// Apply receives each new valid configuration with the previous one.
	// Calls never overlap.
	Apply func(ctx context.Context, old, cur *config.Config)
	// Debounce is the quiet time after the last change before the file is
	// read (default 300ms).
	Debounce time.Duration
	Clock    clock.Clock
	Logger   *slog.Logger
}

// Watcher watches config.json. Create with New, then Start.
type Watcher struct {
	opts   Options
	path   string
	logger *slog.Logger

	mu      sync.Mutex // serialises reloads
	cur     *config.Config
	lastSum [32]byte

	timerMu sync.Mutex
	timer   clock.Timer

	closeWatch func() error
	ctx        context.Context
	cancel     context.CancelFunc
	done       chan struct{}

	// openWatch starts watching a directory (fsnotify); a test replaces
	// it to feed the loop events of its own.
	openWatch func(dir string) (fileWatch, error)
}

// fileWatch is what the watcher reads from a directory watch: its events,
// its errors and how to end it.
type fileWatch struct {
	events <-chan fsnotify.Event
	errors <-chan error
	close  func() error
}

// watchDir watches dir with fsnotify.
func watchDir(dir string) (fileWatch, error) {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return fileWatch{}, err
	}
	if err := fsw.Add(dir); err != nil {
		fsw.Close()
		return fileWatch{}, err
	}
	return fileWatch{events: fsw.Events, errors: fsw.Errors, close: fsw.Close}, nil
}

// New returns a watcher; nothing happens until Start.
func New(opts Options) *Watcher {
	if opts.Load == nil {
		dir := opts.Dir
		opts.Load = func() (*config.Config, error) { return config.Load(dir, os.Getenv) }
	}
	if opts.Apply == nil {
		opts.Apply = func(context.Context, *config.Config, *config.Config) {}
	}
	if opts.Debounce <= 0 {
		opts.Debounce = 300 * time.Millisecond
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{
		opts: opts, path: filepath.Join(opts.Dir, config.File),
		logger: opts.Logger.With("component", "confwatch"),
		cur:    opts.Current,
		done:   make(chan struct{}),

		openWatch: watchDir,
	}
	w.lastSum, _ = w.sum()
	return w
}

func (w *Watcher) sum() ([32]byte, error) {
	b, err := os.ReadFile(w.path)
	if errors.Is(err, os.ErrNotExist) {
		return sha256.Sum256(nil), nil
	}
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(b), nil
}

// Start watches the data directory until ctx ends or Stop.
func (w *Watcher) Start(ctx context.Context) error {
	fw, err := w.openWatch(w.opts.Dir)
	if err != nil {
		return fmt.Errorf("watch config: %s: %w", w.opts.Dir, err)
	}
	w.closeWatch = fw.close
	w.ctx, w.cancel = context.WithCancel(ctx)
	go w.loop(fw.events, fw.errors)
	return nil
}

func (w *Watcher) loop(events <-chan fsnotify.Event, errs <-chan error) {
	defer close(w.done)
	for {
		select {
		case <-w.ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if filepath.Base(ev.Name) != config.File || ev.Op == fsnotify.Chmod {
				continue
			}
			w.schedule()
		case err, ok := <-errs:
			if !ok {
				return
			}
			w.logger.Warn("config watch error", "err", err)
		}
	}
}

// schedule (re)starts the debounce timer.
func (w *Watcher) schedule() {
	w.timerMu.Lock()
	defer w.timerMu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.timer = w.opts.Clock.AfterFunc(w.opts.Debounce, func() {
		if w.ctx.Err() != nil {
			return
		}
		if _, err := w.reload(false); err != nil {
			w.logger.Error("config.json changed but is not valid; keeping the running configuration", "err", err)
		}
	})
}

// Reload reads config.json now and applies it even if the file did not
// change (SIGHUP). The error says why nothing was applied.
func (w *Watcher) Reload() error {
	_, err := w.reload(true)
	if err != nil {
		w.logger.Error("config.json not reloaded; keeping the running configuration", "err", err)
	}
	return err
}

func (w *Watcher) reload(force bool) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	sum, err := w.sum()
	if err != nil {
		return false, fmt.Errorf("read %s: %w", w.path, err)
	}
	if !force && bytes.Equal(sum[:], w.lastSum[:]) {
		return false, nil
	}
	cfg, err := w.opts.Load()
	if err != nil {
		return false, err
	}
	w.lastSum = sum
	old := w.cur
	w.cur = cfg
	w.logger.Info("config.json reloaded", "forced", force)
	if old != nil {
		if stale := Changed(old, cfg, Reloadable...); len(stale) > 0 {
			w.logger.Warn("config.json changes that take effect only after a restart", "fields", strings.Join(stale, ", "))
		}
	}
	ctx := w.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	w.opts.Apply(ctx, old, cfg)
	return true, nil
}

// Stop ends the watching; a pending debounced reload is dropped.
func (w *Watcher) Stop() {
	if w.cancel == nil {
		return
	}
	w.cancel()
	w.closeWatch()
	<-w.done
	w.timerMu.Lock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.timerMu.Unlock()
}

// Reloadable are the fields applied without a restart.
var Reloadable = []string{"mcpServers", "chicks.hostTools", "chicks.egress"}

// Changed lists the fields (top-level sections, and chicks' fields one
// level down) that differ between two configurations, skipping the given
// ones.
func Changed(a, b *config.Config, skip ...string) []string {
	var out []string
	diff(reflect.ValueOf(*a), reflect.ValueOf(*b), "", 2, skip, &out)
	return out
}

func diff(a, b reflect.Value, path string, depth int, skip []string, out *[]string) {
	t := a.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		if path != "" {
			name = path + "." + name
		}
		skipped := false
		for _, s := range skip {
			if s == name {
				skipped = true
			}
		}
		if skipped {
			continue
		}
		fa, fb := a.Field(i), b.Field(i)
		if reflect.DeepEqual(fa.Interface(), fb.Interface()) {
			continue
		}
		if depth > 1 && fa.Kind() == reflect.Struct && hasSkipUnder(name, skip) {
			diff(fa, fb, name, depth-1, skip, out)
			continue
		}
		*out = append(*out, name)
	}
}

func hasSkipUnder(prefix string, skip []string) bool {
	for _, s := range skip {
		if strings.HasPrefix(s, prefix+".") {
			return true
		}
	}
	return false
}
