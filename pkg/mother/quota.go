package mother

import (
	"fmt"
	"strings"

	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/skills"
)

// maxEvictedNames caps the file names one eviction notice names; the
// rest are counted.
const maxEvictedNames = 10

// evictions is what the channel quota removed on account of one chick,
// told to the channel once, when the chick ends.
type evictions struct {
	quota   int64
	names   []string // the first maxEvictedNames removed
	removed int
	bytes   int64
	leftOut []string // the first maxEvictedNames left out
	left    int
}

var _ hatchery.EvictionObserver = chickObserver{}

// ChannelFilesEvicted implements hatchery.EvictionObserver: what was
// removed is kept on the chick's view and told when it ends.
func (o chickObserver) ChannelFilesEvicted(in hatchery.Info, e hatchery.Eviction) {
	m := o.m
	v := m.view(in)
	if v == nil {
		m.logger.Warn("channel files evicted for a chick whose end is told; the channel is not told", "chick", in.ID, "files", len(e.Removed), "bytes", e.Bytes)
		return
	}
	v.do(func() {
		ev := &v.evicted
		ev.quota = e.Quota
		ev.removed += len(e.Removed)
		ev.bytes += e.Bytes
		ev.names = append(ev.names, e.Removed[:min(len(e.Removed), maxEvictedNames-len(ev.names))]...)
		ev.left += len(e.LeftOut)
		ev.leftOut = append(ev.leftOut, e.LeftOut[:min(len(e.LeftOut), maxEvictedNames-len(ev.leftOut))]...)
	})
}

// postEvicted tells the channel, once, what the quota removed on
// account of chick v (call it on the view's goroutine).
func (m *Mother) postEvicted(v *chickView) {
	if text := evictionNotice(v.id, v.evicted); text != "" {
		_ = m.postLogged(v.adapter, v.channel, text, "")
	}
}

// evictionNotice is the notice of ev for chick id ("" for nothing).
func evictionNotice(id string, ev evictions) string {
	if ev.removed == 0 && ev.left == 0 {
		return ""
	}
	var b strings.Builder
	if ev.removed > 0 {
		fmt.Fprintf(&b, "🧹 To keep this channel's files within their quota of %s, I removed the %d oldest chick output files (%s) while chick %s worked: %s",
			sizeText(ev.quota), ev.removed, sizeText(ev.bytes), id, evictedList(ev.names, ev.removed))
	}
	if ev.left > 0 {
		if b.Len() > 0 {
			b.WriteString(" ")
		} else {
			b.WriteString("🧹 ")
		}
		fmt.Fprintf(&b, "This channel's files that are not chick outputs hold more than the %s a chick can receive: chick %s started without %s",
			sizeText(hatchery.MaxPackBytes), id, evictedList(ev.leftOut, ev.left))
	}
	return b.String()
}

// evictedList names files (names of n), inert, with the rest counted.
func evictedList(names []string, n int) string {
	q := make([]string, len(names))
	for i, s := range names {
		q[i] = "`" + tame(s, 200) + "`"
	}
	out := strings.Join(q, ", ")
	if n > len(names) {
		out += fmt.Sprintf(" and %d more", n-len(names))
	}
	return out + "."
}

// sizeText is n bytes for people: "256 MiB", "1.5 KiB".
func sizeText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := int64(unit), 0
	for x := n / unit; x >= unit && exp < 3; x /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	s := fmt.Sprintf("%.1f", v)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + []string{"KiB", "MiB", "GiB", "TiB"}[exp]
}

// skillCaps are chicks.skills as skills.Caps.
func (m *Mother) skillCaps() skills.Caps {
	s := m.cfg.Chicks.Skills
	b, err := s.MaxBytesValue()
	if err != nil || b <= 0 {
		b = 0
	}
	return skills.Caps{MaxCount: s.MaxCountValue(), MaxBytes: b}
}
