package egress

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/fsync"
)

// StateFile is where approvals are kept, in the state directory
// (DATA/state/egress.json).
const StateFile = "egress.json"

// Reasons a connection is refused, as the chick and the channel read them
// ("blocked: github.com:443 (not allowed for this chick)").
const (
	ReasonNotAllowed = "not allowed for this chick"
	ReasonCapped     = "byte cap reached"
)

// ErrUnavailable: nobody answers access requests now (Mother is shutting
// down); the chick should ask again.
var ErrUnavailable = errors.New("access requests are not answered now; ask again")

// ChickInfo names a chick to the policy.
type ChickInfo struct {
	ID string
	// Channel is the qualified channel id ("slack-acme/C123").
	Channel string
	Tier    string
}

// Scope is how far an approval reaches.
type Scope int

// Scopes.
const (
	// ScopeChick: this chick only, until it ends ("allow <id>").
	ScopeChick Scope = iota + 1
	// ScopeChannel: every chick of the channel, kept ("always <id>").
	ScopeChannel
)

func (s Scope) String() string {
	switch s {
	case ScopeChick:
		return "this chick"
	case ScopeChannel:
		return "this channel"
	}
	return "none"
}

// Grant is the answer to a chick's request_access.
type Grant struct {
	Granted bool
	// Scope is what a grant covers (0 when the destination was already
	// allowed or nothing was granted).
	Scope Scope
	// Message says what happened, for the chick's model.
	Message string
}

// Options build a Policy.
type Options struct {
	// Config is chicks (its egress and tiers).
	Config config.Chicks
	// StateDir holds StateFile (DATA/state); empty: approvals are not
	// kept across restarts (tests).
	StateDir string
	// LoadSent tells what a chick sent out through its gate before this
	// process started (the hatchery's per-chick egress log), so a restart
	// does not reset its byte cap. It is called once per chick, before the
	// first bytes this process counts for it. Nil: 0.
	LoadSent func(chickID string) int64
	Logger   *slog.Logger
}

// Policy decides what a chick may reach through its gate: the union of
// chicks.egress.allow, its tier's egress.allow, its channel's
// chicks.egress.channels entry, the channel's approvals ("always") and the
// chick's own ("once"). It also keeps each chick's byte ledger. Safe for
// concurrent use.
type Policy struct {
	path     string
	logger   *slog.Logger
	loadSent func(string) int64

	mu  sync.RWMutex
	cfg compiled
	// st is what StateFile holds; chickOK and channelOK its compiled form.
	st        state
	chickOK   map[string][]entry
	channelOK map[string][]entry

	lmu    sync.Mutex
	ledger map[string]*ledger
}

// compiled is the configuration in the form the matching uses.
type compiled struct {
	base     []entry
	tiers    map[string][]entry
	channels map[string][]entry
	hosts    map[string][]string
	maxBytes int64
	timeout  time.Duration
	// perChick and perChannel cap the pending access requests.
	perChick, perChannel int
}

// state is StateFile.
type state struct {
	// Channels: approvals for every chick of a channel ("always").
	Channels map[string][]string `json:"channels,omitempty"`
	// Chicks: approvals for one running chick ("once"), dropped when it
	// ends.
	Chicks map[string]chickState `json:"chicks,omitempty"`
}

type chickState struct {
	Channel string   `json:"channel"`
	Allow   []string `json:"allow"`
}

type ledger struct {
	once sync.Once
	sent atomic.Int64
}

// NewPolicy builds the policy from the configuration and the approvals
// kept in StateDir. A StateFile that cannot be read is an error (fix or
// remove it); an entry in it that is not a valid destination is skipped
// with a warning.
func NewPolicy(opts Options) (*Policy, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Policy{logger: opts.Logger.With("component", "egress"), loadSent: opts.LoadSent, ledger: map[string]*ledger{}}
	if opts.StateDir != "" {
		p.path = filepath.Join(opts.StateDir, StateFile)
		b, err := os.ReadFile(p.path)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("egress approvals: %w", err)
		default:
			if err := json.Unmarshal(b, &p.st); err != nil {
				return nil, fmt.Errorf("egress approvals %s: %w (fix or remove the file; it holds the destinations admins approved)", p.path, err)
			}
		}
	}
	p.compileState()
	p.SetConfig(opts.Config)
	return p, nil
}

// SetConfig applies a new chicks configuration (a reload of config.json):
// allowlists, hosts, byte cap and request timeout. Approvals stay.
func (p *Policy) SetConfig(cc config.Chicks) {
	c := compiled{
		base:     p.compileList("chicks.egress.allow", cc.Egress.Allow),
		tiers:    map[string][]entry{},
		channels: map[string][]entry{},
		hosts:    map[string][]string{},
		timeout:  cc.Egress.RequestTimeout.Duration,
	}
	for name, t := range cc.Tiers {
		c.tiers[name] = p.compileList("chicks.tiers."+name+".egress.allow", t.Egress.Allow)
	}
	for ch, list := range cc.Egress.Channels {
		c.channels[ch] = p.compileList("chicks.egress.channels."+ch, list)
	}
	for name, addr := range cc.Egress.Hosts {
		if a, err := netip.ParseAddr(addr); err == nil {
			n := normalizeName(name)
			c.hosts[n] = append(c.hosts[n], a.Unmap().String())
		}
	}
	mb, err := cc.Egress.MaxBytesValue()
	if err != nil {
		mb, _ = config.Egress{}.MaxBytesValue()
	}
	c.maxBytes = mb
	c.perChick, c.perChannel = cc.Egress.PendingCaps()
	if c.timeout <= 0 {
		c.timeout = config.DefaultAccessRequestTimeout
	}
	p.mu.Lock()
	p.cfg = c
	p.mu.Unlock()
}

func (p *Policy) compileList(where string, list []string) []entry {
	out := make([]entry, 0, len(list))
	for _, d := range list {
		e, err := parseEntry(d)
		if err != nil {
			p.logger.Warn("egress entry skipped", "field", where, "entry", d, "err", err)
			continue
		}
		out = append(out, e)
	}
	return out
}

// compileState rebuilds chickOK and channelOK from st. Callers hold p.mu
// (or own p alone).
func (p *Policy) compileState() {
	p.chickOK, p.channelOK = map[string][]entry{}, map[string][]entry{}
	for ch, list := range p.st.Channels {
		p.channelOK[ch] = p.compileList(StateFile+" channels."+ch, list)
	}
	for id, cs := range p.st.Chicks {
		p.chickOK[id] = p.compileList(StateFile+" chicks."+id, cs.Allow)
	}
}

// Allowed reports whether chick c may connect to host:port, and why not.
func (p *Policy) Allowed(c ChickInfo, host string, port int) (bool, string) {
	if port < 1 || port > 65535 {
		return false, ReasonNotAllowed
	}
	r, err := destEntry(host, port)
	if err != nil {
		return false, ReasonNotAllowed
	}
	if p.covered(c, r) {
		return true, ""
	}
	return false, ReasonNotAllowed
}

// Covered reports whether the destination a chick asks for
// ("host[:port]", as request_access takes it) is already allowed for it:
// every connection the request names would be allowed. A request without
// a port is covered only by entries without one.
func (p *Policy) Covered(c ChickInfo, destination string) (bool, error) {
	r, err := parseEntry(destination)
	if err != nil {
		return false, err
	}
	return p.covered(c, r), nil
}

func (p *Policy) covered(c ChickInfo, r entry) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, list := range [][]entry{p.cfg.base, p.cfg.tiers[c.Tier], p.cfg.channels[c.Channel], p.channelOK[c.Channel], p.chickOK[c.ID]} {
		for _, e := range list {
			if e.covers(r) {
				return true
			}
		}
	}
	return false
}

// Trusted are the exact addresses the operator listed for chick c (in
// chicks.egress.allow, its tier's and its channel's lists) that admit
// port, each written with that port ("10.0.0.5:8080", "[fd00::7]:443"):
// the only loopback, private or link-local addresses its gate may connect
// to for a connection to port. An entry with a port trusts its address at
// that port only ("10.0.0.5:8080" trusts nothing at port 22, whatever
// name the chick connected to); one without trusts it at every port, as
// the operator wrote. Chat approvals never add to them.
func (p *Policy) Trusted(c ChickInfo, port int) []string {
	if port < 1 || port > 65535 {
		return nil
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []string
	for _, list := range [][]entry{p.cfg.base, p.cfg.tiers[c.Tier], p.cfg.channels[c.Channel]} {
		for _, e := range list {
			if !e.addr.IsValid() || (e.port != 0 && e.port != port) {
				continue
			}
			if s := netJoin(e.addr.String(), port); !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Addresses are what host resolves to by chicks.egress.hosts (nil: not
// listed, the gate asks DNS).
func (p *Policy) Addresses(host string) []string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return slices.Clone(p.cfg.hosts[normalizeName(host)])
}

// RequestTimeout is how long a request_access waits for an admin.
func (p *Policy) RequestTimeout() time.Duration {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.cfg.timeout
}

// MaxBytes is the byte cap per chick (0: none).
func (p *Policy) MaxBytes() int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.cfg.maxBytes
}

// Approve adds destination (one host and port, as a chick may ask for
// it: see ParseRequest; never a wildcard or a destination without a
// port) to chick c's allowlist (ScopeChick) or its channel's
// (ScopeChannel), and saves the approvals before it returns; on an error
// nothing changed. A chat approval never makes a private address
// reachable (see Trusted).
func (p *Policy) Approve(c ChickInfo, scope Scope, destination string) error {
	d, err := ParseRequest(destination)
	if err != nil {
		return fmt.Errorf("approve: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	next := p.st.clone()
	switch scope {
	case ScopeChick:
		if c.ID == "" {
			return errors.New("approve: no chick id")
		}
		cs := next.Chicks[c.ID]
		cs.Channel = c.Channel
		if !slices.Contains(cs.Allow, d) {
			cs.Allow = append(cs.Allow, d)
		}
		if next.Chicks == nil {
			next.Chicks = map[string]chickState{}
		}
		next.Chicks[c.ID] = cs
	case ScopeChannel:
		if c.Channel == "" {
			return errors.New("approve: no channel")
		}
		if next.Channels == nil {
			next.Channels = map[string][]string{}
		}
		if !slices.Contains(next.Channels[c.Channel], d) {
			next.Channels[c.Channel] = append(next.Channels[c.Channel], d)
		}
	default:
		return fmt.Errorf("approve: unknown scope %d", scope)
	}
	return p.commitLocked(next)
}

// ChickEnded drops chick id's own approvals and its byte ledger.
func (p *Policy) ChickEnded(id string) error {
	p.lmu.Lock()
	delete(p.ledger, id)
	p.lmu.Unlock()
	return p.DropChicks(func(c string) bool { return c == id })
}

// DropChicks drops the approvals of the chicks for which ended is true
// (at start: those that ended while Mother was down).
func (p *Policy) DropChicks(ended func(id string) bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var drop []string
	for id := range p.st.Chicks {
		if ended(id) {
			drop = append(drop, id)
		}
	}
	if len(drop) == 0 {
		return nil
	}
	next := p.st.clone()
	for _, id := range drop {
		delete(next.Chicks, id)
	}
	return p.commitLocked(next)
}

// commitLocked saves next and makes it current. Callers hold p.mu.
func (p *Policy) commitLocked(next state) error {
	if p.path != "" {
		b, err := json.MarshalIndent(next, "", "  ")
		if err != nil {
			return fmt.Errorf("save egress approvals: %w", err)
		}
		if err := fsync.MkdirAll(filepath.Dir(p.path), 0o700); err != nil {
			return fmt.Errorf("save egress approvals: %w", err)
		}
		if err := atomicfile.WriteFile(p.path, append(b, '\n'), 0o600); err != nil {
			return fmt.Errorf("save egress approvals: %w", err)
		}
	}
	p.st = next
	p.compileState()
	return nil
}

func (s state) clone() state {
	out := state{}
	if s.Channels != nil {
		out.Channels = map[string][]string{}
		for k, v := range s.Channels {
			out.Channels[k] = slices.Clone(v)
		}
	}
	if s.Chicks != nil {
		out.Chicks = map[string]chickState{}
		for k, v := range s.Chicks {
			out.Chicks[k] = chickState{Channel: v.Channel, Allow: slices.Clone(v.Allow)}
		}
	}
	return out
}

func (p *Policy) ledgerOf(id string) *ledger {
	p.lmu.Lock()
	l := p.ledger[id]
	if l == nil {
		l = &ledger{}
		p.ledger[id] = l
	}
	p.lmu.Unlock()
	// Outside p.lmu: LoadSent reads the hatchery's files.
	l.once.Do(func() {
		if p.loadSent != nil {
			l.sent.Add(p.loadSent(id))
		}
	})
	return l
}

// AddSent counts n more bytes sent out by chick id and returns its total.
func (p *Policy) AddSent(id string, n int64) int64 {
	return p.ledgerOf(id).sent.Add(max(n, 0))
}

// Sent is what chick id has sent out through its gate.
func (p *Policy) Sent(id string) int64 { return p.ledgerOf(id).sent.Load() }

// Remaining is how many more bytes chick id may send out; capped is false
// when there is no cap (chicks.egress.maxBytes "unlimited").
func (p *Policy) Remaining(id string) (remaining int64, capped bool) {
	limit := p.MaxBytes()
	if limit <= 0 {
		return 0, false
	}
	return max(limit-p.Sent(id), 0), true
}

// entry is one allowlist entry: a name, a "*.domain" wildcard or an
// address, with a port (0: any).
type entry struct {
	name     string // lower case, no trailing dot; the domain of a wildcard
	wildcard bool
	addr     netip.Addr
	port     int
}

func parseEntry(d string) (entry, error) {
	if err := config.ValidDestination(d); err != nil {
		return entry{}, err
	}
	host, port, err := config.SplitDestination(d)
	if err != nil {
		return entry{}, err
	}
	if dom, ok := strings.CutPrefix(host, "*."); ok {
		return entry{name: normalizeName(dom), wildcard: true, port: port}, nil
	}
	return destEntry(host, port)
}

// destEntry is the destination a chick connects to, as an entry.
func destEntry(host string, port int) (entry, error) {
	host = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(host), "["), "]")
	if a, err := netip.ParseAddr(host); err == nil {
		return entry{addr: a.Unmap().WithZone(""), port: port}, nil
	}
	n := normalizeName(host)
	if n == "" || strings.ContainsAny(n, "*/ :@") {
		return entry{}, fmt.Errorf("bad host %q", host)
	}
	return entry{name: n, port: port}, nil
}

func normalizeName(s string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".")
}

// covers reports whether every connection r stands for is allowed by e.
func (e entry) covers(r entry) bool {
	if e.port != 0 && e.port != r.port {
		return false
	}
	switch {
	case e.addr.IsValid():
		return r.addr.IsValid() && e.addr == r.addr
	case r.addr.IsValid():
		return false // a name never allows an address literal
	case e.wildcard:
		// *.d covers every subdomain of d (not d itself), and a narrower
		// wildcard *.x.d.
		return strings.HasSuffix(r.name, "."+e.name) || (r.wildcard && r.name == e.name)
	case r.wildcard:
		return false
	}
	return e.name == r.name
}

// String is the entry as an allowlist would write it.
func (e entry) String() string {
	h := e.name
	switch {
	case e.addr.IsValid():
		h = e.addr.String()
	case e.wildcard:
		h = "*." + e.name
	}
	if e.port == 0 {
		return h
	}
	return netJoin(h, e.port)
}

// Destination formats host and port as "host:port" ("[2001:db8::1]:443").
func Destination(host string, port int) string {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if port <= 0 {
		return host
	}
	return netJoin(host, port)
}

func netJoin(h string, port int) string {
	if strings.Contains(h, ":") {
		return "[" + h + "]:" + strconv.Itoa(port)
	}
	return h + ":" + strconv.Itoa(port)
}
