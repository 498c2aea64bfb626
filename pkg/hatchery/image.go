package hatchery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// A host without the chick image cannot start chicks (nor its gate, which
// runs the chick binary). That is a setup step still to do, not an
// error of Mother's: she says so once, as a warning, refuses chicks that
// could only fail while every host that would run them lacks the image,
// and takes chicks again as soon as a host has it (a probe, or the next
// spawn, asks again).

// ImageChecker is an optional Runtime ability, found by type assertion:
// a runtime that can tell whether an image is on its host (the Docker
// driver). A host known to lack the chick image is passed over.
type ImageChecker interface {
	// HasImage reports whether ref is on the host.
	HasImage(ctx context.Context, ref string) (bool, error)
}

// ErrImageMissing marks an error that says the chick image is not on a
// host; a spawn refused for it wraps it too.
var ErrImageMissing = errors.New("chick image missing")

// imageState is what is known of a host's chick image. Guarded by
// Hatchery.mu.
type imageState struct {
	// missing: the host said it does not have the image.
	missing bool
}

// setImageLocked records whether hs has the chick image, saying so when
// that changes. Callers hold h.mu.
// A runtime that cannot be asked again (no ImageChecker) is never marked:
// nothing would clear it.
func (h *Hatchery) setImageLocked(hs *host, missing bool) {
	if _, ok := hs.Runtime.(ImageChecker); !ok || hs.image.missing == missing {
		return
	}
	hs.image.missing = missing
	if missing {
		h.logger.Warn("chicks are off on this Docker host until the chick image is there: build it with `make image` (or set chicks.image)", "host", hs.Name, "image", h.cfg.Image)
		return
	}
	h.logger.Info("the chick image is there; chicks can start on this host", "host", hs.Name, "image", h.cfg.Image)
}

// checkImage asks hs whether it has the chick image and records the
// answer. It reports whether the image is missing; a runtime that cannot
// tell, or an engine that does not answer, counts as having it (the
// start will tell).
func (h *Hatchery) checkImage(ctx context.Context, hs *host) bool {
	ic, ok := hs.Runtime.(ImageChecker)
	if !ok {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, h.probeTO)
	has, err := ic.HasImage(cctx, h.cfg.Image)
	cancel()
	if err != nil {
		return false
	}
	h.mu.Lock()
	h.setImageLocked(hs, !has)
	h.mu.Unlock()
	return !has
}

// noImageError is why a spawn of tier cannot start anywhere: every host
// that serves tier is up and lacks the image. It asks those hosts again
// first (the image may have been built since), and returns nil when one
// has it now or any host that serves tier is not known to lack it.
func (h *Hatchery) noImageError(ctx context.Context, tier string) error {
	var lacking []*host
	h.mu.Lock()
	for _, hs := range h.hosts {
		if len(hs.Tiers) > 0 && !slices.Contains(hs.Tiers, tier) {
			continue
		}
		if !hs.image.missing {
			h.mu.Unlock()
			return nil
		}
		lacking = append(lacking, hs)
	}
	h.mu.Unlock()
	if len(lacking) == 0 {
		return nil
	}
	var names []string
	for _, hs := range lacking {
		if !h.checkImage(ctx, hs) {
			return nil
		}
		names = append(names, hs.Name)
	}
	return fmt.Errorf("spawn chick: %w: %s", ErrImageMissing, h.offUntil(names))
}

// offUntil says that chicks are off until the image is on the named
// hosts, and how to fix it.
func (h *Hatchery) offUntil(hosts []string) string {
	where := "Docker host " + hosts[0]
	if len(hosts) > 1 {
		where = "Docker hosts " + strings.Join(hosts, ", ")
	}
	return fmt.Sprintf("chicks are off until the image %s is on %s (build it with `make image`, or set chicks.image)", h.cfg.Image, where)
}

// lacksImage records that hs does not have the chick image, and ends the
// chicks waiting in the queue that no host can start now.
func (h *Hatchery) lacksImage(hs *host) {
	h.mu.Lock()
	h.setImageLocked(hs, true)
	h.mu.Unlock()
	h.failQueuedWithoutImage()
}

// failQueuedWithoutImage ends the queued chicks whose tier is served only
// by hosts that lack the chick image (spawned before Mother knew, while
// she reconciled): they would wait until someone built it, unseen.
func (h *Hatchery) failQueuedWithoutImage() {
	h.mu.Lock()
	var doomed []*chick
	var why []string
	for _, c := range h.queue {
		var lacking []string
		for _, hs := range h.hosts {
			if len(hs.Tiers) > 0 && !slices.Contains(hs.Tiers, c.rec.Tier) {
				continue
			}
			if !hs.image.missing {
				lacking = nil
				break
			}
			lacking = append(lacking, hs.Name)
		}
		if len(lacking) > 0 {
			doomed = append(doomed, c)
			why = append(why, h.offUntil(lacking))
		}
	}
	h.mu.Unlock()
	for i, c := range doomed {
		h.mu.Lock()
		j := slices.Index(h.queue, c)
		if j < 0 {
			h.mu.Unlock()
			continue
		}
		h.queue = slices.Delete(h.queue, j, j+1)
		h.endLocked(c, ReasonNoStart, "could not start: "+why[i])
	}
}
