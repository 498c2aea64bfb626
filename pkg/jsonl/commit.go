package jsonl

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/mother-chat/mother/pkg/fsync"
)

// writeFile is the write(2) of Write (tests inject failures here).
var writeFile = func(f *os.File, b []byte) (int, error) { return f.Write(b) }

// Write writes lines (whole lines, each ending in '\n') with one write(2)
// and returns at once, before any fsync: the caller must not acknowledge
// them before Commit(p) returns nil.
//
// A write that fails for want of space (ENOSPC, EDQUOT, EFBIG) leaves the
// file as it was (a short write is cut away at once, so later appends
// stay whole). Any other failure is taken as the disk's: the file gives
// up its descriptor as after a failed fsync (see File).
func (j *File) Write(lines []byte) (start int64, p Pos, err error) {
	return j.write(nil, lines)
}

// ErrCut is WriteAfter's refusal: the file was cut back after a failure.
var ErrCut = errors.New("cut back after a failure")

// WriteAfter is Write for a writer that keeps its own account of what the
// file holds: it writes nothing and returns an error matching ErrCut if
// the file was cut back after a failure (see File) since prev was
// returned (by a Write, WriteAfter or Mark). The writer then reads what
// the file holds now, and writes again after a fresh Mark.
func (j *File) WriteAfter(prev Pos, lines []byte) (start int64, p Pos, err error) {
	return j.write(&prev, lines)
}

// CutSince reports whether the file was cut back after a failure since p
// was returned (see WriteAfter).
func (j *File) CutSince(p Pos) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.gen != p.gen
}

func (j *File) write(prev *Pos, lines []byte) (start int64, p Pos, err error) {
	if len(lines) == 0 || lines[len(lines)-1] != '\n' {
		return 0, Pos{}, fmt.Errorf("append %s: not whole lines", j.path)
	}
	if err := j.Recover(); err != nil {
		return 0, Pos{}, err
	}
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return 0, Pos{}, fmt.Errorf("append %s: closed", j.path)
	}
	if j.f == nil {
		// Given up again since Recover.
		err := j.broken
		j.mu.Unlock()
		return 0, Pos{}, fmt.Errorf("append %s: %w", j.path, err)
	}
	if prev != nil && prev.gen != j.gen {
		j.mu.Unlock()
		return 0, Pos{}, fmt.Errorf("append %s: %w", j.path, ErrCut)
	}
	n, werr := writeFile(j.f, lines)
	if werr == nil {
		start = j.size
		j.size += int64(n)
		p = Pos{End: j.size, gen: j.gen}
		j.mu.Unlock()
		return start, p, nil
	}
	gen := j.gen
	giveUp := !NoSpace(werr)
	if n > 0 && !giveUp {
		// A short write leaves a torn line; cut it now rather than at
		// the next open so later appends stay whole.
		if terr := j.f.Truncate(j.size); terr != nil {
			giveUp = true
		}
	}
	j.mu.Unlock()
	fsync.Report(j.path, werr)
	err = fmt.Errorf("append %s: %w", j.path, werr)
	if giveUp {
		j.smu.Lock()
		j.giveUp(gen, err)
		j.smu.Unlock()
	}
	return 0, Pos{}, err
}

// NoSpace reports whether err is a write refused for want of space: the
// filesystem is full (ENOSPC), the user's quota is (EDQUOT), or the file
// is as large as it may be (EFBIG). The disk itself is fine.
func NoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EFBIG)
}

// Commit returns once every byte of the write that ended at p is on
// disk: it joins an fsync in flight if that one covers it, and otherwise
// runs (or waits for) the next one, which covers every write made before
// it starts. It fails if the fsync fails, and for a write the file cut
// away after a failure (see File), even when the failure came after the
// write and Commit is called later.
func (j *File) Commit(p Pos) error {
	j.smu.Lock()
	defer j.smu.Unlock()
	for {
		if p.gen < j.gen {
			c := j.cutOf(p.gen)
			if p.End <= c.at {
				return nil
			}
			return c.err
		}
		if j.synced >= p.End {
			return nil
		}
		if j.broken != nil {
			return j.broken
		}
		if j.syncing {
			j.scond.Wait()
			continue
		}
		j.syncing = true
		gen := j.gen
		j.mu.Lock()
		f, target, closed := j.f, j.size, j.closed
		j.mu.Unlock()
		j.smu.Unlock()
		var err error
		switch {
		case closed || f == nil:
			err = fmt.Errorf("sync %s: closed", j.path)
		default:
			if serr := fsync.File(f, j.kind); serr != nil {
				err = fmt.Errorf("sync %s: %w", j.path, serr)
			}
		}
		j.smu.Lock()
		j.syncing = false
		j.scond.Broadcast()
		switch {
		case closed || f == nil:
			return err
		case err != nil:
			// Never again on this descriptor: the loop then finds p in
			// a generation that ended, and whether it was kept.
			j.giveUp(gen, err)
		case target > j.synced:
			j.synced = target
		}
	}
}

// cutOf is the cut that ended generation g (g < j.gen). Caller holds smu.
func (j *File) cutOf(g uint64) cut {
	for i := len(j.cuts) - 1; i >= 0; i-- {
		if j.cuts[i].from <= g {
			return j.cuts[i]
		}
	}
	return cut{} // unreachable: the first cut is from generation 0
}

// giveUp ends generation gen after err: the descriptor is closed and never
// used again, what was written after the last fsync is given up, and the
// file is opened again, cut back to its durable length (if that fails, the
// next Write tries again). Nothing if gen has ended already or the file is
// closed. Caller holds smu, not mu.
func (j *File) giveUp(gen uint64, err error) {
	for j.syncing {
		j.scond.Wait()
	}
	if j.gen != gen {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return
	}
	if j.f != nil {
		_ = j.f.Close()
		j.f = nil
	}
	at := j.synced
	if n := len(j.cuts); n == 0 || j.cuts[n-1].at != at {
		j.cuts = append(j.cuts, cut{from: gen, at: at, err: err})
	}
	j.gen++
	j.size = at
	j.broken = err
	_ = j.reopenLocked()
	j.scond.Broadcast()
}

// reopenLocked opens the file again after giveUp: it cuts it back to the
// durable length (the bytes past it were never acknowledged, and after a
// failed fsync the page cache may hold them or not), reads its tail again
// to check that it ends with a whole line (repairTail), and fsyncs it on
// the new descriptor. On success the file takes appends again. Caller
// holds smu and mu.
func (j *File) reopenLocked() error {
	f, err := os.OpenFile(j.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		f.Close()
		fsync.Report(j.path, err)
		return err
	}
	st, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if st.Size() > j.size {
		if err := f.Truncate(j.size); err != nil {
			return fail(err)
		}
	}
	size, _, err := repairTail(f, j.path, j.kind)
	if err != nil {
		return fail(err)
	}
	if err := fsync.File(f, j.kind); err != nil {
		f.Close()
		return err
	}
	if size < j.synced {
		// Durable bytes are gone (the disk lost them): what is there now
		// is what is durable.
		j.synced = size
	}
	j.f, j.size, j.broken = f, size, nil
	return nil
}

// Recover opens the file again if a failure made it give up its
// descriptor and opening it again failed then. Write calls it first; it
// returns nil when the file takes appends.
func (j *File) Recover() error {
	j.smu.Lock()
	defer j.smu.Unlock()
	if j.broken == nil {
		return nil
	}
	for j.syncing {
		j.scond.Wait()
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return fmt.Errorf("append %s: closed", j.path)
	}
	if j.f != nil || j.broken == nil {
		return nil
	}
	if err := j.reopenLocked(); err != nil {
		return fmt.Errorf("append %s: %w (opening it again: %v)", j.path, j.broken, err)
	}
	return nil
}

// Flush returns once everything written so far is on disk (see Commit).
func (j *File) Flush() error { return j.Commit(j.Mark()) }

// Size is the length of the whole lines written so far (after a failure,
// of those kept).
func (j *File) Size() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.size
}

// Mark is where the next write will start, as a Pos: Commit(Mark())
// returns once everything written so far is on disk.
func (j *File) Mark() Pos {
	j.mu.Lock()
	defer j.mu.Unlock()
	return Pos{End: j.size, gen: j.gen}
}

// Close closes the file once no fsync is in flight (with FlushAfter set,
// after a last fsync of what was written). Appends after Close fail.
func (j *File) Close() error {
	var ferr error
	if j.flushAfter > 0 {
		ferr = j.Flush()
	}
	j.smu.Lock()
	defer j.smu.Unlock()
	if j.flushTimer != nil {
		j.flushTimer.Stop()
		j.flushTimer = nil
	}
	for j.syncing {
		j.scond.Wait()
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil
	}
	j.closed = true
	if j.f == nil {
		return ferr
	}
	err := j.f.Close()
	j.f = nil
	return errors.Join(ferr, err)
}

// Path is the file's path.
func (j *File) Path() string { return j.path }
