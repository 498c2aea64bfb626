package setup

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/anthropic"
	"github.com/mother-chat/mother/pkg/model/openai"
)

// The tier step adds a chick tier on another model server: any
// OpenAI-compatible one (vLLM, llama.cpp's llama-server, LM Studio,
// SGLang, OpenRouter, OpenAI) or Anthropic, for hard goals. The key is
// checked and the models listed live, as for Ollama. A new configuration
// gets no paid tier unless it is asked for.

// Tier kinds setup knows.
const (
	TierOpenAI    = "openai"
	TierAnthropic = "anthropic"
)

// defaultHardDescription is what a Claude tier is for, unless told.
const defaultHardDescription = "hard goals: long reasoning, large refactors, tricky debugging (costs money: pick it only when a local model would struggle)"

// tier asks for (or takes from flags) a tier on another provider.
func (r *run) tier() error {
	kind := r.f.TierProvider
	if kind == "" {
		if !r.o.Interactive {
			return nil
		}
		r.section("Another model server (optional)")
		add, err := r.p.yes("Add a chick tier on another model server (vLLM, llama.cpp, LM Studio, OpenRouter, OpenAI, or Anthropic for hard goals)?", false)
		if err != nil || !add {
			return err
		}
		if kind, err = r.p.ask("Which: openai (any OpenAI-compatible server) or anthropic", TierOpenAI); err != nil {
			return err
		}
	} else {
		r.section("Another model server")
	}
	switch strings.ToLower(strings.TrimSpace(kind)) {
	case TierOpenAI, "openai-compatible", "vllm", "llamacpp", "llama.cpp", "openrouter", "lmstudio":
		return r.openAITier()
	case TierAnthropic, "claude":
		return r.anthropicTier()
	}
	return fmt.Errorf("tier provider %q: setup knows %q and %q", kind, TierOpenAI, TierAnthropic)
}

// openAITier adds an OpenAI-compatible endpoint and a tier on it.
func (r *run) openAITier() error {
	var err error
	base := r.f.TierURL
	if base == "" {
		base = "http://127.0.0.1:8000/v1"
		if r.o.Interactive {
			if base, err = r.p.ask("Base URL, with its /v1 (vLLM :8000, llama.cpp :8080, LM Studio :1234, https://openrouter.ai/api/v1)", base); err != nil {
				return err
			}
		}
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL such as http://127.0.0.1:8000/v1", base)
	}
	name := r.f.TierEndpoint
	if name == "" {
		name = endpointName(base)
		if r.o.Interactive {
			if name, err = r.p.ask("A name for this server", name); err != nil {
				return err
			}
		}
	}
	if msg := config.ValidName(name); msg != "" {
		return fmt.Errorf("server name %q %s", name, msg)
	}
	key, keyEnv := r.f.TierKey, r.f.TierKeyEnv
	if key == "" && keyEnv == "" && r.o.Interactive {
		if key, err = r.p.secret("API key (enter for none: local servers want none)", ""); err != nil {
			return err
		}
	}
	if key == "" && keyEnv != "" {
		key = r.o.Getenv(keyEnv)
	}
	var models []string
	for {
		models, err = listOpenAI(r.ctx, name, base, key)
		if err == nil {
			r.say("  ✓ %s at %s, %d model(s): %s", name, base, len(models), strings.Join(models, ", "))
			break
		}
		r.say("  ✗ %v", err)
		if errors.Is(err, errKeyRefused) && !r.o.Interactive {
			return fmt.Errorf("%s: %v: %w", name, err, ErrNotVerified)
		}
		if !r.o.Interactive {
			r.say("  ! kept unchecked: start the server before Mother")
			break
		}
		retry, err := r.p.yes("Type the key again?", errors.Is(err, errKeyRefused))
		if err != nil {
			return err
		}
		if !retry {
			break
		}
		if key, err = r.p.secret("API key", ""); err != nil {
			return err
		}
	}
	id, err := r.pickFrom("Model for the tier", r.f.TierModel, first(models), models)
	if err != nil {
		return err
	}
	r.put(base, "providers", "openai", name, "baseURL")
	switch {
	case r.f.TierKeyEnv != "":
		r.put(r.f.TierKeyEnv, "providers", "openai", name, "apiKeyEnv")
	case key != "":
		r.put(key, "providers", "openai", name, "apiKey")
	}
	return r.putTier(name, "openai:"+name, id, "a model on "+name)
}

// anthropicTier adds a Claude tier for hard goals.
func (r *run) anthropicTier() error {
	current := r.cfg.str("providers", "anthropic", "apiKey")
	if current == "" {
		current = r.o.Getenv("ANTHROPIC_API_KEY")
	}
	base := orDefault(r.f.TierURL, r.cfg.str("providers", "anthropic", "baseURL"))
	var models []string
	key, err := r.token("Anthropic API key", r.f.TierKey, current, func(k string) error {
		var lerr error
		models, lerr = listAnthropic(r.ctx, k, base)
		return lerr
	})
	if err != nil {
		return err
	}
	r.say("  ✓ the key works; %d model(s): %s", len(models), strings.Join(models, ", "))
	id, err := r.pickFrom("Claude model for the tier", r.f.TierModel, preferredClaude(models), models)
	if err != nil {
		return err
	}
	if key != r.o.Getenv("ANTHROPIC_API_KEY") {
		r.put(key, "providers", "anthropic", "apiKey")
	}
	if r.f.TierURL != "" {
		r.put(r.f.TierURL, "providers", "anthropic", "baseURL")
	}
	return r.putTier("hard", "anthropic", id, defaultHardDescription)
}

// putTier asks for the tier's name and description and writes it.
func (r *run) putTier(defName, provider, id, defDesc string) error {
	name, desc := r.f.TierName, r.f.TierDescription
	var err error
	if name == "" {
		name = defName
		if r.o.Interactive {
			if name, err = r.p.ask("Tier name", name); err != nil {
				return err
			}
		}
	}
	if msg := config.ValidName(name); msg != "" {
		return fmt.Errorf("tier name: %s", msg)
	}
	if desc == "" {
		desc = defDesc
		if r.o.Interactive {
			if desc, err = r.p.ask("When should Mother pick it (her model reads this)", desc); err != nil {
				return err
			}
		}
	}
	r.put(provider, "chicks", "tiers", name, "provider")
	r.put(id, "chicks", "tiers", name, "model")
	r.put(desc, "chicks", "tiers", name, "description")
	r.say("  ✓ tier %s: %s/%s", name, provider, id)
	return nil
}

// pickFrom asks for one of models by number or name (any name when the
// list is empty: the server could not be asked).
func (r *run) pickFrom(label, flag, def string, models []string) (string, error) {
	for {
		name := flag
		if name == "" {
			name = def
			if r.o.Interactive {
				for i, m := range models {
					r.say("     %d. %s", i+1, m)
				}
				q := label
				if len(models) > 0 {
					q += " (number or name)"
				}
				var err error
				if name, err = r.p.ask(q, def); err != nil {
					return "", err
				}
			}
		}
		if n, err := strconv.Atoi(name); err == nil && n >= 1 && n <= len(models) {
			name = models[n-1]
		}
		switch {
		case name == "":
			if !r.o.Interactive {
				return "", fmt.Errorf("%s: missing (give it as a flag): %w", label, ErrNotVerified)
			}
		case len(models) == 0 || slices.Contains(models, name):
			return name, nil
		default:
			r.say("  ! %s is not among the server's models", name)
			if !r.o.Interactive {
				return "", fmt.Errorf("%s: %s is not among %s: %w", label, name, strings.Join(models, ", "), ErrNotVerified)
			}
		}
		flag = ""
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// preferredClaude is the Sonnet model of the list, else its first.
func preferredClaude(models []string) string {
	for _, m := range models {
		if strings.Contains(m, "sonnet") {
			return m
		}
	}
	return first(models)
}

var nameChars = regexp.MustCompile(`[^a-z0-9-]+`)

// endpointName proposes a name for a server from its URL: "openrouter"
// for openrouter.ai, else a word for the usual ports, else the host.
func endpointName(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return "server"
	}
	host := u.Hostname()
	switch {
	case strings.HasSuffix(host, "openrouter.ai"):
		return "openrouter"
	case strings.HasSuffix(host, "openai.com"):
		return "openai"
	}
	switch u.Port() {
	case "8000":
		return "vllm"
	case "8080":
		return "llamacpp"
	case "1234":
		return "lmstudio"
	case "30000":
		return "sglang"
	}
	n := strings.Trim(nameChars.ReplaceAllString(strings.ToLower(host), "-"), "-")
	if n == "" {
		return "server"
	}
	return n
}

// errKeyRefused is a key the server refused.
var errKeyRefused = errors.New("the key was refused")

// listOpenAI lists an OpenAI-compatible server's models.
func listOpenAI(ctx context.Context, name, base, key string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	p, err := openai.New(openai.Options{Name: name, BaseURL: base, APIKey: key})
	if err != nil {
		return nil, err
	}
	infos, err := p.ListModels(ctx)
	if err != nil {
		if isAuth(err) {
			return nil, fmt.Errorf("%w by %s at %s", errKeyRefused, name, base)
		}
		return nil, err
	}
	var out []string
	for _, m := range infos {
		out = append(out, m.ID)
	}
	slices.Sort(out)
	return out, nil
}

// listAnthropic checks an Anthropic key by listing its models.
func listAnthropic(ctx context.Context, key, base string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	p, err := anthropic.New(key, base, nil)
	if err != nil {
		return nil, err
	}
	return p.ListModels(ctx)
}

// isAuth reports whether err is a refused key (the providers say so in
// their messages; neither has a sentinel for it).
func isAuth(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "401") || strings.Contains(msg, "403") || strings.Contains(msg, "refused") && strings.Contains(msg, "key") ||
		errors.Is(err, model.ErrInvalidRequest) && strings.Contains(msg, "key")
}
