package chat

import (
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/mother-chat/mother/pkg/config"
)

// Env is what an adapter constructor receives.
type Env struct {
	// Name is the adapter's configured name.
	Name   string
	Config config.Adapter
	Logger *slog.Logger
	// ChannelDir returns (creating it if needed) the directory of one of
	// this adapter's channels, where attachments are downloaded to.
	ChannelDir func(channelID string) (string, error)
	// LoggedChannels lists the ids of this adapter's channels that have a
	// directory in the store, so an adapter can backfill what it missed
	// while Mother was down. Nil means none.
	LoggedChannels func() ([]string, error)
}

// Constructor builds an adapter from its configuration.
type Constructor func(env Env) (Adapter, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Constructor{}
)

// Register makes an adapter type available by name ("discord", "slack").
// It is called from the adapter package's init; registering a name twice
// panics, as that is a programming error.
func Register(typ string, c Constructor) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[typ]; dup {
		panic("chat: adapter type registered twice: " + typ)
	}
	registry[typ] = c
}

// New builds the adapter named env.Name of type env.Config.Type.
func New(env Env) (Adapter, error) {
	registryMu.RLock()
	c, ok := registry[env.Config.Type]
	registryMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("adapter %q: unknown type %q (known: %v)", env.Name, env.Config.Type, Types())
	}
	return c(env)
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
