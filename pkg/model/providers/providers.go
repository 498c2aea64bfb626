// Package providers builds model.Providers from configuration, so Mother
// and the broker pick Ollama, Anthropic or an OpenAI-compatible endpoint
// the same way. The broker chains a model with its fallbacks, each
// metered (pkg/broker): no model call goes around it.
package providers

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/anthropic"
	"github.com/mother-chat/mother/pkg/model/fallback"
	"github.com/mother-chat/mother/pkg/model/ollama"
)

// New returns the provider named name ("ollama", "anthropic",
// "openai:<name>" or "openai") configured from cfg. httpClient may be nil.
func New(cfg config.Providers, name string, httpClient *http.Client) (model.Provider, error) {
	switch {
	case name == "ollama":
		return ollama.New(cfg.Ollama.URL, httpClient)
	case name == "anthropic":
		return anthropic.New(cfg.Anthropic.APIKey.Value(), cfg.Anthropic.BaseURL, httpClient)
	case name == "openai" || strings.HasPrefix(name, "openai:"):
		return newOpenAI(cfg, name, httpClient)
	default:
		return nil, fmt.Errorf("model provider %q is not supported", name)
	}
}

// Set builds each configured provider once; every fallback chain the
// broker builds shares the Set's Health, which the status page shows.
type Set struct {
	cfg    config.Providers
	hc     *http.Client
	health *fallback.Health

	mu      sync.Mutex
	byName  map[string]model.Provider
	servers map[string]model.ServerStatus // the last pings (servers.go)
}

// NewSet returns a Set for cfg. clk times the cool-downs and first-token
// limits; httpClient may be nil.
func NewSet(cfg config.Providers, clk clock.Clock, httpClient *http.Client) *Set {
	return &Set{cfg: cfg, hc: httpClient, byName: map[string]model.Provider{},
		health: fallback.NewHealth(clk, cfg.Cooldown.Duration, cfg.FailuresBeforeCooldown)}
}

// Health is the state of the providers the Set's chains call.
func (s *Set) Health() *fallback.Health { return s.health }

// FirstTokenTimeout is how long a call with a fallback waits for its
// first token.
func (s *Set) FirstTokenTimeout() time.Duration { return s.cfg.FirstTokenTimeout.Duration }

// Get returns the provider named name, built once.
func (s *Set) Get(name string) (model.Provider, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.byName[name]; ok {
		return p, nil
	}
	p, err := New(s.cfg, name, s.hc)
	if err != nil {
		return nil, err
	}
	s.byName[name] = p
	return p, nil
}

// Statuses is the health of the providers the Set's chains call.
func (s *Set) Statuses() []fallback.Status { return s.health.Statuses() }

// EstimatedCalls is, per provider built, the calls whose usage the server
// did not report (OpenAI-compatible servers that send none), which were
// estimated.
func (s *Set) EstimatedCalls() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int64{}
	for name, p := range s.byName {
		if e, ok := p.(interface{ EstimatedCalls() int64 }); ok {
			out[name] = e.EstimatedCalls()
		}
	}
	return out
}
