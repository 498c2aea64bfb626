package hatchery

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/wire"
)

// Runtime is what the hatchery needs of the engine on one host to run
// chicks there: make a container, start it, wait for it, signal it,
// remove it, find this Mother's containers by label, read their logs and
// state. A runtime copies no files: the chick fetches its own from the
// nest when it starts (FetchFiles) and sends back what it makes. The Docker Engine API driver
// (pkg/hatchery/docker) is one implementation.
//
// Every call that can block takes ctx and returns when it ends. Errors are
// marked, for errors.Is, with ErrContainerNotFound, ErrConflict or
// ErrUnreachable where those apply; their text is the engine's.
type Runtime interface {
	// Create makes a chick's container, not started.
	Create(ctx context.Context, spec ContainerSpec) (id string, err error)
	// Start starts a created container.
	Start(ctx context.Context, id string) error
	// Wait reports on the returned channel (one value, then nothing) when
	// the container exits. next waits for the next exit (ask before Start,
	// so a fast exit is not missed); otherwise for it to be not running.
	// The wait ends with ctx, reporting ctx's error.
	Wait(ctx context.Context, id string, next bool) <-chan Exit
	// Kill sends signal ("KILL") to the container.
	Kill(ctx context.Context, id, signal string) error
	// Remove removes the container, by force, with its volumes.
	Remove(ctx context.Context, id string) error
	// List returns the containers, running or not, that carry label
	// key=value.
	List(ctx context.Context, key, value string) ([]Container, error)
	// Inspect returns a container's state.
	Inspect(ctx context.Context, id string) (ContainerState, error)
	// Logs writes the container's output (stdout and stderr) to w;
	// follow streams it until the container exits or ctx ends.
	Logs(ctx context.Context, id string, follow bool, w io.Writer) error
	// Version asks the engine for its version: a cheap call that needs
	// the engine to answer (the health probe).
	Version(ctx context.Context) (string, error)
	// Close releases the connection to the engine.
	Close() error
}

// Gater is an optional Runtime ability, found by type assertion: a
// runtime that can run isolated chicks (chicks.network "isolated",
// docs/isolation.md). It keeps one gate per Mother instance on its host:
// the gate's volume (where the gate makes its unix sockets, mounted
// read-only in isolated chicks through ContainerSpec.GateVolume) and the
// gate's container. The hatchery watches the gate with Wait on
// GateStatus.ID and removes stray gate containers with Remove.
type Gater interface {
	// EnsureGate makes sure the gate of spec.Instance runs on the host
	// with spec: it creates the volume and the container when missing,
	// replaces a container made from another spec (or another image),
	// starts one that is stopped, and never makes a second. A running
	// gate of another spec that running chicks use, and that still
	// reaches the same Mother, is kept for them instead (Kept). A gate of
	// another host name for the same instance is an error marked
	// ErrConflict (two configured hosts name the same engine).
	EnsureGate(ctx context.Context, spec GateSpec) (GateStatus, error)
	// RemoveGate removes every gate container of instance on the host and
	// the gate's volume. Removing what is not there is not an error; a
	// volume that chicks still mount is left, with an error marked
	// ErrConflict.
	RemoveGate(ctx context.Context, instance string) error
}

// SelfIsolator is an optional Runtime ability, found by type assertion:
// a runtime that confines the network of isolated chicks itself (the
// Kubernetes driver, with a NetworkPolicy that lets chick Pods reach
// Mother's nest and nothing else) and so needs no gate. Its isolated
// chicks dial their host's MotherAddress directly; ContainerSpec.Network
// ("isolated" or "none") tells it to confine them. The egress proxy
// (chicks.egress) needs a gate: a self-isolating host's chicks reach
// Mother only.
type SelfIsolator interface {
	// IsolatesChicks reports whether the runtime confines isolated chicks
	// without a gate.
	IsolatesChicks() bool
}

// selfIsolating reports whether rt confines isolated chicks itself.
func selfIsolating(rt Runtime) bool {
	s, ok := rt.(SelfIsolator)
	return ok && s.IsolatesChicks()
}

// GateSpec is the gate of one Mother instance on one host.
type GateSpec struct {
	Instance string
	// HostName is the host's name in config (MOTHER_GATE_HOST).
	HostName string
	// Image holds the chick binary, whose `gate` mode the gate runs.
	Image string
	// Command replaces the image's entrypoint and command (tests);
	// empty: the image's entrypoint with the argument "gate".
	Command []string
	// MotherAddress is the nest address the gate forwards to (MOTHER_ADDR).
	MotherAddress string
	// CAPEM is the nest's CA certificate (MOTHER_CA_PEM), for the gate's
	// own GateService calls.
	CAPEM string
	// Token is the gate's GateService token (MOTHER_GATE_TOKEN).
	Token string
	// Resources are the gate's limits (GateResources); Hardening is the
	// chicks' (the gate runs as the chick user, hardened like a chick).
	Resources config.Resources
	Hardening config.Hardening
	// Limits are the gate's connection limits (chicks.gate,
	// MOTHER_GATE_LIMITS).
	Limits wire.GateLimits
}

// GateStatus is what EnsureGate found or did.
type GateStatus struct {
	// ID is the gate's container.
	ID string
	// Volume is the gate's volume, for ContainerSpec.GateVolume.
	Volume string
	// Created: there was no gate with this spec; one was made (Replaced:
	// in place of one with another spec).
	Created, Replaced bool
	// Started: the gate was not running; it was started.
	Started bool
	// Kept: the running gate has another spec (an older Mother's or
	// image's), but chicks still use it, so it was kept for them instead
	// of being replaced under them. Ensured again once they are gone, it
	// is replaced.
	Kept bool
}

// Errors a Runtime marks its errors with.
var (
	// ErrContainerNotFound: no such container (or, from Create, no such
	// image).
	ErrContainerNotFound = errors.New("container not found")
	// ErrConflict: the container is not in a state that allows the call
	// (killing one that is not running, for instance).
	ErrConflict = errors.New("container state conflict")
	// ErrUnreachable: the engine did not answer (no connection).
	ErrUnreachable = errors.New("engine unreachable")
)

// ContainerSpec is a chick's container: what runs, with what, and how it
// is confined.
type ContainerSpec struct {
	// Name is unique on the host.
	Name  string
	Image string
	// Command replaces the image's entrypoint and command (tests,
	// debugging); empty: the image's own.
	Command []string
	// Env is the container's whole environment ("KEY=value").
	Env []string
	// Labels find the container again (LabelChickID, LabelInstance...).
	Labels map[string]string
	// Network is the network it joins (chicks.network; "none" for an
	// isolated chick).
	Network string
	// GateVolume, when set, is the gate volume (GateStatus.Volume) to
	// mount read-only at wire.GateDir: an isolated chick's way out.
	GateVolume string
	Resources  config.Resources
	Hardening  config.Hardening
	// Deadline is the chick's wall-clock limit (chicks.timeout; 0: none)
	// and KillGrace the time between cancel and kill (chicks.killGrace),
	// for a runtime that enforces them itself as a backstop (Kubernetes:
	// activeDeadlineSeconds, terminationGracePeriodSeconds). The hatchery
	// enforces the limit either way.
	Deadline, KillGrace time.Duration
}

// Container is one container a List found.
type Container struct {
	ID string
	// State is the engine's word for it: ContainerRunning,
	// ContainerCreated, "exited"...
	State  string
	Labels map[string]string
}

// Container states the hatchery branches on.
const (
	ContainerRunning = "running"
	ContainerCreated = "created"
)

// ContainerState is what Inspect tells.
type ContainerState struct {
	Running bool
	// ExitCode is its last exit code; -1 when the engine did not say.
	ExitCode int64
	// Ended says why the engine ended the container, when it did rather
	// than the chick ("evicted: the node was low on memory", "its node
	// was lost"); empty otherwise.
	Ended string
}

// Exit is how a Wait ended: the container's exit code, or why the wait
// failed (Err set).
type Exit struct {
	Code int64
	Err  error
	// Ended says why the engine ended the container, when it did (see
	// ContainerState.Ended).
	Ended string
}
