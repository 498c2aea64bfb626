// Package jsonl appends JSON records to a file as whole lines and reads them
// back: one write(2) per batch of records on an O_APPEND file, a group
// commit fsync when asked, and a torn last line (a crash mid-write)
// repaired on open, never fatal.
package jsonl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/fsync"
)

// File is an append-only file of JSON records, one per line.
//
// Contract: each Append (or AppendBatch) is one write(2) of whole lines on
// a file opened with O_APPEND; with Sync set it returns only after an
// fsync(2) that started after that write, so after a crash the file holds
// every acknowledged record plus at most one torn line at the end. Open
// detects a torn last line, moves its bytes to "<path>.torn" (kept for
// inspection, never parsed) and truncates it away; that is never fatal.
// One process writes a file; readers in that process see only whole lines.
//
// Group commit: appends that arrive while an fsync is in flight do not
// each fsync; the first of them to wake runs one fsync that covers all of
// them.
//
// A failed fsync (or a write that fails with anything but a full disk) is
// never retried on the same descriptor: Linux may have dropped the pages
// it could not write and marked them clean, so a second fsync would
// succeed without the data ("fsyncgate"). The descriptor is closed, and
// every write not covered by an earlier fsync fails (none of them was
// acknowledged). The file is opened again, cut back to its last durable
// length (the unsynced tail is neither trusted nor kept), its tail read
// again to check it ends with a whole line, and fsynced; then it takes
// appends again. If that fails too (the disk still fails), the next write
// tries again.
type File struct {
	path string
	kind string
	sync bool

	// mu guards the writes, and f, size and closed. f, size, gen, cuts
	// and broken change only with smu and mu both held, so either lock
	// is enough to read them.
	mu     sync.Mutex
	f      *os.File // nil when closed, or given up after a failure
	size   int64
	closed bool

	smu     sync.Mutex // guards the commit state; taken before mu, never after
	scond   *sync.Cond
	synced  int64 // every byte before synced is on disk
	syncing bool
	// gen counts the descriptors given up after a failure; cuts says,
	// for each generation that ended, how far its writes were kept.
	gen  uint64
	cuts []cut
	// broken is the failure that made the file give up its descriptor,
	// until it is open again.
	broken error

	flushAfter time.Duration
	clock      clock.Clock
	flushTimer clock.Timer // pending deferred flush, guarded by smu
}

// Pos is where a write ended: its end offset in the file, in the file's
// generation at the time (a failure starts a new one, see File). Commit
// takes it.
type Pos struct {
	End int64
	gen uint64
}

// cut records that the generations from..(the next cut's from - 1) ended
// with the file cut back to at (its durable length), because of err.
type cut struct {
	from uint64
	at   int64
	err  error
}

// Options tune Open.
type Options struct {
	// Sync makes every append wait for the fsync that covers it.
	Sync bool
	// Kind labels the file's fsyncs (package fsync); default fsync.KindOther.
	Kind string
	// FlushAfter, when set, bounds how long a deferred append (every
	// append of a file without Sync, and AppendDeferred) stays without
	// an fsync: one is run that long after it unless an earlier one
	// covered it. Close flushes too.
	FlushAfter time.Duration
	// Clock runs the deferred flushes (default clock.Real).
	Clock clock.Clock
}

// Open opens (creating) path for appending, repairing a torn tail. It
// reports how many torn bytes were removed. With fsync set every Append
// waits for an fsync(2) that covers it.
func Open(path string, fsync bool) (*File, int, error) {
	return OpenWith(path, Options{Sync: fsync})
}

// OpenWith is Open with options.
func OpenWith(path string, opts Options) (*File, int, error) {
	if opts.Kind == "" {
		opts.Kind = fsync.KindOther
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if errors.Is(err, os.ErrExist) {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0o600)
	} else if err == nil {
		// Created: its name must be durable before any record in it is
		// acknowledged (the file's own fsync does not promise it).
		if serr := fsync.Created(path); serr != nil {
			f.Close()
			return nil, 0, fmt.Errorf("open %s: %w", path, serr)
		}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("open %s: %w", path, err)
	}
	size, torn, err := repairTail(f, path, opts.Kind)
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	j := &File{path: path, kind: opts.Kind, sync: opts.Sync, f: f, size: size, synced: size, flushAfter: opts.FlushAfter, clock: opts.Clock}
	j.scond = sync.NewCond(&j.smu)
	return j, torn, nil
}

// repairTail truncates a last line that lacks its newline.
func repairTail(f *os.File, path, kind string) (size int64, torn int, err error) {
	st, err := f.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("stat %s: %w", path, err)
	}
	size = st.Size()
	if size == 0 {
		return 0, 0, nil
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, size-1); err != nil {
		return 0, 0, fmt.Errorf("read %s: %w", path, err)
	}
	if last[0] == '\n' {
		return size, 0, nil
	}
	keep, err := LineStart(f, size)
	if err != nil {
		return 0, 0, fmt.Errorf("scan %s: %w", path, err)
	}
	tail := make([]byte, size-keep)
	if _, err := f.ReadAt(tail, keep); err != nil {
		return 0, 0, fmt.Errorf("read torn tail of %s: %w", path, err)
	}
	tf, err := os.OpenFile(path+".torn", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, 0, fmt.Errorf("save torn tail of %s: %w", path, err)
	}
	_, werr := tf.Write(append(tail, '\n'))
	if cerr := tf.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return 0, 0, fmt.Errorf("save torn tail of %s: %w", path, werr)
	}
	if err := f.Truncate(keep); err != nil {
		return 0, 0, fmt.Errorf("truncate torn tail of %s: %w", path, err)
	}
	if err := fsync.File(f, kind); err != nil {
		return 0, 0, fmt.Errorf("sync %s: %w", path, err)
	}
	return keep, len(tail), nil
}

// LineStart returns the offset just after the last '\n' before end (0 if
// none), reading backwards in blocks: the start of the line that ends at
// end, when end is a line's trailing newline.
func LineStart(r io.ReaderAt, end int64) (int64, error) {
	// Most lines are short: read 4 KiB back first, then blocks twice
	// as large up to 64 KiB.
	var small [4 << 10]byte
	buf := small[:]
	for pos := end; pos > 0; {
		n := int64(len(buf))
		if pos < n {
			n = pos
		}
		pos -= n
		if _, err := r.ReadAt(buf[:n], pos); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return pos + int64(i) + 1, nil
		}
		if len(buf) < 64<<10 {
			buf = make([]byte, 2*len(buf))
		}
	}
	return 0, nil
}

// Append writes v as one line and returns the byte range it occupies;
// with Sync set, once an fsync covers it.
func (j *File) Append(v any) (start, end int64, err error) {
	line, err := json.Marshal(v)
	if err != nil {
		return 0, 0, fmt.Errorf("encode record for %s: %w", j.path, err)
	}
	return j.AppendLines(append(line, '\n'))
}

// AppendBatch writes vs as consecutive lines with one write(2) and, with
// Sync set, waits for one fsync that covers them all. It returns the byte
// range of the whole batch.
func (j *File) AppendBatch(vs ...any) (start, end int64, err error) {
	var buf []byte
	for _, v := range vs {
		line, err := json.Marshal(v)
		if err != nil {
			return 0, 0, fmt.Errorf("encode record for %s: %w", j.path, err)
		}
		buf = append(append(buf, line...), '\n')
	}
	return j.AppendLines(buf)
}

// AppendLines writes lines, which must be whole lines of JSON each ending
// in '\n' (the caller encoded them), with one write(2), and with Sync set
// waits for the fsync that covers them.
func (j *File) AppendLines(lines []byte) (start, end int64, err error) {
	start, p, err := j.Write(lines)
	if err != nil {
		return start, p.End, err
	}
	if !j.sync {
		j.scheduleFlush()
		return start, p.End, nil
	}
	return start, p.End, j.Commit(p)
}

// AppendDeferred writes v as one line and returns without waiting for an
// fsync: for a record nobody is told about (it must not be acknowledged),
// made durable by the file's next fsync, or FlushAfter later, or at Close.
// A killed process loses nothing written; a power loss may lose it, and
// so may a failed fsync (see File).
func (j *File) AppendDeferred(v any) (start, end int64, err error) {
	start, p, err := j.WriteDeferred(v)
	return start, p.End, err
}

// WriteDeferred is AppendDeferred returning the write's Pos, for a caller
// that commits it later (Commit) before acknowledging it.
func (j *File) WriteDeferred(v any) (start int64, p Pos, err error) {
	line, err := json.Marshal(v)
	if err != nil {
		return 0, Pos{}, fmt.Errorf("encode record for %s: %w", j.path, err)
	}
	start, p, err = j.Write(append(line, '\n'))
	if err == nil {
		j.scheduleFlush()
	}
	return start, p, err
}

// scheduleFlush arms the deferred flush, if the file has one and none is
// pending.
func (j *File) scheduleFlush() {
	if j.flushAfter <= 0 {
		return
	}
	j.smu.Lock()
	defer j.smu.Unlock()
	if j.flushTimer != nil {
		return
	}
	j.flushTimer = j.clock.AfterFunc(j.flushAfter, func() {
		j.smu.Lock()
		j.flushTimer = nil
		j.smu.Unlock()
		_ = j.Flush()
	})
}

// Scan calls fn for each whole line of path from offset start up to
// end (end < 0: to the end of the file), with the line's byte range. A
// trailing line without newline is not passed on. Lines may be up to 64 MiB.
func Scan(path string, start, end int64, fn func(line []byte, lineStart, lineEnd int64) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return fmt.Errorf("seek %s: %w", path, err)
	}
	var r io.Reader = f
	if end >= 0 {
		r = io.LimitReader(f, end-start)
	}
	br := scanReaders.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() {
		br.Reset(nil)
		scanReaders.Put(br)
	}()
	pos := start
	for {
		line, err := readLine(br, 64<<20)
		if len(line) > 0 && line[len(line)-1] == '\n' {
			next := pos + int64(len(line))
			if ferr := fn(line[:len(line)-1], pos, next); ferr != nil {
				return ferr
			}
			pos = next
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read %s: %w", path, err)
		}
	}
}

// scanReaders keep Scan's 64 KiB buffers: a run scans twice (the log and
// the context), and a fresh buffer each time was most of what a message
// allocated.
var scanReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

var errLineTooLong = errors.New("line too long")

func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var acc []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if acc == nil && err == nil {
			return chunk, nil
		}
		acc = append(acc, chunk...)
		if len(acc) > max {
			return nil, errLineTooLong
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return acc, err
	}
}
