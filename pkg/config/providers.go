package config

import (
	"fmt"
	"strings"
)

// OpenAIEndpoint returns the name of the OpenAI-compatible endpoint a
// provider reference means: "openai:<name>" names it, and "openai" means
// the only one configured.
func (p Providers) OpenAIEndpoint(ref string) (string, error) {
	if name, ok := strings.CutPrefix(ref, "openai:"); ok {
		if _, ok := p.OpenAI[name]; !ok {
			return "", fmt.Errorf("%q: providers.openai has no endpoint %q (it has %s)", ref, name, endpointList(p.OpenAI))
		}
		return name, nil
	}
	if ref != "openai" {
		return "", fmt.Errorf("%q is not an OpenAI-compatible provider", ref)
	}
	switch len(p.OpenAI) {
	case 0:
		return "", fmt.Errorf(`"openai": providers.openai has no endpoint; add one, e.g. "providers": {"openai": {"vllm": {"baseURL": "http://127.0.0.1:8000/v1"}}}`)
	case 1:
		for name := range p.OpenAI {
			return name, nil
		}
	}
	return "", fmt.Errorf(`"openai": providers.openai has %d endpoints; name one as "openai:<name>" (%s)`, len(p.OpenAI), endpointList(p.OpenAI))
}

func endpointList(m map[string]OpenAI) string {
	if len(m) == 0 {
		return "none"
	}
	names := sortedKeys(m)
	for i, n := range names {
		names[i] = "openai:" + n
	}
	return strings.Join(names, ", ")
}
