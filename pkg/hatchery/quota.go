package hatchery

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/config"
)

// The channel's quota (chicks.files.quota): what a chick of a channel
// receives at start (Files.List) is kept within it by removing the
// oldest chick outputs, the files under scratch/chicks/, when a chick's
// file lands (StoreFile) and again when a chick starts (ChickFiles), for
// what came some other way (a long result Mother stored, a quota
// lowered, a channel filled before there was a quota). Nothing else is
// ever removed: the files people sent, the memory, the skills (they
// have their own caps), the daily logs, and whatever else the operator
// put in scratch/. So a channel never sits over its quota because of
// what chicks left, and never stops a later chick.

// Eviction is what the quota removed from a channel to make room, oldest
// first, or left out of what a chick received.
type Eviction struct {
	// Quota is the channel's quota in bytes.
	Quota int64
	// Removed are the files removed, relative to the channel directory,
	// slash-separated, oldest first; Bytes is what they held.
	Removed []string
	Bytes   int64
	// LeftOut are files a chick starting did not receive, because the
	// channel's files that are never removed hold more than a chick can
	// receive (MaxPackBytes): workspace paths.
	LeftOut []string
}

// EvictionObserver is an Observer that hears what the quota removed,
// with the chick whose file (or start) made it remove it. Optional: the
// hatchery asks each subscriber whether it is one.
type EvictionObserver interface {
	ChannelFilesEvicted(c Info, e Eviction)
}

// ChannelFilesEvicted implements EvictionObserver.
func (p *publisher) ChannelFilesEvicted(c Info, e Eviction) {
	p.each(func(o Observer) {
		if eo, ok := o.(EvictionObserver); ok {
			eo.ChannelFilesEvicted(c, e)
		}
	})
}

// ErrOverQuota: a chick's file does not fit in its channel's quota even
// with every older chick output removed.
var ErrOverQuota = errors.New("over the channel's quota")

// outputsDir is where chick outputs land in a channel directory: the
// files the quota may remove.
var outputsDir = filepath.Join("scratch", "chicks")

// uploadPrefix starts the name of a file being stored (StoreFile): it is
// never removed, since its upload is still going on.
const uploadPrefix = ".upload-"

// quota is the channel quota in bytes.
func (h *Hatchery) quota() int64 {
	q, err := h.cfg.Files.QuotaValue()
	if err != nil || q <= 0 {
		q, _ = config.ChickFiles{}.QuotaValue()
	}
	return min(q, MaxPackBytes)
}

// usage is the bytes of the regular files a chick would receive.
func (f Files) usage() (int64, error) {
	var n int64
	err := f.walk(func(_ string, info fs.FileInfo, _, _ string) {
		if !info.IsDir() {
			n += info.Size()
		}
	})
	return n, err
}

// usageFresh is how long a channel's measured usage is taken as it was
// (plus what the quota itself stored and removed since) before the
// channel is walked again. A chick storing thousands of files walked its
// channel once per file, thousands of entries each time (3,000 files:
// past a 3-minute chick timeout under the race detector). What others
// write meanwhile (a person's attachment, the memory) is counted at the
// next walk, at most this much later, and again when a chick starts.
const usageFresh = 2 * time.Second

// channelBytes is a channel's usage as last measured, and when it was walked.
type channelBytes struct {
	bytes int64
	at    time.Time
}

// channelUsage is f's usage with landing bytes more, a file being
// stored in the channel directory: walked (which counts that file where
// it is) when the last walk is older than usageFresh or fresh is set,
// else as last measured plus landing. The caller holds h.quotaMu.
func (h *Hatchery) channelUsage(f Files, landing int64, fresh bool) (int64, error) {
	if h.clock == nil {
		return f.usage()
	}
	now := h.clock.Now()
	if m, ok := h.usage[f.ChannelDir]; ok && !fresh && now.Sub(m.at) < usageFresh && !now.Before(m.at) {
		return m.bytes + landing, nil
	}
	n, err := f.usage()
	if err != nil {
		delete(h.usage, f.ChannelDir)
		return 0, err
	}
	if h.usage == nil {
		h.usage = map[string]channelBytes{}
	}
	if len(h.usage) > 4096 {
		clear(h.usage) // channels come and go; a walk costs little once
	}
	h.usage[f.ChannelDir] = channelBytes{bytes: n, at: now}
	return n, nil
}

// settleUsage records that f's channel now holds used bytes, as of its
// last walk. The caller holds h.quotaMu.
func (h *Hatchery) settleUsage(f Files, used int64) {
	if m, ok := h.usage[f.ChannelDir]; ok {
		h.usage[f.ChannelDir] = channelBytes{bytes: used, at: m.at}
	}
}

// output is one chick output the quota may remove.
type output struct {
	path, rel string
	size      int64
	mod       time.Time
}

// outputs lists the chick outputs of the channel directory chDir, oldest
// first (by modification time, then path), leaving out keep and files
// being stored.
func outputs(chDir, keep string) ([]output, error) {
	var out []output
	root := filepath.Join(chDir, outputsDir)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == root {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() || p == keep || strings.HasPrefix(d.Name(), uploadPrefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // removed meanwhile
		}
		rel, _ := filepath.Rel(chDir, p)
		out = append(out, output{path: p, rel: filepath.ToSlash(rel), size: info.Size(), mod: info.ModTime()})
		return nil
	})
	slices.SortFunc(out, func(a, b output) int {
		if c := a.mod.Compare(b.mod); c != 0 {
			return c
		}
		return strings.Compare(a.rel, b.rel)
	})
	return out, err
}

// makeRoom removes the oldest chick outputs of f's channel until what a
// chick receives fits in quota bytes, with a file of landing bytes being
// stored in the channel directory to land at dst (replacing dst frees
// what it holds; see channelUsage). When even every older
// output removed would not make room it returns ErrOverQuota, having
// removed nothing, or, with all, having removed them all (a chick
// starting receives what fits). The caller holds h.quotaMu.
func (h *Hatchery) makeRoom(f Files, quota int64, dst string, landing int64, all bool) (Eviction, error) {
	ev := Eviction{Quota: quota}
	used, err := h.channelUsage(f, landing, all)
	if err != nil {
		return ev, fmt.Errorf("measure the channel's files: %w", err)
	}
	if dst != "" {
		if fi, err := os.Lstat(dst); err == nil && fi.Mode().IsRegular() {
			used -= fi.Size()
		}
	}
	if used <= quota {
		h.settleUsage(f, used)
		return ev, nil
	}
	outs, err := outputs(f.ChannelDir, dst)
	if err != nil {
		return ev, fmt.Errorf("list the channel's chick outputs: %w", err)
	}
	var removable int64
	for _, o := range outs {
		removable += o.size
	}
	var over error
	if used-removable > quota {
		over = fmt.Errorf("%w: the channel's files would hold %d bytes, over its quota of %d (chicks.files.quota), even with every older chick output removed", ErrOverQuota, used, quota)
		if !all {
			return ev, over
		}
	}
	for _, o := range outs {
		if used <= quota {
			break
		}
		if err := os.Remove(o.path); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				used -= o.size
				continue
			}
			return ev, fmt.Errorf("remove %s: %w", o.rel, err)
		}
		used -= o.size
		ev.Removed = append(ev.Removed, o.rel)
		ev.Bytes += o.size
		removeEmptyDirs(filepath.Join(f.ChannelDir, outputsDir), filepath.Dir(o.path))
	}
	if over == nil {
		h.settleUsage(f, used)
	} else {
		delete(h.usage, f.ChannelDir)
	}
	return ev, over
}

// removeEmptyDirs removes dir and its parents up to (not including) root
// while they are empty.
func removeEmptyDirs(root, dir string) {
	for dir != root && strings.HasPrefix(dir, root+string(filepath.Separator)) {
		if os.Remove(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// packRoom keeps chick c's channel within its quota as the chick starts
// (see the package's quota comment), and says what it removed and what
// the chick will not receive.
func (h *Hatchery) packRoom(in Info, f Files) {
	if f.ChannelDir == "" {
		return
	}
	h.quotaMu.Lock()
	ev, err := h.makeRoom(f, h.quota(), "", 0, true)
	h.quotaMu.Unlock()
	lg := h.logger.With("chick", in.ID, "channel_dir", f.ChannelDir)
	if err != nil && !errors.Is(err, ErrOverQuota) {
		lg.Warn("channel quota not kept", "err", err)
	}
	if errors.Is(err, ErrOverQuota) {
		// The files never removed hold more than the quota: the chick
		// receives them all the same, up to what it can receive.
		lg.Warn("the channel's files are over its quota without any chick output", "err", err)
	}
	if _, left, lerr := f.list(); lerr == nil {
		ev.LeftOut = left
	}
	if len(ev.Removed) == 0 && len(ev.LeftOut) == 0 {
		return
	}
	lg.Info("channel files evicted", "files", len(ev.Removed), "bytes", ev.Bytes, "left_out", len(ev.LeftOut), "quota", ev.Quota)
	h.obs.ChannelFilesEvicted(in, ev)
}
