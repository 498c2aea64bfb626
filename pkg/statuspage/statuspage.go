// Package statuspage serves Mother's read-only status page on the
// metrics listener (config metrics.listen): her adapters and their
// connection, the chicks alive (state, channel, tier, tokens, age, last
// event), the last chicks that ended (how, why, tokens, how long), the
// Docker hosts and their load, today's budgets (bars against their
// caps), the next scheduled events, the model servers and providers and
// the host tool servers.
//
//	GET /status         the page (html/template), refreshing itself
//	GET /status.json    the same facts as one JSON object
//	GET /status/live    the page's live part alone, fetched by
//	                    /status.js every two seconds and swapped in
//	GET /status.js, /status.css
//
// The page shows no secret: no token, key or configuration secret, no
// chick goal, message text or tool argument. Every string it shows is
// scrubbed of the configuration's secret values (config.SecretValues)
// before it is rendered, and the rendered bytes are scrubbed again; its
// control characters are shown, not sent (package termtext). The
// facts are read from their owners at request time through small
// interfaces; the last event of each chick is heard as a hatchery
// observer.
package statuspage

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/disk"
	"github.com/mother-chat/mother/pkg/events"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hosttools"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/fallback"
	"github.com/mother-chat/mother/pkg/termtext"
)

// Adapters reports the chat adapters' connections (mother.Mother).
type Adapters interface {
	AdapterReports() []chat.AdapterReport
}

// Chicks reports the chicks and the Docker hosts (hatchery.Hatchery).
// HostStates is the hosts' last known state: the page does not probe the
// engines itself.
type Chicks interface {
	List(all bool) []hatchery.Info
	HostStates() []hatchery.HostStatus
}

// Budgets reports today's budgets (broker.Broker).
type Budgets interface {
	Budgets() []broker.Budget
}

// Events lists the scheduled events, soonest first (events.Watcher).
type Events interface {
	List(channel string) []events.Info
}

// ToolServers reports the host tool servers (hosttools.Manager).
type ToolServers interface {
	Status() []hosttools.ServerStatus
}

// Providers reports the model providers that fallback chains have called
// (fallback.Health).
type Providers interface {
	Statuses() []fallback.Status
	ModelServers() []model.ServerStatus
}

// DiskState reports the data directory's disk (disk.Monitor).
type DiskState interface {
	Status() disk.Status
}

// Sources are where the page reads its facts; any may be nil (that part
// of the page is then empty).
type Sources struct {
	Disk        DiskState
	Providers   Providers
	Adapters    Adapters
	Chicks      Chicks
	Budgets     Budgets
	Events      Events
	ToolServers ToolServers
	// Spend draws the chart of the last days' spend.
	Spend Spend
	// Recall tells how far the history index is (nil: recall off).
	Recall func() Recall
	// Roles says who has which role and what was refused (Mother).
	Roles chat.Roles
}

// Options build a Page.
type Options struct {
	// Version is Mother's version.
	Version string
	// ChickImage is the configured chick image.
	ChickImage string
	// StartedAt is when Mother started.
	StartedAt time.Time
	// Secrets are the values never to show (config.SecretValues).
	Secrets []string
	// Clock tells the time (default clock.Real).
	Clock clock.Clock
	// Refresh is how often the page fetches its live part (default 2s).
	Refresh time.Duration
}

// NextEvents is how many scheduled events the page lists.
const NextEvents = 5

// Page is the status page. It hears chick events as a hatchery observer
// (Hatchery.Subscribe) to show each chick's last one.
type Page struct {
	hatchery.NopObserver

	opts Options

	mu    sync.Mutex
	src   Sources
	scrub *strings.Replacer
	// last is each chick's last shown event, described only when the
	// page is read (a chick's events come by the thousand per second).
	last map[string]lastSeen
}

// lastSeen is a chick's last shown event: the fields describe reads.
type lastSeen struct {
	ev agent.Event
	at time.Time
}

// seen keeps what describe needs of ev, or false if the page does not
// show ev (describe would return "").
func seen(ev agent.Event, at time.Time) (lastSeen, bool) {
	if ev.Type == agent.EventMessageDelta || strings.TrimSpace(string(ev.Type)) == "" {
		return lastSeen{}, false
	}
	return lastSeen{ev: agent.Event{Type: ev.Type, ToolName: ev.ToolName, Label: ev.Label, IsError: ev.IsError,
		Usage: ev.Usage, Attempt: ev.Attempt, StopReason: ev.StopReason}, at: at}, true
}

var _ hatchery.Observer = (*Page)(nil)

// New makes a Page; Watch gives it its sources.
func New(opts Options) *Page {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Refresh <= 0 {
		opts.Refresh = 2 * time.Second
	}
	p := &Page{opts: opts, last: map[string]lastSeen{}}
	p.SetSecrets(opts.Secrets)
	return p
}

// Watch sets where the facts are read from.
func (p *Page) Watch(src Sources) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.src = src
}

// SetSecrets replaces the values never to show (after a configuration
// reload).
func (p *Page) SetSecrets(secrets []string) {
	var pairs []string
	for _, s := range secrets {
		if s != "" {
			pairs = append(pairs, s, "[redacted]")
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.scrub = strings.NewReplacer(pairs...)
}

// ChickEvent implements hatchery.Observer: it keeps the chick's last event.
func (p *Page) ChickEvent(c hatchery.Info, ev agent.Event) {
	if ev.Type == agent.EventMessageDelta {
		return // the commonest event, and never shown
	}
	at := ev.Time
	if at.IsZero() {
		at = p.opts.Clock.Now()
	}
	ls, ok := seen(ev, at)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last[c.ID] = ls
}

// storedEvents is what a Chicks source may also do: replay a chick's
// stored events (hatchery.Hatchery does).
type storedEvents interface {
	FollowEvents(ctx context.Context, id string, follow bool, f func(hatchery.StoredEvent) error) error
}

// ChickResumed implements hatchery.Observer: a chick a previous Mother
// left running shows the last event it stored, read in the background.
func (p *Page) ChickResumed(c hatchery.Info) {
	p.mu.Lock()
	se, ok := p.src.Chicks.(storedEvents)
	p.mu.Unlock()
	if !ok {
		return
	}
	go func() {
		var last lastSeen
		found := false
		_ = se.FollowEvents(context.Background(), c.ID, false, func(e hatchery.StoredEvent) error {
			if ls, ok := seen(e.Event, e.Event.Time); ok {
				last, found = ls, true
			}
			return nil
		})
		if !found {
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if _, newer := p.last[c.ID]; !newer {
			p.last[c.ID] = last
		}
	}()
}

// ChickEnded implements hatchery.Observer: the chick's last event goes.
func (p *Page) ChickEnded(c hatchery.Info) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, c.ID)
}

// forgetGone drops the last events of chicks no longer alive (one whose
// stored last event was read after it ended).
func (p *Page) forgetGone(alive []Chick) {
	keep := make(map[string]bool, len(alive))
	for _, c := range alive {
		keep[c.ID] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range p.last {
		if !keep[id] {
			delete(p.last, id)
		}
	}
}

// maxWhat bounds a last event's description.
const maxWhat = 80

// describe says what an event was in a few words: its kind, the tool and
// its progress label, never its arguments, results or text.
func describe(ev agent.Event) string {
	var s string
	switch ev.Type {
	case agent.EventMessageDelta:
		return "" // the message_start before it says it
	case agent.EventMessageStart:
		s = "waiting for its model"
	case agent.EventThinking:
		s = "thinking"
	case agent.EventMessageEnd:
		s = fmt.Sprintf("message (%d tokens)", ev.Usage.InputTokens+ev.Usage.OutputTokens)
	case agent.EventToolStart:
		s = "tool " + ev.ToolName
		if ev.Label != "" {
			s += ": " + ev.Label
		}
	case agent.EventToolEnd:
		s = "tool " + ev.ToolName + " done"
		if ev.IsError {
			s = "tool " + ev.ToolName + " failed"
		}
	case agent.EventRetry:
		s = fmt.Sprintf("model call retry %d", ev.Attempt)
	case agent.EventCompactionStart:
		s = "compacting its context"
	case agent.EventCompactionEnd:
		s = "context compacted"
	case agent.EventRunEnd:
		s = "run ended: " + string(ev.StopReason)
	default:
		s = string(ev.Type)
	}
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > maxWhat {
		s = string(r[:maxWhat-1]) + "…"
	}
	return s
}

// LastEvent is a chick's last event as the page shows it.
type LastEvent struct {
	What string    `json:"what"`
	At   time.Time `json:"at"`
}

// Snapshot is everything the page shows, as /status.json serves it.
type Snapshot struct {
	Version       string    `json:"version"`
	ChickImage    string    `json:"chickImage,omitempty"`
	StartedAt     time.Time `json:"startedAt"`
	UptimeSeconds int64     `json:"uptimeSeconds"`
	Now           time.Time `json:"now"`
	Adapters      []Adapter `json:"adapters"`
	Chicks        []Chick   `json:"chicks"`
	Queued        int       `json:"queued"`
	// RecentChicks are the last chicks that ended, newest first.
	RecentChicks []RecentChick `json:"recentChicks"`
	Hosts        []Host        `json:"hosts"`
	Budgets      []Budget      `json:"budgets"`
	NextEvents   []Event       `json:"nextEvents"`
	ToolServers  []ToolServer  `json:"toolServers"`
	Providers    []Provider    `json:"providers"`
	ModelServers []ModelServer `json:"modelServers"`
	// Disk is the data directory's disk (nil: not watched).
	Disk *Disk `json:"disk,omitempty"`
	// Recall is the history index (nil: recall off).
	Recall *Recall `json:"recall,omitempty"`
	// Roles are who has which role; Refusals the latest refusals,
	// newest first (at most RecentRefusals).
	Roles    []Role    `json:"roles"`
	Refusals []Refusal `json:"refusals"`
	refresh  time.Duration
}

// Recall is how far the history index (state/recall.db) is: while
// CatchingUp, Done of Channels channels are caught up; Docs documents
// are indexed, Embedded of them given an embedding of EmbedModel since
// start; Error is the last indexing failure.
type Recall struct {
	CatchingUp bool   `json:"catchingUp"`
	Channels   int    `json:"channels"`
	Done       int    `json:"done"`
	Added      int    `json:"added"`
	Docs       int    `json:"docs"`
	Embedded   int    `json:"embedded"`
	EmbedModel string `json:"embedModel,omitempty"`
	Error      string `json:"error,omitempty"`
}

// Disk is the data directory's disk: State is "ok", "full" or
// "failing"; while not ok, Error says why ("disk full: ...") and Since
// when it began, and Probe what the last probe found.
type Disk struct {
	State string     `json:"state"`
	Error string     `json:"error,omitempty"`
	Since *time.Time `json:"since,omitempty"`
	Probe string     `json:"probe,omitempty"`
}

// RefreshMillis is how often the page fetches its live part, in
// milliseconds (for the template).
func (s Snapshot) RefreshMillis() int64 { return s.refresh.Milliseconds() }

// Adapter is one chat adapter's connection.
type Adapter struct {
	Name       string     `json:"name"`
	Type       string     `json:"type"`
	State      string     `json:"state"`
	Since      *time.Time `json:"since,omitempty"`
	Reconnects int64      `json:"reconnects"`
	Error      string     `json:"error,omitempty"`
}

// Chick is one chick alive.
type Chick struct {
	ID         string     `json:"id"`
	Channel    string     `json:"channel"`
	Tier       string     `json:"tier"`
	State      string     `json:"state"`
	Host       string     `json:"host,omitempty"`
	Tokens     int64      `json:"tokens"`
	CreatedAt  time.Time  `json:"createdAt"`
	AgeSeconds int64      `json:"ageSeconds"`
	LastEvent  *LastEvent `json:"lastEvent,omitempty"`
}

// Host is one Docker host and its load.
type Host struct {
	Name          string     `json:"name"`
	Up            bool       `json:"up"`
	Running       int        `json:"running"`
	Capacity      int        `json:"capacity"`
	Tiers         []string   `json:"tiers,omitempty"`
	EngineVersion string     `json:"engineVersion,omitempty"`
	Since         *time.Time `json:"since,omitempty"`
	Error         string     `json:"error,omitempty"`
	// State is "up", "down" or "incompatible" (up, but its chick image
	// is of a release this Mother does not work with: Incompatible says
	// which, and the fix).
	State        string `json:"state"`
	Incompatible string `json:"incompatible,omitempty"`
}

// Event is one scheduled event (its text is not shown).
type Event struct {
	File     string    `json:"file"`
	Type     string    `json:"type"`
	Channel  string    `json:"channel"`
	Schedule string    `json:"schedule,omitempty"`
	Next     time.Time `json:"next"`
}

// ToolServer is one host tool server.
// ModelServer is a model server's last ping.
type ModelServer struct {
	Name      string     `json:"name"`
	For       string     `json:"for"`
	State     string     `json:"state"`
	LatencyMs int64      `json:"latencyMs"`
	CheckedAt *time.Time `json:"checkedAt,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// Provider is a model provider a fallback chain calls: up, or down
// (cooling down: its calls go to the next model) until Until.
type Provider struct {
	Name      string     `json:"name"`
	State     string     `json:"state"`
	Since     *time.Time `json:"since,omitempty"`
	Until     *time.Time `json:"until,omitempty"`
	Failures  int        `json:"failures"`
	LastOK    *time.Time `json:"lastOK,omitempty"`
	LastError string     `json:"lastError,omitempty"`
}

type ToolServer struct {
	Name        string     `json:"name"`
	Transport   string     `json:"transport"`
	State       string     `json:"state"`
	Restarts    int        `json:"restarts"`
	Since       *time.Time `json:"since,omitempty"`
	NextAttempt *time.Time `json:"nextAttempt,omitempty"`
	Tools       []string   `json:"tools"`
	Error       string     `json:"error,omitempty"`
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Snapshot reads the facts now, scrubbed of every secret.
func (p *Page) Snapshot() Snapshot {
	p.mu.Lock()
	src, scrub := p.src, p.scrub
	last := make(map[string]LastEvent, len(p.last))
	for k, v := range p.last {
		if what := describe(v.ev); what != "" {
			last[k] = LastEvent{What: what, At: v.at}
		}
	}
	p.mu.Unlock()
	// Every string is scrubbed of secrets and shown with its control
	// characters visible (termtext): a label or an outcome a chick wrote
	// reaches a browser, and /status.json a terminal (curl).
	s := func(v string) string { return termtext.String(scrub.Replace(v)) }
	now := p.opts.Clock.Now()
	out := Snapshot{
		Version: s(p.opts.Version), ChickImage: s(p.opts.ChickImage), StartedAt: p.opts.StartedAt, Now: now,
		UptimeSeconds: int64(now.Sub(p.opts.StartedAt).Seconds()),
		Adapters:      []Adapter{}, Chicks: []Chick{}, RecentChicks: []RecentChick{}, Hosts: []Host{}, Budgets: []Budget{}, NextEvents: []Event{}, ToolServers: []ToolServer{}, Providers: []Provider{}, ModelServers: []ModelServer{},
		refresh: p.opts.Refresh,
	}
	out.Roles, out.Refusals = roles(src.Roles, s)
	if src.Adapters != nil {
		for _, r := range src.Adapters.AdapterReports() {
			out.Adapters = append(out.Adapters, Adapter{Name: s(r.Name), Type: s(r.Type), State: string(r.Status.State), Since: optTime(r.Status.Since),
				Reconnects: r.Status.Reconnects, Error: s(r.Status.LastError)})
		}
		sort.Slice(out.Adapters, func(i, j int) bool { return out.Adapters[i].Name < out.Adapters[j].Name })
	}
	if src.Chicks != nil {
		// One list, the ended chicks included: the live ones and the
		// recent ones are then of the same moment.
		all := src.Chicks.List(true)
		for _, in := range all {
			if in.State.Final() {
				continue
			}
			c := Chick{ID: in.ID, Channel: s(in.Channel), Tier: s(in.Tier), State: string(in.State), Host: s(in.Host), Tokens: in.Usage.Total(),
				CreatedAt: in.CreatedAt, AgeSeconds: int64(now.Sub(in.CreatedAt).Seconds())}
			if le, ok := last[in.ID]; ok {
				le.What = s(le.What)
				c.LastEvent = &le
			}
			if in.State == hatchery.StateQueued {
				out.Queued++
			}
			out.Chicks = append(out.Chicks, c)
		}
		sort.SliceStable(out.Chicks, func(i, j int) bool { return out.Chicks[i].CreatedAt.Before(out.Chicks[j].CreatedAt) })
		p.forgetGone(out.Chicks)
		out.RecentChicks = recentChicks(all, s)
		for _, h := range src.Chicks.HostStates() {
			out.Hosts = append(out.Hosts, Host{Name: s(h.Name), Up: h.Up, Running: h.Running, Capacity: h.Capacity, Tiers: h.Tiers,
				EngineVersion: s(h.EngineVersion), Since: optTime(h.Since), Error: s(h.Err), State: hostState(h), Incompatible: s(h.Incompatible)})
		}
	}
	if src.Budgets != nil {
		for _, b := range src.Budgets.Budgets() {
			// Tokens unless only money is capped and no token was used
			// (Mother's own on a priced model), money once any is spent
			// or capped.
			if b.Limit > 0 || b.Used > 0 || b.LimitMicroUSD == 0 {
				out.Budgets = append(out.Budgets, newBudget(s(b.Scope), "tokens", b.Used, b.Limit))
			}
			if b.LimitMicroUSD > 0 || b.UsedMicroUSD > 0 {
				out.Budgets = append(out.Budgets, newBudget(s(b.Scope), "usd", b.UsedMicroUSD, b.LimitMicroUSD))
			}
		}
	}
	if src.Events != nil {
		for _, e := range src.Events.List("") {
			if len(out.NextEvents) == NextEvents {
				break
			}
			if !e.Next.IsZero() {
				out.NextEvents = append(out.NextEvents, Event{File: s(e.File), Type: string(e.Type), Channel: s(e.Channel), Schedule: s(e.Schedule), Next: e.Next})
			}
		}
	}
	if src.ToolServers != nil {
		for _, st := range src.ToolServers.Status() {
			ts := ToolServer{Name: s(st.Name), Transport: st.Transport, State: string(st.State), Restarts: st.Restarts, Since: optTime(st.Since),
				NextAttempt: optTime(st.NextAttempt), Tools: []string{}, Error: s(st.Error)}
			for _, t := range st.Tools {
				ts.Tools = append(ts.Tools, s(t.Qualified))
			}
			slices.Sort(ts.Tools)
			out.ToolServers = append(out.ToolServers, ts)
		}
		sort.Slice(out.ToolServers, func(i, j int) bool { return out.ToolServers[i].Name < out.ToolServers[j].Name })
	}
	if src.Disk != nil {
		st := src.Disk.Status()
		d := &Disk{State: string(st.Condition), Since: optTime(st.Since), Probe: s(st.Probe)}
		if err := st.Err(); err != nil {
			d.Error = s(err.Error())
		}
		out.Disk = d
	}
	if src.Recall != nil {
		r := src.Recall()
		r.EmbedModel, r.Error = s(r.EmbedModel), s(r.Error)
		out.Recall = &r
	}
	if src.Providers != nil {
		for _, st := range src.Providers.ModelServers() {
			ms := ModelServer{Name: s(st.Name), For: strings.Join(st.For, ", "), State: "up", LatencyMs: st.Latency.Milliseconds(), CheckedAt: optTime(st.CheckedAt), Error: s(st.Error)}
			if !st.Up {
				ms.State = "down"
			}
			out.ModelServers = append(out.ModelServers, ms)
		}
		for _, st := range src.Providers.Statuses() {
			pr := Provider{Name: s(st.Name), State: "up", Failures: st.Failures, LastOK: optTime(st.LastOK), LastError: s(st.LastError)}
			if st.Down {
				pr.State, pr.Since, pr.Until = "down", optTime(st.Since), optTime(st.Until)
			}
			out.Providers = append(out.Providers, pr)
		}
	}
	return out
}

// hostState names a host's state: down, incompatible (its chick image is
// of a release this Mother does not work with) or up.
func hostState(h hatchery.HostStatus) string {
	switch {
	case !h.Up:
		return "down"
	case h.Incompatible != "":
		return "incompatible"
	}
	return "up"
}
