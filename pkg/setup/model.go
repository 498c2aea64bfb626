package setup

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/mother-chat/mother/pkg/config"
)

func (r *run) model() error {
	r.section("Model (Ollama)")
	cur := r.cfg.str("providers", "ollama", "url")
	u := orDefault(r.f.OllamaURL, orDefault(cur, config.DefaultOllamaURL))
	var models []Model
	for asked := false; ; asked = true {
		if r.o.Interactive && (r.f.OllamaURL == "" || asked) {
			var err error
			if u, err = r.p.ask("Ollama URL", u); err != nil {
				return err
			}
		}
		version, ms, err := checkOllama(r.ctx, u)
		if err == nil {
			models = ms
			r.say("  ✓ Ollama %s at %s, %d model(s):", version, u, len(ms))
			// Numbered: the model questions take a number or a name.
			for i, m := range ms {
				r.say("     %d. %s%s", i+1, m.Name, toolNote(m))
			}
			break
		}
		r.say("  ✗ %v", err)
		if !r.o.Interactive {
			r.say("  ! kept unchecked: start Ollama there before Mother")
			break
		}
		keep, err := r.p.yes("Keep this URL anyway (Ollama is not running yet)?", false)
		if err != nil {
			return err
		}
		if keep {
			break
		}
	}
	if !r.exists || u != orDefault(cur, config.DefaultOllamaURL) {
		r.put(u, "providers", "ollama", "url")
	}
	if p := r.cfg.str("model", "provider"); p != "" && p != "ollama" {
		r.say("  Mother's model is %s/%s: kept (setup picks Ollama models only)", p, r.cfg.str("model", "id"))
	} else {
		id, err := r.pickModel("Mother's model", r.f.Model, orDefault(r.cfg.str("model", "id"), config.DefaultModelID), models)
		if err != nil {
			return err
		}
		if !r.exists || id != orDefault(r.cfg.str("model", "id"), config.DefaultModelID) {
			r.put(id, "model", "id")
		}
	}
	tier := orDefault(r.cfg.str("chicks", "defaultTier"), config.DefaultTier)
	if p := r.cfg.str("chicks", "tiers", tier, "provider"); p != "" && p != "ollama" {
		r.say("  The chicks' tier %s uses %s: kept", tier, p)
		return nil
	}
	id, err := r.pickModel("Chicks' model (tier "+tier+")", r.f.ChickModel, orDefault(r.cfg.str("chicks", "tiers", tier, "model"), config.DefaultChickModel), models)
	if err != nil {
		return err
	}
	// A new configuration says what was chosen; an existing one changes
	// only where the answer differs from what it means now.
	if !r.exists || id != orDefault(r.cfg.str("chicks", "tiers", tier, "model"), config.DefaultChickModel) {
		r.put(id, "chicks", "tiers", tier, "model")
		if r.cfg.at("chicks", "tiers", tier, "provider") == nil {
			r.put("ollama", "chicks", "tiers", tier, "provider")
		}
	}
	return nil
}

func toolNote(m Model) string {
	switch {
	case !m.Known:
		return "  (tool support unknown)"
	case !m.Tools:
		return "  ! no tool support"
	}
	return "  tools"
}

// pickModel asks for a model by number or name and warns about one that
// is missing or cannot call tools.
func (r *run) pickModel(label, flag, def string, models []Model) (string, error) {
	for {
		name := flag
		if name == "" {
			name = def
			if r.o.Interactive {
				var err error
				if name, err = r.p.ask(label+" (number or name)", def); err != nil {
					return "", err
				}
			}
		}
		if n, err := strconv.Atoi(name); err == nil && n >= 1 && n <= len(models) {
			name = models[n-1].Name
		}
		i := slices.IndexFunc(models, func(m Model) bool { return m.Name == name || m.Name == name+":latest" })
		switch {
		case models == nil:
			return name, nil
		case i < 0:
			r.say("  ! %s is not on this Ollama server: run `ollama pull %s` there", name, name)
			r.next = append(r.next, fmt.Sprintf("on the Ollama server: ollama pull %s", name))
			return name, nil
		case models[i].Known && !models[i].Tools:
			r.say("  ! %s does not support tools: Mother and chicks work by calling tools, so it will not do", name)
			if !r.o.Interactive {
				return name, nil
			}
			ok, err := r.p.yes("Use it anyway?", false)
			if err != nil {
				return "", err
			}
			if ok {
				return name, nil
			}
			flag = ""
			continue
		}
		r.say("  ✓ %s: %s", label, name)
		return name, nil
	}
}
