package migrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/config"
)

// The old models file is pi's models.json (the TypeScript Mother read it
// from MOTHER_MODELS_JSON, default ~/.pi/mother/models.json; pi itself from
// ~/.pi/agent/models.json):
//
//	{"providers": {"<name>": {"baseUrl", "apiKey", "api", "headers",
//	    "models": [{"id", "name", "api", "cost": {"input", "output"}, ...}]}}}
//
// Mother speaks two APIs: Ollama's and Anthropic's. A provider maps when
// its api is "anthropic-messages", or "openai-completions" at an Ollama
// server (its name says ollama or its URL's port is 11434; Mother uses
// Ollama's native API at the same server). Its URL goes to
// providers.ollama.url or providers.anthropic.baseURL, an Anthropic key to
// providers.anthropic.apiKey, and each of its models becomes a tier of
// chicks.tiers. Everything else is listed with the reason it could not map.

// oldProvider is one provider of models.json.
type oldProvider struct {
	BaseURL        string                     `json:"baseUrl"`
	APIKey         string                     `json:"apiKey"`
	API            string                     `json:"api"`
	Headers        map[string]string          `json:"headers"`
	Models         []json.RawMessage          `json:"models"`
	ModelOverrides map[string]json.RawMessage `json:"modelOverrides"`
}

// oldModelDef is one model of a provider.
type oldModelDef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	API  string `json:"api"`
	Cost *struct {
		Input  float64 `json:"input"`
		Output float64 `json:"output"`
	} `json:"cost"`
}

// envName is how pi's apiKey names an environment variable.
var envName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// modelsPlan is what the models files map to, before it is merged into
// config.json.
type modelsPlan struct {
	ollamaURL, ollamaFrom       string
	anthropicURL, anthropicFrom string
	anthropicKey                string // a literal key
	anthropicKeyFrom            string
	anthropicEnvKey             bool // apiKey is ANTHROPIC_API_KEY, which Mother reads too
	tiers                       []plannedTier
	mapped, unmapped            []string
}

type plannedTier struct {
	name, from string
	tier       map[string]any
	provider   string
	model      string
}

// ModelsReport says what the models files mapped to.
type ModelsReport struct {
	// Files are the models files read.
	Files []string
	// Mapped lists what went into config.json; NotMapped every entry that
	// did not, with the reason.
	Mapped    []string
	NotMapped []string
	// Config is the config.json written ("" when nothing changed) and
	// Backup the copy of the previous one.
	Config, Backup string
}

// migrateModels reads the models files and merges what maps into
// newDir/config.json.
func migrateModels(files []string, newDir string) (*ModelsReport, error) {
	rep := &ModelsReport{}
	cfgPath := filepath.Join(newDir, config.File)
	root, existed, err := readConfigMap(cfgPath)
	if err != nil {
		return nil, err
	}
	plan := &modelsPlan{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			rep.NotMapped = append(rep.NotMapped, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		rep.Files = append(rep.Files, f)
		plan.readFile(f, b, root)
	}
	rep.Mapped, rep.NotMapped = plan.mapped, append(rep.NotMapped, plan.unmapped...)
	changed := plan.apply(root, rep)
	if !changed {
		return rep, nil
	}
	out, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", cfgPath, err)
	}
	out = append(out, '\n')
	var check config.Config
	if err := config.Parse(out, &check); err != nil {
		return nil, fmt.Errorf("the merged %s would not load (%v); nothing written", cfgPath, err)
	}
	if existed {
		backup, err := backupFile(cfgPath)
		if err != nil {
			return nil, err
		}
		rep.Backup = backup
	}
	if err := atomicfile.WriteFile(cfgPath, out, 0o600); err != nil {
		return nil, err
	}
	rep.Config = cfgPath
	return rep, nil
}

// readConfigMap reads config.json as a generic object (numbers kept as
// written), or an empty one when there is none.
func readConfigMap(path string) (map[string]any, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]any{}, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var root map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil || root == nil {
		return nil, false, fmt.Errorf("%s is not a JSON object (%v); fix it, then run mother migrate again (the models were not merged)", path, err)
	}
	return root, true, nil
}

// backupFile copies path to path.before-migrate (or .before-migrate.N if
// that exists) and returns the copy's name.
func backupFile(path string) (string, error) {
	name := path + ".before-migrate"
	for i := 2; ; i++ {
		if _, err := os.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			break
		}
		name = fmt.Sprintf("%s.before-migrate.%d", path, i)
	}
	if err := copyFile(path, name); err != nil {
		return "", fmt.Errorf("back up %s: %w", path, err)
	}
	return name, nil
}

// readFile plans one models file. Malformed parts are reported (with line
// and column for syntax errors) and skipped.
func (p *modelsPlan) readFile(file string, b []byte, root map[string]any) {
	var f struct {
		Providers map[string]json.RawMessage `json:"providers"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := lineCol(b, se.Offset)
			p.unmapped = append(p.unmapped, fmt.Sprintf("%s:%d:%d: not JSON (%v); nothing read from it", file, line, col, err))
		} else {
			p.unmapped = append(p.unmapped, fmt.Sprintf("%s: %v; nothing read from it", file, err))
		}
		return
	}
	if len(f.Providers) == 0 {
		p.unmapped = append(p.unmapped, fmt.Sprintf("%s: no \"providers\"", file))
		return
	}
	names := make([]string, 0, len(f.Providers))
	for n := range f.Providers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		field := fmt.Sprintf("%s: providers.%s", file, name)
		var prov oldProvider
		if err := json.Unmarshal(f.Providers[name], &prov); err != nil {
			p.unmapped = append(p.unmapped, fmt.Sprintf("%s: %v", field, err))
			continue
		}
		p.provider(file, field, name, prov, root)
	}
}

// kind says which of Mother's providers an old provider is, or why none.
func kind(name, api, baseURL string) (string, string) {
	switch {
	case api == "anthropic-messages", api == "" && name == "anthropic":
		return "anthropic", ""
	case (api == "openai-completions" || api == "") && isOllama(name, baseURL):
		return "ollama", ""
	case api == "":
		return "", "no \"api\", and not a provider Mother knows"
	case strings.HasPrefix(api, "openai"), strings.HasPrefix(api, "azure-openai"):
		return "", fmt.Sprintf("api %q at %s is OpenAI's (not an Ollama server); Mother speaks Ollama's and Anthropic's APIs only", api, orNone(baseURL))
	default:
		return "", fmt.Sprintf("api %q is not one Mother speaks (Ollama's and Anthropic's only)", api)
	}
}

func orNone(s string) string {
	if s == "" {
		return "(no baseUrl)"
	}
	return s
}

func isOllama(name, baseURL string) bool {
	if strings.Contains(strings.ToLower(name), "ollama") {
		return true
	}
	u, err := url.Parse(baseURL)
	return err == nil && u.Port() == "11434"
}

// normURL checks an http(s) URL and drops a trailing "/" and "/v1" (the
// OpenAI-compatible path; Mother's clients add their own).
func normURL(s string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("baseUrl %q is not an http(s) URL", s)
	}
	out := strings.TrimRight(u.String(), "/")
	out = strings.TrimSuffix(out, "/v1")
	return strings.TrimRight(out, "/"), nil
}

// getPath returns root[a][b]... as a string ("" if absent).
func getPath(root map[string]any, keys ...string) any {
	var cur any = root
	for _, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

func getString(root map[string]any, keys ...string) string {
	s, _ := getPath(root, keys...).(string)
	return s
}

// provider plans one old provider and its models.
func (p *modelsPlan) provider(file, field, name string, prov oldProvider, root map[string]any) {
	from := fmt.Sprintf("%s (provider %s)", file, name)
	k, why := kind(name, prov.API, prov.BaseURL)
	if len(prov.Headers) > 0 {
		p.unmapped = append(p.unmapped, fmt.Sprintf("%s.headers: custom headers are not supported by Mother; not carried", field))
	}
	if len(prov.ModelOverrides) > 0 {
		p.unmapped = append(p.unmapped, fmt.Sprintf("%s.modelOverrides: overrides of pi's built-in models have no counterpart; not carried", field))
	}
	// Where the provider's models can go, and why not.
	providerOK, providerWhy := k != "", why
	switch k {
	case "ollama":
		u := prov.BaseURL
		if u == "" {
			u = config.DefaultOllamaURL
		}
		nu, err := normURL(u)
		switch {
		case err != nil:
			providerOK, providerWhy = false, err.Error()
		default:
			have := getString(root, "providers", "ollama", "url")
			if have != "" {
				if hn, err := normURL(have); err == nil {
					have = hn
				}
			}
			switch {
			case have != "" && have != nu:
				providerOK, providerWhy = false, fmt.Sprintf("its server %s is not the one config.json already names (providers.ollama.url %s); Mother has one Ollama server", nu, have)
			case p.ollamaURL != "" && p.ollamaURL != nu:
				providerOK, providerWhy = false, fmt.Sprintf("its server %s is a second Ollama server; Mother has one (%s, from %s)", nu, p.ollamaURL, p.ollamaFrom)
			case have == "" && p.ollamaURL == "":
				p.ollamaURL, p.ollamaFrom = nu, from
				p.mapped = append(p.mapped, fmt.Sprintf("providers.ollama.url = %s (from %s)", nu, from))
			}
		}
	case "anthropic":
		if prov.BaseURL != "" {
			nu, err := normURL(prov.BaseURL)
			have := getString(root, "providers", "anthropic", "baseURL")
			switch {
			case err != nil:
				providerOK, providerWhy = false, err.Error()
			case nu == config.DefaultAnthropicBaseURL:
			case have != "" && strings.TrimRight(have, "/") != nu:
				providerOK, providerWhy = false, fmt.Sprintf("its endpoint %s is not the one config.json already names (providers.anthropic.baseURL %s)", nu, have)
			case p.anthropicURL != "" && p.anthropicURL != nu:
				providerOK, providerWhy = false, fmt.Sprintf("its endpoint %s is a second Anthropic endpoint; Mother has one (%s, from %s)", nu, p.anthropicURL, p.anthropicFrom)
			case have == "" && p.anthropicURL == "":
				p.anthropicURL, p.anthropicFrom = nu, from
				p.mapped = append(p.mapped, fmt.Sprintf("providers.anthropic.baseURL = %s (from %s)", nu, from))
			}
		}
		if providerOK && len(prov.Models) > 0 {
			providerOK, providerWhy = p.anthropicKeyFor(field, from, prov.APIKey, root)
		}
	}
	if !providerOK && len(prov.Models) == 0 {
		p.unmapped = append(p.unmapped, fmt.Sprintf("%s: %s", field, providerWhy))
		return
	}
	for i, raw := range prov.Models {
		mfield := fmt.Sprintf("%s.models[%d]", field, i)
		var m oldModelDef
		if err := json.Unmarshal(raw, &m); err != nil {
			p.unmapped = append(p.unmapped, fmt.Sprintf("%s: %v", mfield, err))
			continue
		}
		if m.ID == "" {
			p.unmapped = append(p.unmapped, fmt.Sprintf("%s: no \"id\"", mfield))
			continue
		}
		mfield += " (" + m.ID + ")"
		mk, mwhy := k, providerWhy
		if m.API != "" && m.API != prov.API {
			mk, mwhy = kind(name, m.API, prov.BaseURL)
			if mk != "" && mk != k {
				mk, mwhy = "", fmt.Sprintf("api %q differs from its provider's; Mother cannot reach it there", m.API)
			}
		}
		if mk == "" || !providerOK {
			p.unmapped = append(p.unmapped, fmt.Sprintf("%s: %s", mfield, mwhy))
			continue
		}
		p.tier(mfield, from, mk, m, root)
	}
}

// anthropicKeyFor plans the Anthropic key; without one Mother could use,
// the provider's models do not map (a tier on Anthropic needs a key, or
// Mother does not start).
func (p *modelsPlan) anthropicKeyFor(field, from, key string, root map[string]any) (bool, string) {
	have := getString(root, "providers", "anthropic", "apiKey")
	switch {
	case have != "" || p.anthropicKey != "" || p.anthropicEnvKey:
		return true, ""
	case key == "":
		return false, "no apiKey, and config.json has no providers.anthropic.apiKey"
	case strings.HasPrefix(key, "!"):
		return false, "apiKey is a shell command; put the key in providers.anthropic.apiKey (or ANTHROPIC_API_KEY) and run mother migrate again"
	case key == "ANTHROPIC_API_KEY":
		p.anthropicEnvKey = true
		p.mapped = append(p.mapped, fmt.Sprintf("Anthropic key: from the environment variable ANTHROPIC_API_KEY, as before (from %s)", from))
		return true, ""
	case envName.MatchString(key):
		return false, fmt.Sprintf("apiKey names the environment variable %s; Mother reads ANTHROPIC_API_KEY (or providers.anthropic.apiKey): set one and run mother migrate again", key)
	default:
		p.anthropicKey, p.anthropicKeyFrom = key, from
		p.mapped = append(p.mapped, fmt.Sprintf("providers.anthropic.apiKey = (the key of %s)", from))
		return true, ""
	}
}

// tierName makes a tier name of a model id: letters, digits, '.', '_' and
// '-', starting with a letter or digit, at most 64 characters.
func tierName(id string) string {
	var b strings.Builder
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && (r == '.' || r == '_' || r == '-'):
			b.WriteRune(r)
		case b.Len() > 0:
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if len(s) > 64 {
		s = strings.TrimRight(s[:64], "-._")
	}
	return s
}

// tier plans one model as a tier.
func (p *modelsPlan) tier(field, from, provider string, m oldModelDef, root map[string]any) {
	base := tierName(m.ID)
	if base == "" {
		p.unmapped = append(p.unmapped, fmt.Sprintf("%s: no tier name can be made of the id", field))
		return
	}
	existing, _ := getPath(root, "chicks", "tiers").(map[string]any)
	taken := func(n string) (bool, bool) { // taken, same model
		if t, ok := existing[n].(map[string]any); ok {
			prov, _ := t["provider"].(string)
			if prov == "" {
				prov = "ollama"
			}
			mod, _ := t["model"].(string)
			return true, prov == provider && mod == m.ID
		}
		for _, pt := range p.tiers {
			if pt.name == n {
				return true, pt.provider == provider && pt.model == m.ID
			}
		}
		return false, false
	}
	name := base
	for i := 2; ; i++ {
		t, same := taken(name)
		if same {
			p.mapped = append(p.mapped, fmt.Sprintf("chicks.tiers.%s: %s/%s already there (from %s)", name, provider, m.ID, from))
			return
		}
		if !t {
			break
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
	desc := m.Name
	if desc == "" {
		desc = m.ID
	}
	tier := map[string]any{"provider": provider, "model": m.ID, "description": desc + " (from the old models.json)"}
	if m.Cost != nil && (m.Cost.Input > 0 || m.Cost.Output > 0) {
		tier["price"] = map[string]any{"inputPerMTok": m.Cost.Input, "outputPerMTok": m.Cost.Output}
	}
	p.tiers = append(p.tiers, plannedTier{name: name, from: from, tier: tier, provider: provider, model: m.ID})
	p.mapped = append(p.mapped, fmt.Sprintf("chicks.tiers.%s = %s/%s (from %s)", name, provider, m.ID, from))
}

// obj returns root[key] as an object, creating it.
func obj(root map[string]any, key string) map[string]any {
	if m, ok := root[key].(map[string]any); ok {
		return m
	}
	m := map[string]any{}
	root[key] = m
	return m
}

// apply merges the plan into root and reports whether anything changed.
// Values config.json already has are never replaced (the plan checked
// them).
func (p *modelsPlan) apply(root map[string]any, rep *ModelsReport) bool {
	changed := false
	if p.ollamaURL != "" {
		obj(obj(root, "providers"), "ollama")["url"] = p.ollamaURL
		changed = true
	}
	if p.anthropicURL != "" {
		obj(obj(root, "providers"), "anthropic")["baseURL"] = p.anthropicURL
		changed = true
	}
	if p.anthropicKey != "" {
		obj(obj(root, "providers"), "anthropic")["apiKey"] = p.anthropicKey
		changed = true
	}
	for _, t := range p.tiers {
		obj(obj(root, "chicks"), "tiers")[t.name] = t.tier
		changed = true
	}
	return changed
}

// lineCol turns a syntax error's offset (just past the offending byte)
// into the 1-based line and column of that byte.
func lineCol(b []byte, off int64) (int, int) {
	off--
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	if off < 0 {
		off = 0
	}
	line, col := 1, 1
	for _, c := range b[:off] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}
