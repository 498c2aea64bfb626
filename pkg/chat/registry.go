package chat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
)

// Env is what an adapter constructor receives.
type Env struct {
	// Name is the adapter's configured name.
	Name   string
	Config config.Adapter
	Logger *slog.Logger
	// Files is the adapter's access to its channels' directories
	// (attachments, the log backfill starts from). Nil: attachments are
	// not saved and nothing is backfilled from a log.
	Files Files
	// Clock is the adapter's time source (nil: clock.Real).
	Clock clock.Clock
	// DataDir is Mother's data directory; adapters that keep state of
	// their own (a WhatsApp session) keep it under DataDir/state/. Empty:
	// the adapter has no such place.
	DataDir string
}

// Constructor builds an adapter from its configuration.
type Constructor func(env Env) (Adapter, error)

// Type is one chat platform as its package registers it: how its
// configuration reads (settings, validation, environment overrides, field
// docs) and how an adapter is built.
type Type struct {
	// Config declares the platform's own settings; see
	// config.AdapterSpec. The zero value: no settings beyond the shared
	// fields.
	Config config.AdapterSpec
	// New builds an adapter; env.Config.Settings holds the settings made
	// by Config.NewSettings.
	New Constructor
	// Check, if set, reports what mother --check-config can find out
	// beyond the configuration without connecting (a WhatsApp session
	// that was never linked or was logged out).
	Check func(ctx context.Context, env Env) error
	// Link, if set, links the account interactively (mother link TYPE
	// NAME DATA): term is the user's terminal.
	Link func(ctx context.Context, env Env, term Terminal) error
}

// Terminal is the user's terminal during an interactive step.
type Terminal struct {
	In  io.Reader
	Out io.Writer
}

// ErrNoLink is returned by Link for an adapter type that has nothing to
// link (its account is configured by tokens).
var ErrNoLink = errors.New("this adapter type has nothing to link: it is configured by tokens in config.json")

var (
	registryMu sync.RWMutex
	registry   = map[string]Type{}
)

// Register makes an adapter type available by name ("discord", "slack"):
// its constructor here, its configuration with config.RegisterAdapter (so
// config.json accepts and checks the type's fields). It is called from the
// adapter package's init, which is why adding a platform is one package
// plus one blank import in cmd/mother. Registering a name twice panics, as
// that is a programming error.
func Register(typ string, t Type) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[typ]; dup {
		panic("chat: adapter type registered twice: " + typ)
	}
	if t.New == nil {
		panic("chat: adapter type without a constructor: " + typ)
	}
	config.RegisterAdapter(typ, t.Config)
	registry[typ] = t
}

// New builds the adapter named env.Name of type env.Config.Type.
func New(env Env) (Adapter, error) {
	registryMu.RLock()
	t, ok := registry[env.Config.Type]
	registryMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("adapter %q: unknown type %q (known: %v)", env.Name, env.Config.Type, Types())
	}
	return t.New(env)
}

// Check runs the check of env.Config.Type's adapter, if it has one.
func Check(ctx context.Context, env Env) error {
	registryMu.RLock()
	t := registry[env.Config.Type]
	registryMu.RUnlock()
	if t.Check == nil {
		return nil
	}
	return t.Check(ctx, env)
}

// Link links the account of the adapter env describes (ErrNoLink for a
// type without linking).
func Link(ctx context.Context, env Env, term Terminal) error {
	registryMu.RLock()
	t, ok := registry[env.Config.Type]
	registryMu.RUnlock()
	if !ok {
		return fmt.Errorf("adapter %q: unknown type %q (known: %v)", env.Name, env.Config.Type, Types())
	}
	if t.Link == nil {
		return ErrNoLink
	}
	return t.Link(ctx, env, term)
}

// Types lists the registered adapter types, sorted.
func Types() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]string, 0, len(registry))
	for t := range registry {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
