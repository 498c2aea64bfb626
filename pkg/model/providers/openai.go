package providers

import (
	"net/http"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/openai"
)

// newOpenAI builds the OpenAI-compatible endpoint ref names ("openai:vllm",
// or "openai" for the only one).
func newOpenAI(cfg config.Providers, ref string, hc *http.Client) (model.Provider, error) {
	name, err := cfg.OpenAIEndpoint(ref)
	if err != nil {
		return nil, err
	}
	ep := cfg.OpenAI[name]
	models := make(map[string]openai.ModelOptions, len(ep.Models))
	for id, m := range ep.Models {
		models[id] = openai.ModelOptions{ContextWindow: m.ContextWindow, Options: m.Options}
	}
	return openai.New(openai.Options{Name: "openai:" + name, BaseURL: ep.BaseURL, APIKey: ep.APIKey.Value(), Headers: ep.Headers,
		ContextWindow: ep.ContextWindow, Models: models, HTTPClient: hc})
}
