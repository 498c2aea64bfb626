// Package providers builds a model.Provider from configuration, so Mother
// and the broker pick Ollama or Anthropic the same way.
package providers

import (
	"fmt"
	"net/http"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/anthropic"
	"github.com/mother-chat/mother/pkg/model/ollama"
)

// New returns the provider named name ("ollama", "anthropic") configured
// from cfg. httpClient may be nil.
func New(cfg config.Providers, name string, httpClient *http.Client) (model.Provider, error) {
	switch name {
	case "ollama":
		return ollama.New(cfg.Ollama.URL, httpClient)
	case "anthropic":
		return anthropic.New(cfg.Anthropic.APIKey.Value(), cfg.Anthropic.BaseURL, httpClient)
	default:
		return nil, fmt.Errorf("model provider %q is not supported", name)
	}
}
