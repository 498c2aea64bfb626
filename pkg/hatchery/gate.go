package hatchery

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/wire"
)

// Isolated chicks (chicks.network "isolated", docs/isolation.md): a chick
// has no network but its own loopback, and reaches Mother and the allowed
// destinations only through the gate of its host, whose sockets it sees
// in the gate's volume. The hatchery keeps one gate per host: made before
// the first chick goes there (or at Reconcile), watched, and started
// again when it exits; removed when the network mode no longer needs it.

// Labels of a gate container (besides LabelInstance).
const (
	// LabelGate marks a gate; its value is the Mother instance.
	LabelGate = "mother.gate"
	// LabelGateHost is the name in config of the host the gate serves.
	LabelGateHost = "mother.gate.host"
	// LabelGateSpec is a hash of the gate's spec: a gate with another is
	// replaced.
	LabelGateSpec = "mother.gate.spec"
)

// GateResources are a gate's limits: it relays bytes and holds no state.
var GateResources = config.Resources{Memory: "64m", Pids: 128}

// Proxy settings of an isolated chick: its tools (curl, pip, git) use the
// chick's own forwarder, which hands each connection to the gate.
var (
	chickProxyURL = "http://" + wire.ChickProxyAddr
	chickNoProxy  = "localhost,127.0.0.1"
)

// GateKeys derive the gate's GateService token from the gate secret
// (egress.Secret implements it). The chicks' gate keys derive from their
// gate's token (wire.ChickGateKey), so the gate can check them itself.
type GateKeys interface {
	GateToken(instance, host string) string
}

// processKeys derive keys from a random secret of this process: for a
// hatchery given no GateKeys (tests). A Mother restart makes new keys.
type processKeys struct{ key []byte }

func newProcessKeys() processKeys {
	b, _ := hex.DecodeString(randomHex(32))
	return processKeys{key: b}
}

func (k processKeys) mac(parts ...string) string {
	m := hmac.New(sha256.New, k.key)
	for i, p := range parts {
		if i > 0 {
			m.Write([]byte{0})
		}
		m.Write([]byte(p))
	}
	return hex.EncodeToString(m.Sum(nil))
}

func (k processKeys) GateToken(instance, host string) string { return k.mac("gate", instance, host) }

// gateState is what the hatchery knows of a host's gate. Guarded by
// Hatchery.mu; the ensures that change it are serialized by host.gateMu.
type gateState struct {
	// ok: the gate was ensured and has not been seen to exit since.
	ok bool
	// id and volume are its container and volume (once ensured).
	id, volume string
	// gen counts the successful ensures: a watcher that sees it change
	// knows someone else started or replaced the gate meanwhile.
	gen uint64
	// watching: a goroutine waits for the gate to exit.
	watching bool
	// kept: the gate serving is of an older spec, kept for the chicks
	// that use it (GateStatus.Kept); renewGate replaces it once they are
	// gone.
	kept     bool
	restarts int
	lastExit time.Time
	backoff  time.Duration
}

// isolatedEnv is the part of an isolated chick's environment that points
// it at its host's gate, with its gate key, which names it on the gate's
// sockets. Under chicks.network "none" it gets the way to Mother only: no
// proxy, no request_access, and a key good on nest.sock only
// (wire.ChickNestKey), which Mother refuses for the proxy.
func (h *Hatchery) isolatedEnv(hs *host, id string) []string {
	nest := EnvAddr + "=unix://" + wire.GateDir + "/" + wire.GateNestSocket
	token := h.keys.GateToken(h.instance, hs.Name)
	if !h.proxy {
		return []string{nest, wire.EnvGateKey + "=" + wire.ChickNestKey(token, id)}
	}
	return []string{
		nest,
		wire.EnvGateProxy + "=" + wire.GateDir + "/" + wire.GateProxySocket,
		wire.EnvGateKey + "=" + wire.ChickGateKey(token, id),
		"HTTP_PROXY=" + chickProxyURL, "HTTPS_PROXY=" + chickProxyURL,
		"http_proxy=" + chickProxyURL, "https_proxy=" + chickProxyURL,
		"NO_PROXY=" + chickNoProxy, "no_proxy=" + chickNoProxy,
	}
}

func (h *Hatchery) gateSpec(hs *host) GateSpec {
	return GateSpec{
		Instance: h.instance, HostName: hs.Name, Image: h.cfg.Image, Command: h.gateCmd,
		MotherAddress: hs.MotherAddress, CAPEM: h.caPEM, Token: h.keys.GateToken(h.instance, hs.Name),
		Resources: GateResources, Hardening: h.cfg.Hardening,
		Limits: wire.GateLimits{
			NestConnsPerChick: h.cfg.Gate.MaxNestConnsPerChick, ProxyConnsPerChick: h.cfg.Gate.MaxProxyConnsPerChick,
			Pending: h.cfg.Gate.MaxPending, Conns: h.cfg.Gate.MaxConns, PrefaceTimeout: h.cfg.Gate.PrefaceTimeout.Duration,
		},
	}
}

// errNoGate: the host's runtime cannot run isolated chicks.
var errNoGate = errors.New("its runtime cannot run isolated chicks (no gate); set chicks.network to another mode")

// ensureGate makes sure hs's gate runs, unless it is known to (then it
// asks nothing), and watches it. It returns the gate's volume.
func (h *Hatchery) ensureGate(ctx context.Context, hs *host) (string, error) {
	if _, ok := hs.Runtime.(Gater); !ok {
		return "", fmt.Errorf("gate of host %s: %w", hs.Name, errNoGate)
	}
	hs.gateMu.Lock()
	defer hs.gateMu.Unlock()
	h.mu.Lock()
	g := hs.gate
	h.mu.Unlock()
	if g.ok {
		return g.volume, nil
	}
	st, err := h.ensureGateLocked(ctx, hs)
	if err != nil {
		return "", err
	}
	h.mu.Lock()
	if !hs.gate.watching && !h.closed {
		hs.gate.watching = true
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			h.watchGate(hs, st.ID)
		}()
	}
	h.mu.Unlock()
	return st.Volume, nil
}

// ensureGateLocked asks the runtime for the gate and records it. Callers
// hold hs.gateMu.
func (h *Hatchery) ensureGateLocked(ctx context.Context, hs *host) (GateStatus, error) {
	st, err := hs.Runtime.(Gater).EnsureGate(ctx, h.gateSpec(hs))
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		hs.gate.ok = false
		if unreachable(err) {
			h.markDownLocked(hs, err)
		}
		return st, fmt.Errorf("host %s: %w", hs.Name, err)
	}
	if !hs.gate.ok {
		// Chicks running on the host lost Mother with the gate (none at
		// a first start): the grace of a reconnect before their
		// heartbeats count again.
		h.reconnectGraceLocked(hs)
	}
	hs.gate.ok, hs.gate.id, hs.gate.volume = true, st.ID, st.Volume
	hs.gate.gen++
	wasKept := hs.gate.kept
	hs.gate.kept = st.Kept
	switch {
	case st.Kept && !wasKept:
		h.logger.Info("gate kept though its spec changed (a Mother or image upgrade): running chicks use it; it is replaced once none does", "host", hs.Name, "container", short(st.ID))
	case st.Replaced:
		h.logger.Info("gate replaced (its spec changed)", "host", hs.Name, "container", short(st.ID))
	case st.Created:
		h.logger.Info("gate created", "host", hs.Name, "container", short(st.ID))
	case st.Started:
		h.logger.Info("gate started", "host", hs.Name, "container", short(st.ID))
	}
	return st, nil
}

// renewGate asks again for hs's gate if the one serving was kept for its
// chicks (gate.kept), so it is replaced now if none uses it any more
// (else it is kept again). Called when a chick of hs ends and no other
// runs there, and at each host probe.
func (h *Hatchery) renewGate(hs *host) {
	hs.gateMu.Lock()
	defer hs.gateMu.Unlock()
	h.mu.Lock()
	due := hs.gate.kept && hs.gate.ok && !h.closed
	h.mu.Unlock()
	if !due {
		return
	}
	ctx, cancel := h.dctx()
	// Replaced, it is logged by ensureGateLocked, and the watcher
	// follows the new container (gate.gen changed).
	_, err := h.ensureGateLocked(ctx, hs)
	cancel()
	if err != nil {
		h.logger.Warn("cannot replace the gate kept for running chicks; trying again at the next probe", "host", hs.Name, "err", err)
	}
}

// renewGateWhenIdleLocked runs renewGate in the background if hs's gate was
// kept for chicks and none runs there any more. Callers hold h.mu.
func (h *Hatchery) renewGateWhenIdleLocked(hs *host) {
	if hs == nil || !hs.gate.kept || hs.running > 0 || h.closed {
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.renewGate(hs)
	}()
}

// Gate restarts back off when a gate keeps exiting: the first restart is
// at once, the next ones (within gateCalm of the last exit) wait twice as
// long each time, up to gateMaxBackoff.
const (
	gateMinBackoff = 500 * time.Millisecond
	gateMaxBackoff = 30 * time.Second
	gateCalm       = time.Minute
)

// watchGate waits for hs's gate (container id) to exit and starts it
// again, for as long as the hatchery runs and the host answers. It clears
// gate.watching in the same critical section that tells ensureGate the
// gate needs asking for again, so an ensure never leaves it unwatched.
// It does not hold gateMu while it backs off: a chick that needs the gate
// meanwhile starts it at once.
func (h *Hatchery) watchGate(hs *host, id string) {
	h.mu.Lock()
	gen := hs.gate.gen
	h.mu.Unlock()
	for {
		wctx, cancel := context.WithCancel(h.ctx)
		ex := <-hs.Runtime.Wait(wctx, id, false)
		cancel()
		if h.ctx.Err() != nil {
			return // closing: the gate lives on, like the chicks
		}
		if unreachable(ex.Err) {
			// Ensured again when the host is back (reconcileHost) or a
			// chick goes there.
			h.mu.Lock()
			hs.gate.ok, hs.gate.watching = false, false
			h.markDownLocked(hs, ex.Err)
			h.mu.Unlock()
			return
		}
		hs.gateMu.Lock()
		h.mu.Lock()
		if hs.gate.ok && hs.gate.gen != gen {
			// Started or replaced by an ensure meanwhile: watch that.
			id, gen = hs.gate.id, hs.gate.gen
			h.mu.Unlock()
			hs.gateMu.Unlock()
			continue
		}
		now := h.clock.Now()
		hs.gate.ok = false
		hs.gate.restarts++
		if hs.gate.lastExit.IsZero() || now.Sub(hs.gate.lastExit) > gateCalm {
			hs.gate.backoff = 0
		} else {
			hs.gate.backoff = min(max(2*hs.gate.backoff, gateMinBackoff), gateMaxBackoff)
		}
		hs.gate.lastExit = now
		wait := hs.gate.backoff
		h.mu.Unlock()
		hs.gateMu.Unlock()
		how := fmt.Sprintf("exit code %d", ex.Code)
		if ex.Err != nil {
			how = ex.Err.Error()
		}
		h.logger.Warn("gate exited; starting it again (its output: docker logs "+short(id)+" on that host)", "host", hs.Name, "container", short(id), "how", how, "after", wait)
		if clock.Sleep(h.ctx, h.clock, wait) != nil {
			return
		}
		hs.gateMu.Lock()
		h.mu.Lock()
		if hs.gate.ok {
			// A chick needed it meanwhile and started it.
			id, gen = hs.gate.id, hs.gate.gen
			h.mu.Unlock()
			hs.gateMu.Unlock()
			continue
		}
		h.mu.Unlock()
		ctx, dcancel := h.dctx()
		st, err := h.ensureGateLocked(ctx, hs)
		dcancel()
		if err != nil && (unreachable(err) || h.ctx.Err() != nil) {
			h.mu.Lock()
			hs.gate.watching = false
			h.mu.Unlock()
			hs.gateMu.Unlock()
			return
		}
		h.mu.Lock()
		gen = hs.gate.gen
		h.mu.Unlock()
		hs.gateMu.Unlock()
		if err != nil {
			h.logger.Error("cannot start the gate again; isolated chicks on this host cannot reach Mother until it runs", "host", hs.Name, "err", err)
			// Wait on the old container again: stopped or gone, so the
			// wait ends at once and the next try backs off further.
			continue
		}
		id = st.ID
	}
}

// gateActionKind is one thing reconcileGates does on a host.
type gateActionKind int

const (
	// gateRemove: a gate container of a host no longer configured.
	gateRemove gateActionKind = iota
	// gateRemoveAll: the network mode needs no gate: remove the gate and
	// its volume.
	gateRemoveAll
	// gateEnsure: the host's gate, kept if its spec is the same, replaced
	// if not, made if missing.
	gateEnsure
)

// gateAction is one step of a gate reconcile plan.
type gateAction struct {
	Kind      gateActionKind
	Host      string
	Container string
	// Of is the host the removed gate served.
	Of string
}

// planGates decides, without side effects, what becomes of the gates on
// each host that answered: with isolated chicks, each host gets its gate
// (ensured), and a gate of a host no longer configured is removed first
// (a gate of another configured host on the same engine is left to
// EnsureGate, which reports it); otherwise every host's gate and volume
// are removed. A host whose runtime confines chicks itself has no gate.
// Actions come host by host in observed order, removals before the
// ensure.
func planGates(isolated bool, configured []string, observed []observedHost) []gateAction {
	var out []gateAction
	for _, o := range observed {
		if o.Failed || o.SelfIsolated {
			continue
		}
		if !isolated {
			out = append(out, gateAction{Kind: gateRemoveAll, Host: o.Name})
			continue
		}
		for _, g := range o.Gates {
			of := g.Labels[LabelGateHost]
			if of != o.Name && !slices.Contains(configured, of) {
				out = append(out, gateAction{Kind: gateRemove, Host: o.Name, Container: g.ID, Of: of})
			}
		}
		out = append(out, gateAction{Kind: gateEnsure, Host: o.Name})
	}
	return out
}

// reconcileGates applies planGates to what observe found.
func (h *Hatchery) reconcileGates(ctx context.Context, observed []observedHost) {
	byName := map[string]*host{}
	var names []string
	for _, hs := range h.hosts {
		byName[hs.Name] = hs
		names = append(names, hs.Name)
	}
	found := map[string]int{}
	for _, o := range observed {
		found[o.Name] = len(o.Gates)
	}
	for _, a := range planGates(h.isolated, names, observed) {
		hs := byName[a.Host]
		switch a.Kind {
		case gateRemove:
			h.logger.Info("removing the gate of a host no longer configured", "host", a.Host, "gate_of", a.Of, "container", short(a.Container))
			h.removeContainer(hs, a.Container)
		case gateRemoveAll:
			g, ok := hs.Runtime.(Gater)
			if !ok {
				continue
			}
			if found[a.Host] > 0 {
				h.logger.Info("removing the gate: chicks.network no longer needs it", "host", a.Host, "network", h.cfg.Network)
			}
			cctx, cancel := context.WithTimeout(ctx, h.dockerTO)
			err := g.RemoveGate(cctx, h.instance)
			cancel()
			if err != nil {
				h.logger.Warn("cannot remove the gate", "host", a.Host, "err", err)
			}
		case gateEnsure:
			h.ensureGateOrSay(ctx, hs, "gate not ready; isolated chicks cannot start on this host until it is")
		}
	}
}

// ensureGateOrSay ensures hs's gate, logging failure as msg: an error,
// unless the host lacks the chick image (a step still to do, said once by
// setImageLocked) or it is already known to (then nothing is asked).
func (h *Hatchery) ensureGateOrSay(ctx context.Context, hs *host, msg string) {
	h.mu.Lock()
	missing := hs.image.missing
	h.mu.Unlock()
	if missing {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, h.dockerTO)
	_, err := h.ensureGate(cctx, hs)
	cancel()
	switch {
	case errors.Is(err, ErrImageMissing):
		h.lacksImage(hs)
	case err != nil:
		h.logger.Error(msg, "host", hs.Name, "err", err)
	}
}

// splitGates separates gate containers from chick containers.
func splitGates(list []Container) (chicks, gates []Container) {
	for _, c := range list {
		if _, ok := c.Labels[LabelGate]; ok {
			gates = append(gates, c)
			continue
		}
		chicks = append(chicks, c)
	}
	return chicks, gates
}

// reconnectGraceLocked gives the running chicks of hs a reconnect grace:
// silence until then is not a missed heartbeat. Callers hold h.mu.
func (h *Hatchery) reconnectGraceLocked(hs *host) {
	until := h.clock.Now().Add(h.grace)
	for _, c := range h.chicks {
		if c.host == hs && c.rec.State == StateRunning && c.lastSeen.Before(until) {
			c.lastSeen = until
		}
	}
}
