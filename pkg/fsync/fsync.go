// Package fsync makes files durable with fsync(2) and counts every call by
// file kind ("log", "context", "chick_events", ...), for the
// mother_store_fsyncs_total metric and the bench. It is the one place
// Mother's stores call fsync, so the count is complete for them.
//
// It is also where a failed write or fsync is heard: File reports its own
// failures, and the writers report theirs (Report), to the one hook the
// daemon sets (OnFailure: the disk monitor, which tells a full or failing
// disk from other errors). Tests make fsyncs fail with InjectFault.
//
// A test hook lets an end-to-end test kill a real process between a
// batch's write and its fsync: with MOTHER_TEST_PAUSE_BEFORE_FSYNC set to
// "<kind>:<n>", the n-th fsync of that kind (counting from 1) announces
// itself on stderr with a line starting "fsync paused: " and then blocks
// forever, for the test to SIGKILL the process. Unset (always in
// production), the hook costs one comparison.
package fsync

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Kinds of files, for the metric's label. Callers may use others.
const (
	KindLog         = "log"          // a channel's log.jsonl
	KindContext     = "context"      // a channel's context.jsonl and its archive
	KindChickEvents = "chick_events" // a chick's events.jsonl
	KindChicks      = "chicks"       // chicks.jsonl, the chick records
	KindUsage       = "usage"        // the broker's usage ledger
	KindReplace     = "replace"      // a file replaced through temp file and rename
	KindDir         = "dir"          // a directory, after a rename or create in it
	KindAttachment  = "attachment"   // an attachment or uploaded file
	KindInflight    = "inflight"     // a channel's in-flight marker
	KindOther       = "other"
)

var counts sync.Map // kind -> *atomic.Uint64

func counter(kind string) *atomic.Uint64 {
	if c, ok := counts.Load(kind); ok {
		return c.(*atomic.Uint64)
	}
	c, _ := counts.LoadOrStore(kind, new(atomic.Uint64))
	return c.(*atomic.Uint64)
}

// File fsyncs f and counts it under kind.
//
// It yields first: the goroutines this one has just made runnable (the
// render of the events just written, the run of the message just logged)
// are queued on this goroutine's P, and an fsync blocks that P until the
// runtime takes it back from the syscall, which with every P busy can be
// milliseconds. Yielding lets them run first; the fsync starts a few
// microseconds later.
func File(f *os.File, kind string) error {
	beforeSync(kind)
	counter(kind).Add(1)
	runtime.Gosched()
	if err := injected(f.Name()); err != nil {
		err = &os.PathError{Op: "sync", Path: f.Name(), Err: err}
		Report(f.Name(), err)
		return err
	}
	err := f.Sync()
	if err != nil {
		Report(f.Name(), err)
	}
	return err
}

// Dir fsyncs the directory dir (after a rename or a create in it) and
// counts it under KindDir.
func Dir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := File(d, KindDir); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// Count is one kind's number of fsyncs since the process started.
type Count struct {
	Kind string
	N    uint64
}

// Counts returns the fsyncs so far by kind, sorted by kind.
func Counts() []Count {
	var out []Count
	counts.Range(func(k, v any) bool {
		out = append(out, Count{Kind: k.(string), N: v.(*atomic.Uint64).Load()})
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}

// PauseEnv names the test hook's environment variable.
const PauseEnv = "MOTHER_TEST_PAUSE_BEFORE_FSYNC"

var pause = parsePause(os.Getenv(PauseEnv))

type pauseAt struct {
	kind string
	n    uint64
	seen atomic.Uint64
}

func parsePause(v string) *pauseAt {
	kind, n, ok := strings.Cut(v, ":")
	if !ok || kind == "" {
		return nil
	}
	at, err := strconv.ParseUint(n, 10, 64)
	if err != nil || at == 0 {
		return nil
	}
	return &pauseAt{kind: kind, n: at}
}

// beforeSync is the test hook (see the package comment).
func beforeSync(kind string) {
	p := pause
	if p == nil || p.kind != kind {
		return
	}
	if p.seen.Add(1) != p.n {
		return
	}
	fmt.Fprintf(os.Stderr, "fsync paused: %s #%d\n", kind, p.n)
	select {}
}

// CountOf is kind's number of fsyncs since the process started.
func CountOf(kind string) uint64 { return counter(kind).Load() }

// ---- failures ----

var (
	hookMu sync.Mutex
	hooks  atomic.Pointer[[]*func(path string, err error)]
)

// OnFailure makes fn hear every failure Report is told of, until remove
// is called. The daemon sets one, its disk monitor's; fn must not block.
func OnFailure(fn func(path string, err error)) (remove func()) {
	return addTo(&hooks, fn)
}

// Report tells the OnFailure hooks that writing or syncing path failed
// with err. File reports its own failures; writers report failed writes.
func Report(path string, err error) {
	if err == nil {
		return
	}
	if list := hooks.Load(); list != nil {
		for _, fn := range *list {
			(*fn)(path, err)
		}
	}
}

// addTo adds fn to the list (copy on write) and returns its removal.
func addTo[F any](list *atomic.Pointer[[]*F], fn F) (remove func()) {
	p := &fn
	hookMu.Lock()
	defer hookMu.Unlock()
	var next []*F
	if cur := list.Load(); cur != nil {
		next = append(next, *cur...)
	}
	next = append(next, p)
	list.Store(&next)
	return func() {
		hookMu.Lock()
		defer hookMu.Unlock()
		var keep []*F
		if cur := list.Load(); cur != nil {
			for _, q := range *cur {
				if q != p {
					keep = append(keep, q)
				}
			}
		}
		if len(keep) == 0 {
			list.Store(nil)
			return
		}
		list.Store(&keep)
	}
}

// faults are the injected fsync failures (tests only).
var faults atomic.Pointer[[]*func(path string) error]

// InjectFault makes File fail, without calling fsync(2), for every file
// fn returns an error for, until remove is called: for tests, which
// should match only their own paths (tests run in parallel). The error is
// returned (and reported) as the fsync's.
func InjectFault(fn func(path string) error) (remove func()) {
	return addTo(&faults, fn)
}

func injected(path string) error {
	list := faults.Load()
	if list == nil {
		return nil
	}
	for _, fn := range *list {
		if err := (*fn)(path); err != nil {
			return err
		}
	}
	return nil
}

// MkdirAll is os.MkdirAll that makes each directory it creates durable:
// after each mkdir it fsyncs the parent, so a power cut cannot take the
// new directory's name (and with it every file later made durable in it).
// Directories that exist are left as they are, unsynced: they were made
// durable when they were made.
func MkdirAll(path string, perm os.FileMode) error {
	path = filepath.Clean(path)
	if st, err := os.Stat(path); err == nil {
		if !st.IsDir() {
			return &os.PathError{Op: "mkdir", Path: path, Err: syscall.ENOTDIR}
		}
		return nil
	}
	parent := filepath.Dir(path)
	if parent != path {
		if err := MkdirAll(parent, perm); err != nil {
			return err
		}
	}
	if err := os.Mkdir(path, perm); err != nil {
		if errors.Is(err, os.ErrExist) {
			if st, serr := os.Stat(path); serr == nil && st.IsDir() {
				return nil // made meanwhile by someone else, who syncs it
			}
		}
		Report(path, err)
		return err
	}
	return Dir(parent)
}

// Created makes the name of a file just created in dir durable (an fsync
// of dir): the file's own fsync does not promise its name.
func Created(path string) error { return Dir(filepath.Dir(path)) }
