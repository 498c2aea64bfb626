package hatchery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mother-chat/mother/pkg/version"
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

// ImageInspector is an optional Runtime ability, found by type
// assertion: a runtime that can read an image's labels (the Docker
// driver). Mother reads the chick image's release from them
// (version.LabelRelease) and passes over a host whose image is of a
// release she does not work with: that host is "incompatible" until its
// image changes.
type ImageInspector interface {
	// ImageLabels returns ref's labels; has is false when the host does
	// not have ref.
	ImageLabels(ctx context.Context, ref string) (labels map[string]string, has bool, err error)
}

// ErrImageMissing marks an error that says the chick image is not on a
// host; a spawn refused for it wraps it too.
var ErrImageMissing = errors.New("chick image missing")

// ErrImageIncompatible marks a spawn refused because the chick image of
// every host that would run it is of a release this Mother does not work
// with. The error's text ends with the sentence that names both releases
// and the fix.
var ErrImageIncompatible = errors.New("chick image incompatible")

// imageState is what is known of a host's chick image. Guarded by
// Hatchery.mu.
type imageState struct {
	// missing: the host said it does not have the image.
	missing bool
	// incompatible, when set, says that the image is of a release this
	// Mother does not work with, in one sentence that names both and the
	// fix.
	incompatible string
}

// unusable reports whether no chick can start from the host's image.
func (s imageState) unusable() bool { return s.missing || s.incompatible != "" }

// setIncompatibleLocked records why hs's chick image cannot run with this
// Mother ("" when it can), saying so when that changes. Callers hold h.mu.
func (h *Hatchery) setIncompatibleLocked(hs *host, why string) {
	if hs.image.incompatible == why {
		return
	}
	hs.image.incompatible = why
	if why != "" {
		h.logger.Warn("chicks are off on this Docker host: its chick image is of a release this Mother does not work with", "host", hs.Name, "image", h.cfg.Image, "why", why)
		return
	}
	h.logger.Info("the chick image works with this Mother now; chicks can start on this host", "host", hs.Name, "image", h.cfg.Image)
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

// checkImage asks hs whether it has the chick image, and of which
// release, and records the answer. It reports whether no chick can start
// from it (missing, or incompatible); a runtime that cannot tell, or an
// engine that does not answer, counts as having a good one (the start
// will tell).
func (h *Hatchery) checkImage(ctx context.Context, hs *host) bool {
	if ii, ok := hs.Runtime.(ImageInspector); ok {
		cctx, cancel := context.WithTimeout(ctx, h.probeTO)
		labels, has, err := ii.ImageLabels(cctx, h.cfg.Image)
		cancel()
		if err != nil {
			return false
		}
		why := ""
		if has {
			why = version.Chick(version.Release, labels[version.LabelRelease], "the chick image on host "+hs.Name)
		}
		h.mu.Lock()
		h.setImageLocked(hs, !has)
		h.setIncompatibleLocked(hs, why)
		h.mu.Unlock()
		if why != "" {
			h.failQueuedWithoutImage()
		}
		return !has || why != ""
	}
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
// that serves tier is up and lacks the image, or has one of a release
// this Mother does not work with. It asks those hosts again first (the
// image may have been built or replaced since), and returns nil when one
// has a good one now or any host that serves tier is not known to lack
// it.
func (h *Hatchery) noImageError(ctx context.Context, tier string) error {
	var lacking []*host
	h.mu.Lock()
	for _, hs := range h.hosts {
		if len(hs.Tiers) > 0 && !slices.Contains(hs.Tiers, tier) {
			continue
		}
		if !hs.image.unusable() {
			h.mu.Unlock()
			return nil
		}
		lacking = append(lacking, hs)
	}
	h.mu.Unlock()
	if len(lacking) == 0 {
		return nil
	}
	for _, hs := range lacking {
		if !h.checkImage(ctx, hs) {
			return nil
		}
	}
	var missing, why []string
	h.mu.Lock()
	for _, hs := range lacking {
		if hs.image.incompatible != "" {
			why = append(why, hs.image.incompatible)
		} else {
			missing = append(missing, hs.Name)
		}
	}
	h.mu.Unlock()
	if len(why) == 0 {
		return fmt.Errorf("spawn chick: %w: %s", ErrImageMissing, h.offUntil(missing))
	}
	if len(missing) > 0 {
		why = append(why, h.offUntil(missing))
	}
	return fmt.Errorf("spawn chick: %w: %s", ErrImageIncompatible, strings.Join(why, "; "))
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
// by hosts that lack the chick image or have one this Mother does not
// work with (spawned before Mother knew, while she reconciled, or before
// the image changed): they would wait until someone fixed it, unseen.
func (h *Hatchery) failQueuedWithoutImage() {
	h.mu.Lock()
	var doomed []*chick
	var reasons []Reason
	var why []string
	for _, c := range h.queue {
		var lacking, incompatible []string
		for _, hs := range h.hosts {
			if len(hs.Tiers) > 0 && !slices.Contains(hs.Tiers, c.rec.Tier) {
				continue
			}
			if !hs.image.unusable() {
				lacking, incompatible = nil, nil
				break
			}
			if hs.image.incompatible != "" {
				incompatible = append(incompatible, hs.image.incompatible)
			} else {
				lacking = append(lacking, hs.Name)
			}
		}
		switch {
		case len(incompatible) > 0:
			if len(lacking) > 0 {
				incompatible = append(incompatible, h.offUntil(lacking))
			}
			doomed = append(doomed, c)
			reasons = append(reasons, ReasonIncompatible)
			why = append(why, strings.Join(incompatible, "; "))
		case len(lacking) > 0:
			doomed = append(doomed, c)
			reasons = append(reasons, ReasonNoStart)
			why = append(why, "could not start: "+h.offUntil(lacking))
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
		h.endLocked(c, reasons[i], why[i])
	}
}
