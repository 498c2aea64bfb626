package hatchery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mother-chat/mother/pkg/chat"
)

// SpawnRequest asks for a chick.
type SpawnRequest struct {
	Adapter   string
	ChannelID string
	Goal      string
	// Tier is a configured tier; empty: chicks.defaultTier.
	Tier string
	// System is extra system prompt text for the chick.
	System string
	Files  Files
	// StartedBy is the user (of Adapter) who asked for it: "stop all"
	// and the per-person limits go by it. Empty for a chick no person
	// asked for (a scheduled event's).
	StartedBy string
	// SkillsTo is where the skills it sends back go (Record.SkillsTo).
	SkillsTo string
	// Key, if set, names the request: Spawn hatches at most one chick
	// per key (Record.Key). Mother's spawn_chick sets it to the run's
	// message and the call's place in the run, so a run a power cut sent
	// back to before its spawn_chick call (its context not yet durable,
	// the chick's record already) gets the chick it had asked for again,
	// not a second one.
	Key string
}

// Spawn creates a chick: it starts at once when a slot is free, or waits
// in the queue. It fails with ErrQueueFull when the queue is full and
// ErrUnknownTier for a tier not in the configuration, and with
// ErrImageMissing when every host that serves the tier lacks the chick
// image (ErrImageIncompatible when some have one of a release this Mother
// does not work with), and with ErrDisk while the data directory cannot be written (the
// chick's events could not be kept). A spawn for a
// person who has reached chicks.maxPerUser or spent today's
// budgets.userDailyTokens fails with a *RefusedError. A request whose
// Key a chick already has returns that chick with ErrSpawnedBefore,
// whatever state it is in, and spawns nothing.
func (h *Hatchery) Spawn(ctx context.Context, req SpawnRequest) (Info, error) {
	if strings.TrimSpace(req.Goal) == "" {
		return Info{}, errors.New("spawn chick: empty goal")
	}
	if in, ok := h.Spawned(req.Key); ok {
		return in, fmt.Errorf("spawn chick: %w (%s)", ErrSpawnedBefore, in.ID)
	}
	if h.disk != nil {
		if err := h.disk(); err != nil {
			return Info{}, fmt.Errorf("spawn chick: %w: %w", ErrDisk, err)
		}
	}
	tier := req.Tier
	if tier == "" {
		tier = h.cfg.DefaultTier
	}
	t, ok := h.cfg.Tiers[tier]
	if !ok {
		return Info{}, fmt.Errorf("spawn chick: %w %q (configured: %s)", ErrUnknownTier, tier, strings.Join(slices.Sorted(mapsKeys(h.cfg.Tiers)), ", "))
	}
	if !h.anyHostServes(tier) {
		return Info{}, fmt.Errorf("spawn chick: no Docker host serves tier %q", tier)
	}
	if err := h.noImageError(ctx, tier); err != nil {
		return Info{}, err
	}
	user := Requester(req.Adapter, req.StartedBy)
	if um, ok := h.meter.(UserMeter); ok && user != "" {
		if err := um.CheckUser(user); err != nil {
			return Info{}, &RefusedError{Reason: err.Error(), Err: err}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return Info{}, ErrClosed
	}
	if c := h.byKeyLocked(req.Key); c != nil {
		// Spawned meanwhile (the checks above run without the lock).
		return h.info(c), fmt.Errorf("spawn chick: %w (%s)", ErrSpawnedBefore, c.rec.ID)
	}
	if err := h.checkUserLocked(user); err != nil {
		return Info{}, err
	}
	id := h.newID()
	c := &chick{
		rec: Record{
			ID: id, Adapter: req.Adapter, ChannelID: req.ChannelID, ChannelDir: req.Files.ChannelDir, Skills: req.Files.SharedSkills,
			Goal: req.Goal, Tier: tier, Model: t.Model, System: req.System, State: StateQueued, CreatedAt: h.clock.Now(),
			StartedBy: req.StartedBy, SkillsTo: req.SkillsTo, Key: req.Key,
		},
		stopCh: make(chan struct{}),
		ended:  make(chan struct{}),
	}
	hs := h.freeHost(c)
	if hs == nil && len(h.queue) >= h.cfg.QueueSize {
		return Info{}, fmt.Errorf("spawn chick: %w (%d waiting)", ErrQueueFull, len(h.queue))
	}
	h.chicks[id] = c
	h.obs.spawned(c.rec)
	if hs == nil {
		h.queue = append(h.queue, c)
		h.persist(c)
		h.logger.Info("chick queued", "chick", id, "channel", chat.QualifiedID(req.Adapter, req.ChannelID), "tier", tier, "queue", len(h.queue))
		return h.info(c), nil
	}
	h.begin(c, hs)
	return h.info(c), nil
}

// Spawned returns the chick spawned for request key (SpawnRequest.Key),
// if the hatchery knows one: a live chick, or an ended one it still
// remembers (MaxRemembered; after a restart, every record chicks.jsonl
// holds, up to that many ended ones).
func (h *Hatchery) Spawned(key string) (Info, bool) {
	if key == "" {
		return Info{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if c := h.byKeyLocked(key); c != nil {
		return h.info(c), true
	}
	return Info{}, false
}

// byKeyLocked is the chick spawned for key, or nil. Callers hold h.mu.
func (h *Hatchery) byKeyLocked(key string) *chick {
	if key == "" {
		return nil
	}
	for _, c := range h.chicks {
		if c.rec.Key == key {
			return c
		}
	}
	return nil
}

// checkUserLocked refuses a chick of user when they already have
// chicks.maxPerUser running or queued, across channels. Callers hold h.mu.
func (h *Hatchery) checkUserLocked(user string) error {
	lim := h.cfg.MaxPerUser
	if lim <= 0 || user == "" {
		return nil
	}
	var live []string
	for _, o := range h.chicks {
		if !o.rec.State.Final() && o.rec.Requester() == user {
			live = append(live, o.rec.ID)
		}
	}
	if len(live) < lim {
		return nil
	}
	slices.Sort(live)
	n := fmt.Sprintf("%d chicks", len(live))
	if len(live) == 1 {
		n = "1 chick"
	}
	return &RefusedError{Err: ErrUserLimit, Reason: fmt.Sprintf("%s already has %s running or queued (%s), the most one person may have (chicks.maxPerUser is %d); another can start when one of them ends",
		user, n, strings.Join(live, ", "), lim)}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (h *Hatchery) newID() string {
	for {
		id := "c-" + randomHex(4)
		if _, dup := h.chicks[id]; !dup {
			return id
		}
	}
}

func (h *Hatchery) anyHostServes(tier string) bool {
	for _, hs := range h.hosts {
		if len(hs.Tiers) == 0 || slices.Contains(hs.Tiers, tier) {
			return true
		}
	}
	return false
}

// freeHost returns a host with room for c, or nil when a cap is reached.
// Callers hold h.mu.
func (h *Hatchery) freeHost(c *chick) *host {
	total, inChannel := 0, 0
	for _, o := range h.chicks {
		if o.rec.State == StateStarting || o.rec.State == StateRunning || o.rec.State == StateStopping {
			total++
			if o.rec.Adapter == c.rec.Adapter && o.rec.ChannelID == c.rec.ChannelID {
				inChannel++
			}
		}
	}
	if h.reconciling || total >= h.cfg.MaxConcurrent || inChannel >= h.cfg.MaxPerChannel {
		return nil
	}
	var best *host
	for _, hs := range h.hosts {
		if len(hs.Tiers) > 0 && !slices.Contains(hs.Tiers, c.rec.Tier) {
			continue
		}
		if hs.running >= hs.Capacity || hs.health.down || hs.image.unusable() {
			continue
		}
		// Most free capacity first (decision 10).
		if best == nil || hs.Capacity-hs.running > best.Capacity-best.running {
			best = hs
		}
	}
	return best
}

// begin moves c to starting on hs and starts its container in the
// background. Callers hold h.mu.
func (h *Hatchery) begin(c *chick, hs *host) {
	tok := randomHex(32)
	c.host = hs
	hs.running++
	c.rec.State = StateStarting
	c.rec.Host = hs.Name
	c.rec.TokenHash = hashToken(tok)
	c.rec.StartedAt = h.clock.Now()
	c.lastSeen = c.rec.StartedAt.Add(h.grace)
	h.persist(c)
	h.logger.Info("chick starting", "chick", c.rec.ID, "channel", chat.QualifiedID(c.rec.Adapter, c.rec.ChannelID), "tier", c.rec.Tier, "host", hs.Name)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.startContainer(c, hs, tok)
	}()
}

// dequeueLocked starts queued chicks while slots are free. Callers hold
// h.mu.
func (h *Hatchery) dequeueLocked() {
	for i := 0; i < len(h.queue); {
		c := h.queue[i]
		hs := h.freeHost(c)
		if hs == nil {
			i++
			continue
		}
		h.queue = slices.Delete(h.queue, i, i+1)
		h.begin(c, hs)
	}
}

// QueueLen is how many chicks wait for a slot.
func (h *Hatchery) QueueLen() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.queue)
}
