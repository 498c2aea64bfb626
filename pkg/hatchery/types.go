package hatchery

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/model"
)

// State is where a chick is in its life.
type State string

// States. Done, Failed and Killed are final.
const (
	StateQueued   State = "queued"
	StateStarting State = "starting"
	StateRunning  State = "running"
	StateStopping State = "stopping"
	StateDone     State = "done"
	StateFailed   State = "failed"
	StateKilled   State = "killed"
)

// Final reports whether s is an end state.
func (s State) Final() bool { return s == StateDone || s == StateFailed || s == StateKilled }

// Reason is why a chick ended (or is being stopped).
type Reason string

// Reasons.
const (
	ReasonDone     Reason = "done"     // it gave its final answer
	ReasonError    Reason = "error"    // its run failed (model error, turns, tool errors)
	ReasonKilled   Reason = "killed"   // an operator or Mother's model cancelled it
	ReasonHung     Reason = "hung"     // it missed its heartbeats
	ReasonTimeout  Reason = "timeout"  // it ran past its wall-clock limit
	ReasonBudget   Reason = "budget"   // the broker refused a call on a budget
	ReasonFlooding Reason = "flooding" // it passed a bound of chicks.events (see AdmitEvent)
	ReasonCrashed  Reason = "crashed"  // its container exited without a result
	ReasonLost     Reason = "lost"     // Mother restarted and could not resume it
	ReasonNoStart  Reason = "no_start" // its container could not be started
	ReasonShutdown Reason = "shutdown" // Mother is going away for good
	// ReasonIncompatible: its release does not work with this Mother's
	// (pkg/version); the outcome is the sentence that says so.
	ReasonIncompatible Reason = "incompatible"
)

// Errors callers branch on.
var (
	ErrQueueFull    = errors.New("chick queue full")
	ErrUnknownChick = errors.New("no such chick")
	ErrBadToken     = errors.New("token not valid for this chick")
	ErrChickEnded   = errors.New("chick has ended")
	ErrUnknownTier  = errors.New("unknown tier")
	ErrClosed       = errors.New("hatchery closed")
	ErrSeqGap       = errors.New("event sequence gap")
	// ErrFlooding: the chick passed a bound of chicks.events and is being
	// stopped; the error's text is its outcome ("flooding: ...").
	ErrFlooding = errors.New("flooding")
	// ErrHostsUnreachable: Reconcile could not list the chicks of one or
	// more Docker hosts; their chicks were left as they are.
	ErrHostsUnreachable = errors.New("did not answer")
	// ErrUserLimit: the requester already has chicks.maxPerUser chicks
	// running or queued (wrapped in a *RefusedError).
	ErrUserLimit = errors.New("per-person chick limit reached")
	// ErrDisk: the data directory cannot be written (a full or failing
	// disk): a chick's events could not be kept, so none is spawned.
	ErrDisk = errors.New("chick events cannot be stored")
	// ErrSpawnedBefore: a chick was spawned for the request's Key
	// already (SpawnRequest.Key); Spawn returns it with this error and
	// starts no other.
	ErrSpawnedBefore = errors.New("a chick was spawned for this request already")
)

// RefusedError is a spawn refused by a per-person limit
// (chicks.maxPerUser, budgets.userDailyTokens). Reason says which limit
// and when it frees up, in words a chat user can be shown; Err is what
// callers branch on (ErrUserLimit, or an error matching
// model.ErrBudgetExhausted).
type RefusedError struct {
	Reason string
	Err    error
}

func (e *RefusedError) Error() string { return "spawn chick: " + e.Reason }

func (e *RefusedError) Unwrap() error { return e.Err }

// Requester is the person a chick counts against for the per-person
// limits: the user qualified by adapter ("discord/123"), so a Discord
// user and a Slack user are different people. Empty when userID is (a
// chick spawned by a scheduled event counts against no one).
func Requester(adapter, userID string) string {
	if userID == "" {
		return ""
	}
	return chat.QualifiedID(adapter, userID)
}

// Requester is who the chick counts against (see the function Requester).
func (r Record) Requester() string { return Requester(r.Adapter, r.StartedBy) }

// Result is a chick's last word.
type Result struct {
	Text        string   `json:"text,omitempty"`
	StopReason  string   `json:"stopReason,omitempty"`
	Error       string   `json:"error,omitempty"`
	OutputFiles []string `json:"outputFiles,omitempty"`
}

// Record is what Mother keeps about a chick, on disk in chicks.jsonl. The
// token is kept only as its SHA-256.
type Record struct {
	ID          string    `json:"id"`
	Adapter     string    `json:"adapter"`
	ChannelID   string    `json:"channelId"`
	ChannelDir  string    `json:"channelDir,omitempty"`
	StartedBy   string    `json:"startedBy,omitempty"`
	Skills      string    `json:"skills,omitempty"`
	SkillsTo    string    `json:"skillsTo,omitempty"` // "" (the channel's skills/) or SkillsToWorkspace
	Goal        string    `json:"goal"`
	Tier        string    `json:"tier"`
	Model       string    `json:"model"`
	System      string    `json:"system,omitempty"`
	State       State     `json:"state"`
	Host        string    `json:"host,omitempty"`
	ContainerID string    `json:"containerId,omitempty"`
	TokenHash   string    `json:"tokenHash,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
	StartedAt   time.Time `json:"startedAt,omitzero"`
	EndedAt     time.Time `json:"endedAt,omitzero"`
	Reason      Reason    `json:"reason,omitempty"`
	Outcome     string    `json:"outcome,omitempty"`
	Result      *Result   `json:"result,omitempty"`
	ExitCode    int64     `json:"exitCode,omitempty"`
	KeepUntil   time.Time `json:"keepUntil,omitzero"`
	Removed     bool      `json:"removed,omitempty"`
	// Unreported is set when the chick's end is stored and cleared by
	// Reported once Mother has told its channel. A chick still unreported
	// when Mother starts is announced again by Reconcile, so an end that
	// came just before a crash is not lost.
	Unreported bool `json:"unreported,omitempty"`
	// Key is the request it was spawned for (SpawnRequest.Key), so a
	// request made again after a crash finds it instead of hatching a
	// second chick.
	Key string `json:"key,omitempty"`
}

// SkillsToWorkspace is Record.SkillsTo for a chick whose skills go to the
// workspace's skills/ (shared by every channel).
const SkillsToWorkspace = "workspace"

// Info is a snapshot of one chick for observers and momctl.
type Info struct {
	Record
	// Channel is the qualified channel id ("slack-acme/C123").
	Channel string
	Usage   model.Usage
	// AnsweredBy are the fallbacks that answered some of its model calls
	// ("<provider>/<model>"); none when its tier's model answered all.
	AnsweredBy []string
}

// File is a file a chick sent back, stored in its channel's directory.
type File struct {
	// Path is where it is stored, absolute.
	Path string
	// RelPath is Path relative to the channel directory.
	RelPath string
	// Attach asks for the file to be posted to the channel.
	Attach bool
	Title  string
	Size   int64
}

// Observer hears what chicks do; any number subscribe (Hatchery.Subscribe).
// Calls come from the hatchery's goroutines and must not block for long. Every chick that was spawned or resumed
// ends with exactly one ChickEnded; chicks reaped at start without having
// been resumed get ChickEnded too.
type Observer interface {
	ChickEvent(c Info, ev agent.Event)
	ChickFile(c Info, f File)
	ChickResumed(c Info)
	ChickEnded(c Info)
}

// Meter reports a chick's token usage (the broker's ledger).
type Meter interface {
	ChickUsage(id string) model.Usage
}

// FallbackMeter is a Meter that also tells which fallbacks answered a
// chick's calls.
type FallbackMeter interface {
	ChickAnsweredBy(id string) []string
}

// Forgetter is a Meter that keeps something per chick: the hatchery tells
// it when it forgets an ended chick (MaxRemembered), so that neither grows
// with every chick a long-running Mother spawns.
type Forgetter interface {
	ForgetChick(id string)
}

// UserMeter is a Meter that also keeps a daily budget per requester (the
// broker does): Spawn asks it before a chick of a person is created.
type UserMeter interface {
	// CheckUser returns an error matching model.ErrBudgetExhausted,
	// saying when the budget resets, when user has spent today's.
	CheckUser(user string) error
}

// Assignment is what a chick receives when it joins.
type Assignment struct {
	ChickID           string
	Channel           string
	Goal              string
	Tier              string
	System            string
	MaxTurns          int
	WallTimeout       time.Duration
	TokenBudget       int64
	HeartbeatInterval time.Duration
}

// NopObserver ignores everything.
type NopObserver struct{}

// ChickEvent implements Observer.
func (NopObserver) ChickEvent(Info, agent.Event) {}

// ChickFile implements Observer.
func (NopObserver) ChickFile(Info, File) {}

// ChickResumed implements Observer.
func (NopObserver) ChickResumed(Info) {}

// ChickEnded implements Observer.
func (NopObserver) ChickEnded(Info) {}

var _ Observer = NopObserver{}

// publisher hands what chicks do to every subscriber, in the order they
// subscribed, on the hatchery goroutine where it happened: each
// subscriber sees the same calls in the same order an only observer did.
type publisher struct {
	mu   sync.RWMutex
	next int
	subs []subscriber
}

type subscriber struct {
	id int
	o  Observer
}

var _ Observer = (*publisher)(nil)

func (p *publisher) subscribe(o Observer) func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	id := p.next
	// Copy on write: a slice handed to each is never changed, so each
	// takes it without a copy (it runs for every chick event).
	p.subs = append(slices.Clip(p.subs), subscriber{id, o})
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.subs = slices.DeleteFunc(slices.Clone(p.subs), func(s subscriber) bool { return s.id == id })
		})
	}
}

// each calls f for every subscriber, outside the lock (a subscriber may
// unsubscribe from its callback).
func (p *publisher) each(f func(Observer)) {
	p.mu.RLock()
	subs := p.subs // never changed in place (see subscribe)
	p.mu.RUnlock()
	for _, s := range subs {
		f(s.o)
	}
}

// ChickEvent implements Observer.
func (p *publisher) ChickEvent(c Info, ev agent.Event) {
	p.each(func(o Observer) { o.ChickEvent(c, ev) })
}

// ChickFile implements Observer.
func (p *publisher) ChickFile(c Info, f File) { p.each(func(o Observer) { o.ChickFile(c, f) }) }

// ChickResumed implements Observer.
func (p *publisher) ChickResumed(c Info) { p.each(func(o Observer) { o.ChickResumed(c) }) }

// ChickEnded implements Observer.
func (p *publisher) ChickEnded(c Info) { p.each(func(o Observer) { o.ChickEnded(c) }) }

// A subscriber may also hear the lifecycle's countable moments by
// implementing any of these one-method interfaces (pkg/metrics does). They
// are called with the hatchery's lock held: they must be quick and must not
// call back into the hatchery.
type (
	// SpawnObserver hears that a chick was accepted (started or queued).
	SpawnObserver interface{ ChickSpawned(r Record) }
	// JoinObserver hears a chick dial Mother for the first time, latency
	// after its container was asked for (create, copy, start, dial).
	JoinObserver interface {
		ChickJoined(r Record, latency time.Duration)
	}
	// FinishObserver hears a chick end in this process (not the ends a
	// restart announces again); ran is its time since it got a slot (0 if
	// it never did).
	FinishObserver interface {
		ChickFinished(r Record, ran time.Duration)
	}
)

func (p *publisher) spawned(r Record) {
	p.each(func(o Observer) {
		if s, ok := o.(SpawnObserver); ok {
			s.ChickSpawned(r)
		}
	})
}

func (p *publisher) joined(r Record, latency time.Duration) {
	p.each(func(o Observer) {
		if s, ok := o.(JoinObserver); ok {
			s.ChickJoined(r, latency)
		}
	})
}

func (p *publisher) finished(r Record, ran time.Duration) {
	p.each(func(o Observer) {
		if s, ok := o.(FinishObserver); ok {
			s.ChickFinished(r, ran)
		}
	})
}
