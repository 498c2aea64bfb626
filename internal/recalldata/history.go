package recalldata

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// Message is one line of the generated history.
type Message struct {
	// ID is "m-000001" onwards, in time order (the store keeps each
	// platform's own message ids; these stand for them).
	ID   string
	Time time.Time
	// User is who said it: a person ("anna", "tom", "lily", "sam",
	// "rose"), "mother", a chick's id ("c-0101") or, for the daily log
	// and the memory file, "daily" and "memory".
	User string
	// Kind is "user", "mother", "chick", "daily" or "memory".
	Kind string
	Text string
}

// Question is asked of a search over the history; Answer is the ID of the
// one message that answers it.
type Question struct {
	Text   string
	Answer string
}

// Start is when the history begins; it runs for Days days.
var Start = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// Days is the history's length in days (about six months).
const Days = 183

// paraphraseShare is the share of questions asked in other words than
// their answer's (a step's para templates), the rest in its own words
// (lex); of those, slotShare say the slots too in other words (a
// "dripping faucet" for a "leaking tap"), the others keep the answer's
// words for them, as people asking half remember.
var (
	paraphraseShare = 0.25
	slotShare       = 0.5
)

// History generates the data set from seed: a family's group chat with
// Mother over six months (Start, Days) and the questions it answers. The
// same seed gives the same history. See the package's doc.go for what is
// in it.
func History(seed int64) ([]Message, []Question) {
	h := generate(seed)
	return h.msgs, h.qs
}

// generated is History's result with, per answering message, the key:
// the text that states its fact and that no other message contains (a
// name, a time, an amount), for the data set's own checks.
type generated struct {
	msgs []Message
	qs   []Question
	keys map[string]string // message ID -> key
}

// draft is a message before the history is sorted and numbered.
type draft struct {
	t                time.Time
	user, kind, text string
	key              string
	questions        []string
}

type gen struct {
	r      *rand.Rand
	drafts []*draft
	chicks int
}

func generate(seed int64) generated {
	g := &gen{r: rand.New(rand.NewPCG(uint64(seed), 0x6d6f74686572))}
	for _, f := range families() {
		g.family(f)
	}
	g.filler()
	g.dailyLog()
	sort.SliceStable(g.drafts, func(i, j int) bool { return g.drafts[i].t.Before(g.drafts[j].t) })
	out := generated{keys: map[string]string{}}
	for i, d := range g.drafts {
		id := fmt.Sprintf("m-%06d", i+1)
		out.msgs = append(out.msgs, Message{ID: id, Time: d.t, User: d.user, Kind: d.kind, Text: d.text})
		for _, q := range d.questions {
			out.qs = append(out.qs, Question{Text: q, Answer: id})
		}
		if d.key != "" {
			out.keys[id] = d.key
		}
	}
	return out
}

// family is a kind of event that recurs (a plumber called, a gift chosen)
// or a story told once: each instance draws its slots and plays its steps
// as messages, some of which answer questions.
type family struct {
	// n instances; each draws a distinct value of every slot (a slot
	// in reuse may repeat).
	n     int
	slots map[string][]string
	reuse map[string]bool
	// instances, when set, are given whole instead of drawn (n and
	// slots unused).
	instances []map[string]string
	steps     []step
}

// A slot value is "answer form|paraphrase form" (one form: both the
// same); templates say {name} for the answer form, {name~} for the
// paraphrase form. {date} is the message's day.
type step struct {
	// who: "person" (anyone), "other" (a person not the last step's),
	// "adult", "child", "mother", "chick", "daily", "memory".
	who string
	// after is the delay since the last step: "m" minutes, "h" hours,
	// "d" days, "w" weeks ("" for the first step: a random time).
	after string
	texts []string
	// key names the slot whose answer form states this message's fact,
	// or in a story (no such slot) is that text itself.
	key string
	ask []ask
}

// ask is a question a step's message answers, asked in lex (its own
// words) or para (other words) templates, with probability p (0: 1).
type ask struct {
	lex, para []string
	p         float64
}

var people = []string{"anna", "tom", "lily", "sam", "rose"}

func (g *gen) pick(xs []string) string { return xs[g.r.IntN(len(xs))] }

// speaker is who says text: a person of the kind who asks for (not the
// last speaker, for "other"), and not one the text names ("Who's picking
// up Lily?" is not Lily's line).
func (g *gen) speaker(who, last, text string) string {
	p := g.person(who, last)
	for i := 0; i < 20 && strings.Contains(text, strings.ToUpper(p[:1])+p[1:]); i++ {
		p = g.person(who, last)
	}
	return p
}

func (g *gen) person(who, not string) string {
	var pool []string
	switch who {
	case "adult":
		pool = []string{"anna", "tom"}
	case "child":
		pool = []string{"lily", "sam"}
	default:
		// Anna and Tom say most.
		pool = []string{"anna", "anna", "anna", "tom", "tom", "tom", "lily", "lily", "sam", "rose"}
	}
	for {
		p := g.pick(pool)
		if who != "other" || p != not {
			return p
		}
	}
}

// family plays f's instances.
func (g *gen) family(f family) {
	insts := f.instances
	if insts == nil {
		names := make([]string, 0, len(f.slots))
		for name := range f.slots {
			names = append(names, name)
		}
		sort.Strings(names) // the draws in a fixed order: the same seed, the same history
		perm := map[string][]int{}
		for _, name := range names {
			vals := f.slots[name]
			if !f.reuse[name] && len(vals) < f.n {
				panic(fmt.Sprintf("recalldata: slot %q has %d values for %d instances", name, len(vals), f.n))
			}
			perm[name] = g.r.Perm(len(vals))
		}
		for i := 0; i < f.n; i++ {
			inst := map[string]string{}
			for _, name := range names {
				vals := f.slots[name]
				if f.reuse[name] {
					inst[name] = g.pick(vals)
				} else {
					inst[name] = vals[perm[name][i]]
				}
			}
			insts = append(insts, inst)
		}
	}
	span := 0
	for _, s := range f.steps {
		span += map[string]int{"": 0, "m": 1, "h": 1, "d": 4, "w": 35}[s.after]
	}
	for _, inst := range insts {
		g.instance(f, inst, span)
	}
}

func (g *gen) instance(f family, inst map[string]string, span int) {
	g.chicks++
	chick := fmt.Sprintf("c-%04d", 100+g.chicks)
	var pairs, plain []string
	for name, v := range inst {
		a, p, ok := strings.Cut(v, "|")
		if !ok {
			p = a
		}
		pairs = append(pairs, "{"+name+"~}", p, "{"+name+"}", a)
		plain = append(plain, "{"+name+"~}", a, "{"+name+"}", a)
	}
	pairs = append(pairs, "{chick}", chick)
	plain = append(plain, "{chick}", chick)
	fill, fillPlain := strings.NewReplacer(pairs...), strings.NewReplacer(plain...)
	day := 0
	if d, ok := inst["_day"]; ok {
		_, _ = fmt.Sscan(d, &day)
	} else {
		day = g.r.IntN(max(1, Days-span))
	}
	t := Start.Add(time.Duration(day)*24*time.Hour + g.daytime())
	last := ""
	for _, s := range f.steps {
		t = g.later(t, s.after)
		text := g.render(fill, g.pick(s.texts), t)
		var user, kind string
		switch s.who {
		case "mother":
			user, kind = "mother", "mother"
		case "chick":
			user, kind = chick, "chick"
		case "daily", "memory":
			user, kind = s.who, s.who
		default:
			user, kind = g.speaker(s.who, last, text), "user"
			last = user
		}
		d := &draft{t: t, user: user, kind: kind, text: text}
		if v, ok := inst[s.key]; ok {
			d.key, _, _ = strings.Cut(v, "|")
		} else {
			d.key = s.key // a story's literal key
		}
		for _, a := range s.ask {
			if a.p != 0 && g.r.Float64() >= a.p {
				continue
			}
			tmpl, slots := a.lex, fill
			if len(a.para) > 0 && (len(a.lex) == 0 || g.r.Float64() < paraphraseShare) {
				tmpl = a.para
				if g.r.Float64() >= slotShare {
					slots = fillPlain
				}
			}
			d.questions = append(d.questions, g.render(slots, g.pick(tmpl), t))
		}
		g.drafts = append(g.drafts, d)
	}
}

// render fills a template and gives it a capital letter.
func (g *gen) render(fill *strings.Replacer, tmpl string, t time.Time) string {
	s := fill.Replace(tmpl)
	s = strings.ReplaceAll(s, "{date}", t.Format("2006-01-02"))
	if s != "" && s[0] >= 'a' && s[0] <= 'z' {
		s = strings.ToUpper(s[:1]) + s[1:]
	}
	return s
}

// daytime is a waking time of day.
func (g *gen) daytime() time.Duration {
	return 7*time.Hour + time.Duration(g.r.IntN(15*3600))*time.Second
}

// later is t after a delay of the given kind.
func (g *gen) later(t time.Time, after string) time.Time {
	switch after {
	case "m":
		return t.Add(time.Duration(20+g.r.IntN(15*60)) * time.Second)
	case "h":
		return t.Add(time.Duration(3600+g.r.IntN(4*3600)) * time.Second)
	case "d":
		return dayOf(t).AddDate(0, 0, 1+g.r.IntN(3)).Add(g.daytime())
	case "w":
		return dayOf(t).AddDate(0, 0, 7+g.r.IntN(28)).Add(g.daytime())
	}
	return t
}

func dayOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, t.Location())
}

// dailyLog adds the daily log's line for each day: what the day held,
// counted from the messages (a day's own notes come from the families).
func (g *gen) dailyLog() {
	type day struct {
		msgs, reminders, chicks int
		who                     map[string]bool
	}
	days := make([]day, Days+60)
	for _, d := range g.drafts {
		i := int(d.t.Sub(Start) / (24 * time.Hour))
		if i < 0 || i >= len(days) || d.kind == "daily" || d.kind == "memory" {
			continue
		}
		x := &days[i]
		x.msgs++
		if x.who == nil {
			x.who = map[string]bool{}
		}
		switch {
		case d.kind == "user":
			x.who[d.user] = true
		case d.kind == "chick":
			x.chicks++
		case strings.HasPrefix(d.text, "Reminder"):
			x.reminders++
		}
	}
	for i := 0; i < Days; i++ {
		x := days[i]
		t := Start.AddDate(0, 0, i).Add(23*time.Hour + 55*time.Minute)
		var who []string
		for _, p := range people {
			if x.who[p] {
				who = append(who, p)
			}
		}
		text := fmt.Sprintf("Daily log %s: %d messages", t.Format("2006-01-02 (Monday)"), x.msgs)
		if len(who) > 0 {
			text += " from " + strings.Join(who, ", ")
		}
		switch {
		case x.reminders == 1:
			text += "; 1 reminder sent"
		case x.reminders > 1:
			text += fmt.Sprintf("; %d reminders sent", x.reminders)
		}
		switch {
		case x.chicks == 1:
			text += "; 1 chick result"
		case x.chicks > 1:
			text += fmt.Sprintf("; %d chick results", x.chicks)
		}
		g.drafts = append(g.drafts, &draft{t: t, user: "daily", kind: "daily", text: text + "."})
	}
}
