package mother

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
)

// Posts paced per chick (chicks.posts). What a chick makes Mother post in
// its channel besides its progress view (the files it attaches, its
// memory updates, its skill notices) goes out at chicks.posts.perMinute,
// with a burst; past that each notice is folded, and the folded ones go
// out as one post when the pace allows again, or when the chick ends,
// naming what they hold. Its progress (the tool calls shown) has a pace
// of its own; the calls not shown are counted in the folded post. Nothing
// is lost: the files are on disk, memory updates and skills apply, and
// `momctl chicks tail` has every event.

// postsPace is chicks.posts, its defaults filled in where a Config was
// built without them.
func (m *Mother) postsPace() config.ChickPosts {
	c := m.cfg.Chicks.Posts
	if c.PerMinute <= 0 {
		c.PerMinute = config.DefaultPostsPerMinute
	}
	if c.Burst <= 0 {
		c.Burst = config.DefaultPostsBurst
	}
	if c.ProgressPerMinute <= 0 {
		c.ProgressPerMinute = config.DefaultProgressPerMinute
	}
	if c.ProgressBurst <= 0 {
		c.ProgressBurst = config.DefaultProgressBurst
	}
	return c
}

// noticeKind is what a paced notice is about.
type noticeKind int

const (
	noticeFile noticeKind = iota
	noticeMemory
	noticeSkill
	noticeSkillRefused
)

// foldNames is how many names a folded post or a report lists of each
// kind; foldNameRunes clips one name.
const (
	foldNames     = 5
	foldNameRunes = 100
)

// bucket is a token bucket: burst tokens, refilled at perMinute.
type bucket struct {
	tokens float64
	at     time.Time
}

func (b *bucket) fill(now time.Time, perMinute, burst int) {
	if b.at.IsZero() {
		b.tokens = float64(burst)
	} else if d := now.Sub(b.at); d > 0 {
		b.tokens = min(float64(burst), b.tokens+d.Minutes()*float64(perMinute))
	}
	b.at = now
}

// take takes a token if there is one.
func (b *bucket) take(now time.Time, perMinute, burst int) bool {
	b.fill(now, perMinute, burst)
	if b.tokens >= 1 {
		b.tokens--
		return true
	}
	return false
}

// wait is how long until the next token (after fill).
func (b *bucket) wait(perMinute int) time.Duration {
	if b.tokens >= 1 || perMinute <= 0 {
		return 0
	}
	return time.Duration((1 - b.tokens) / float64(perMinute) * float64(time.Minute))
}

// folded is what a chick's notices and progress held back.
type folded struct {
	files, memory, skills, refused, tools int
	fileNames, skillNames                 []string
}

// notices is how many notices are folded (tool calls aside).
func (f folded) notices() int { return f.files + f.memory + f.skills + f.refused }

// chickPace is one chick's pace.
type chickPace struct {
	in       hatchery.Info
	notices  bucket
	progress bucket
	fold     folded
	// shown are the tool calls whose start was shown: their end is shown
	// too, the others' not.
	shown map[string]bool
	timer clock.Timer
}

// postPaces holds the pace of every chick with something to post.
type postPaces struct {
	mu sync.Mutex
	by map[string]*chickPace
}

// paceLocked returns chick in's pace, creating it. Caller holds p.mu.
func (p *postPaces) paceLocked(in hatchery.Info) *chickPace {
	if p.by == nil {
		p.by = map[string]*chickPace{}
	}
	c, ok := p.by[in.ID]
	if !ok {
		c = &chickPace{in: in, shown: map[string]bool{}}
		p.by[in.ID] = c
	}
	return c
}

// ended reports whether chick id's end was told: its notices are not
// paced any more (none should come).
func (m *Mother) ended(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.chicksEnded[id]
}

// paceNotice reports whether a notice of chick in may be posted now. If
// not, it is folded (name is what it names, for the folded post) and the
// folded post is scheduled for when the pace allows.
func (m *Mother) paceNotice(in hatchery.Info, kind noticeKind, name string) bool {
	if m.ended(in.ID) {
		return true
	}
	cfg := m.postsPace()
	p := &m.posts
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.paceLocked(in)
	now := m.now()
	if c.fold.notices() == 0 && c.notices.take(now, cfg.PerMinute, cfg.Burst) {
		return true
	}
	name = tame(name, foldNameRunes)
	switch kind {
	case noticeFile:
		c.fold.files++
		if len(c.fold.fileNames) < foldNames {
			c.fold.fileNames = append(c.fold.fileNames, name)
		}
	case noticeMemory:
		c.fold.memory++
	case noticeSkill, noticeSkillRefused:
		if kind == noticeSkill {
			c.fold.skills++
		} else {
			c.fold.refused++
		}
		if len(c.fold.skillNames) < foldNames {
			c.fold.skillNames = append(c.fold.skillNames, name)
		}
	}
	if c.timer == nil {
		c.notices.fill(now, cfg.PerMinute, cfg.Burst)
		c.timer = m.clock.AfterFunc(c.notices.wait(cfg.PerMinute), func() { m.flushFolded(in.ID) })
	}
	return false
}

// paceProgress reports whether a progress event of chick in is shown: a
// tool call's start while the progress pace allows, its end if its start
// was shown; every other event.
func (m *Mother) paceProgress(in hatchery.Info, ev agent.Event) bool {
	if ev.ToolCallID == "" || ev.Type != agent.EventToolStart && ev.Type != agent.EventToolEnd {
		return true
	}
	cfg := m.postsPace()
	p := &m.posts
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.paceLocked(in)
	if ev.Type == agent.EventToolEnd {
		shown := c.shown[ev.ToolCallID]
		delete(c.shown, ev.ToolCallID)
		return shown
	}
	if c.shown[ev.ToolCallID] {
		return true // the same start again (a resend after a reconnect)
	}
	if c.progress.take(m.now(), cfg.ProgressPerMinute, cfg.ProgressBurst) {
		c.shown[ev.ToolCallID] = true
		return true
	}
	c.fold.tools++
	return false
}

// flushFolded posts chick id's folded notices when the pace allows.
func (m *Mother) flushFolded(id string) {
	cfg := m.postsPace()
	p := &m.posts
	p.mu.Lock()
	c, ok := p.by[id]
	if !ok {
		p.mu.Unlock()
		return
	}
	c.timer = nil
	now := m.now()
	if !c.notices.take(now, cfg.PerMinute, cfg.Burst) {
		c.timer = m.clock.AfterFunc(c.notices.wait(cfg.PerMinute), func() { m.flushFolded(id) })
		p.mu.Unlock()
		return
	}
	f, in := c.fold, c.in
	c.fold = folded{}
	p.mu.Unlock()
	m.postFolded(in, f, false)
}

// paceEnd ends chick in's pace: what is folded is posted now (one post),
// before its result.
func (m *Mother) paceEnd(in hatchery.Info) {
	p := &m.posts
	p.mu.Lock()
	c, ok := p.by[in.ID]
	if ok {
		delete(p.by, in.ID)
		if c.timer != nil {
			c.timer.Stop()
		}
	}
	p.mu.Unlock()
	if ok {
		m.postFolded(in, c.fold, true)
	}
}

// postFolded posts (and logs) the folded notices f of chick in, if any.
func (m *Mother) postFolded(in hatchery.Info, f folded, end bool) {
	if f.notices() == 0 && (f.tools == 0 || !end) {
		return
	}
	a, ok := m.Adapter(in.Adapter)
	if !ok {
		return
	}
	m.logger.Info("chick notices folded into one post", "chick", in.ID, "files", f.files, "memory", f.memory, "skills", f.skills, "refused", f.refused, "tools", f.tools)
	_ = m.postLogged(a, in.ChannelID, foldedText(in.ID, f), "")
}

// foldedText is the post of folded notices.
func foldedText(id string, f folded) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Chick %s, more than chicks.posts lets it post one by one:", id)
	if f.files > 0 {
		fmt.Fprintf(&b, "\n📎 %s it attached: %s, in `%s/`.", count(f.files, "more file"), nameList(f.fileNames, f.files), filepath.Join("scratch", "chicks", id))
	}
	if f.memory > 0 {
		fmt.Fprintf(&b, "\n🧠 %s of this channel's memory, all applied (MEMORY.md has them).", count(f.memory, "more update"))
	}
	if n := f.skills + f.refused; n > 0 {
		fmt.Fprintf(&b, "\n📚 %s: %s", count(n, "more skill notice"), nameList(f.skillNames, n))
		if f.refused > 0 {
			fmt.Fprintf(&b, " (%d refused)", f.refused)
		}
		b.WriteString("; the skills it stored are in skills/.")
	}
	if f.tools > 0 {
		fmt.Fprintf(&b, "\n… %s not shown in its progress (`momctl chicks tail %s` has them).", count(f.tools, "tool call"), id)
	}
	return b.String()
}

// count is "1 more file" or "297 more files".
func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// nameList lists names in backticks and how many of total it leaves out.
func nameList(names []string, total int) string {
	if len(names) == 0 {
		return fmt.Sprintf("%d", total)
	}
	s := "`" + strings.Join(names, "`, `") + "`"
	if rest := total - len(names); rest > 0 {
		s += fmt.Sprintf(" and %d more", rest)
	}
	return s
}

// fileList is a chick's file list as a report or a summary gives it: all
// of a few, or the first foldNames of many with their count and where
// they all are.
func fileList(id string, files []string) string {
	if len(files) <= foldNames {
		names := make([]string, len(files))
		for i, f := range files {
			names[i] = clipName(f)
		}
		return "`" + strings.Join(names, "`, `") + "`"
	}
	dir := filepath.Join("scratch", "chicks", id) + "/"
	names := make([]string, foldNames)
	for i, f := range files[:foldNames] {
		names[i] = clipName(strings.TrimPrefix(f, dir))
	}
	return fmt.Sprintf("%d files in `%s`, among them `%s` and %d more", len(files), dir, strings.Join(names, "`, `"), len(files)-foldNames)
}

// clipName clips a file name for a list.
func clipName(s string) string {
	s = strings.ReplaceAll(s, "`", "'")
	if utf8.RuneCountInString(s) > foldNameRunes {
		s = string([]rune(s)[:foldNameRunes]) + "…"
	}
	return s
}

// ReportMeter charges what Mother's model reads about an ended chick (its
// report in answer mode, its relayed result in relay mode: the text
// logged in the channel, which her next run reads) to that chick.
type ReportMeter interface {
	// ChargeReport charges the tokens text is estimated at, as Mother's
	// model reads it, to chick in, and returns them.
	ChargeReport(in hatchery.Info, text string) (int64, error)
}

// chargeReport charges text, logged for Mother's model to read, to chick
// in.
func (m *Mother) chargeReport(in hatchery.Info, text string) {
	if m.reports == nil {
		return
	}
	n, err := m.reports.ChargeReport(in, text)
	if err != nil {
		m.logger.Warn("cannot charge the chick's report to it", "chick", in.ID, "err", err)
		return
	}
	m.logger.Info("the chick's report is charged to it", "chick", in.ID, "tokens", n)
}
