package migrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
//	    "models": [{"id", "name", "api", "reasoning", "input",
//	        "contextWindow", "maxTokens", "cost": {"input", "output"}}]}}}
//
// Mother speaks Ollama's API, Anthropic's, and OpenAI's Chat Completions at
// the endpoints of providers.openai. A provider maps when its api is
// "anthropic-messages"; "openai-completions" at an Ollama server (its name
// says ollama or its URL's port is 11434; Mother uses Ollama's native API at
// the same server); any other "openai-completions" (an endpoint of
// providers.openai named after the provider); or "openai-responses" at
// OpenAI's own API, which serves Chat Completions too. Its URL goes to
// providers.ollama.url, providers.anthropic.baseURL or the endpoint's
// baseURL, its key to providers.anthropic.apiKey or the endpoint's apiKey or
// apiKeyEnv, and each of its models becomes a tier of chicks.tiers. The old
// Mother's own model, when it is one of them, becomes model.provider and
// model.id. Everything else is listed with the reason it could not map.

// oldProvider is one provider of models.json.
type oldProvider struct {
	BaseURL        string                     `json:"baseUrl"`
	APIKey         string                     `json:"apiKey"`
	API            string                     `json:"api"`
	Headers        map[string]string          `json:"headers"`
	Compat         json.RawMessage            `json:"compat"`
	Models         []json.RawMessage          `json:"models"`
	ModelOverrides map[string]json.RawMessage `json:"modelOverrides"`
}

// oldModelDef is one model of a provider. pi's cost is in US dollars per
// million tokens, as Mother's tier price.
type oldModelDef struct {
	ID            string          `json:"id"`
	Name          string          `json:"name"`
	API           string          `json:"api"`
	Reasoning     bool            `json:"reasoning"`
	Input         []string        `json:"input"`
	ContextWindow float64         `json:"contextWindow"`
	MaxTokens     float64         `json:"maxTokens"`
	Compat        json.RawMessage `json:"compat"`
	Cost          *struct {
		Input  float64 `json:"input"`
		Output float64 `json:"output"`
	} `json:"cost"`
}

// envName is how pi's apiKey (or a header's value) names an environment
// variable: pi uses the variable's value when a variable of that name is
// set, and upper-case names such as OPENROUTER_API_KEY are meant so.
var envName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// builtinOpenAI are pi's built-in OpenAI-compatible providers, to which a
// models.json may add models without giving a baseUrl, api or apiKey:
// where they are, the API pi uses, and the variable pi reads the key from.
var builtinOpenAI = map[string]struct{ baseURL, api, keyEnv string }{
	"openai":     {"https://api.openai.com/v1", "openai-responses", "OPENAI_API_KEY"},
	"openrouter": {"https://openrouter.ai/api/v1", "openai-completions", "OPENROUTER_API_KEY"},
}

// modelsPlan is what the models files map to, before it is merged into
// config.json.
type modelsPlan struct {
	ollamaURL, ollamaFrom       string
	anthropicURL, anthropicFrom string
	anthropicKey                string // a literal key
	anthropicKeyFrom            string
	anthropicEnvKey             bool // apiKey is ANTHROPIC_API_KEY, which Mother reads too
	endpoints                   []*plannedEndpoint
	tiers                       []plannedTier
	// models are the old models that have a tier (new or already in
	// config.json), to find the old Mother's own model among them.
	models []mappedModel
	// own is the old Mother's own model (zero: not known); ownProvider and
	// ownTier what it maps to, when this plan sets them.
	own                  OldModel
	ownProvider, ownTier string
	mapped, unmapped     []string
}

type plannedTier struct {
	name, from string
	tier       map[string]any
	provider   string
	model      string
}

// mappedModel is an old model and the tier it has.
type mappedModel struct {
	oldProvider, id string
	provider, tier  string
}

// openAISpec is the endpoint of providers.openai an old OpenAI-compatible
// provider makes.
type openAISpec struct {
	baseURL   string
	note      string // how baseURL was made of the old baseUrl, if it was changed
	apiKey    string // a literal key
	apiKeyEnv string
	headers   map[string]string
	// What could not be carried: a shell command for the key, and the
	// headers whose value names a variable or a command.
	keyCommand    bool
	headersNotSet []string
}

// plannedEndpoint is an endpoint of providers.openai the plan adds, or one
// config.json already has that serves an old provider (existing; then
// only the context windows of its new models are added).
type plannedEndpoint struct {
	name     string
	spec     openAISpec
	existing bool
	windows  map[string]int // model id: context window, to add
}

// OldModel is the old Mother's own model: the provider (a name of
// models.json, or one of pi's built-in providers) and model id.
type OldModel struct {
	Provider, ID string
	// From says where they were read; ProviderFromEnv is set when the
	// provider came from MOTHER_MODEL_PROVIDER.
	From            string
	ProviderFromEnv bool
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
// newDir/config.json; own is the old Mother's own model, if known.
func migrateModels(files []string, newDir string, own OldModel) (*ModelsReport, error) {
	rep := &ModelsReport{}
	cfgPath := filepath.Join(newDir, config.File)
	root, existed, err := readConfigMap(cfgPath)
	if err != nil {
		return nil, err
	}
	plan := &modelsPlan{own: own}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			rep.NotMapped = append(rep.NotMapped, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		rep.Files = append(rep.Files, f)
		plan.readFile(f, b, root)
	}
	plan.ownModel(root)
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

// readOldModel reads the old Mother's own model as she did: defaultProvider
// and defaultModel of the old workspace's settings.json, else
// MOTHER_MODEL_PROVIDER and MOTHER_MODEL_ID of the environment (getenv;
// nil: none). problem is set when settings.json could not be read.
func readOldModel(workspace string, getenv func(string) string) (o OldModel, problem string) {
	var from []string
	path := filepath.Join(workspace, "settings.json")
	if b, err := os.ReadFile(path); err == nil {
		var s struct {
			DefaultProvider string `json:"defaultProvider"`
			DefaultModel    string `json:"defaultModel"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			problem = fmt.Sprintf("settings.json: not the old Mother's settings (%v); her model was not read from it", err)
		} else if s.DefaultProvider != "" || s.DefaultModel != "" {
			o.Provider, o.ID = s.DefaultProvider, s.DefaultModel
			from = append(from, path)
		}
	}
	if getenv != nil {
		if v := getenv("MOTHER_MODEL_PROVIDER"); o.Provider == "" && v != "" {
			o.Provider, o.ProviderFromEnv = v, true
			from = append(from, "MOTHER_MODEL_PROVIDER")
		}
		if v := getenv("MOTHER_MODEL_ID"); o.ID == "" && v != "" {
			o.ID = v
			from = append(from, "MOTHER_MODEL_ID")
		}
	}
	o.From = strings.Join(from, " and ")
	return o, problem
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
	case api == "openai-completions":
		return "openai", ""
	case api == "openai-responses" && isOpenAIAPI(baseURL):
		// OpenAI's own API serves Chat Completions too.
		return "openai", ""
	case api == "":
		return "", "no \"api\", and not a provider Mother knows"
	case api == "openai-responses":
		return "", fmt.Sprintf("api %q at %s is OpenAI's Responses API; Mother speaks Chat Completions to OpenAI-compatible servers, and of the Responses servers only OpenAI's own is known to serve that too (if this one does, add it to providers.openai by hand)", api, orNone(baseURL))
	default:
		return "", fmt.Sprintf("api %q is not one Mother speaks (Ollama's, Anthropic's and OpenAI's Chat Completions only)", api)
	}
}

func orNone(s string) string {
	if s == "" {
		return "(no baseUrl)"
	}
	return redactURL(s)
}

func isOllama(name, baseURL string) bool {
	if strings.Contains(strings.ToLower(name), "ollama") {
		return true
	}
	u, err := url.Parse(baseURL)
	return err == nil && u.Port() == "11434"
}

// isOpenAIAPI reports whether baseURL is OpenAI's own API.
func isOpenAIAPI(baseURL string) bool {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	return err == nil && strings.EqualFold(u.Hostname(), "api.openai.com")
}

// redactURL hides the password of a URL written with one, for the report.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	return s
}

// normURL checks an http(s) URL and drops a trailing "/" and "/v1" (the
// OpenAI-compatible path; Mother's clients add their own).
func normURL(s string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("baseUrl %q is not an http(s) URL", redactURL(s))
	}
	out := strings.TrimRight(u.String(), "/")
	out = strings.TrimSuffix(out, "/v1")
	return strings.TrimRight(out, "/"), nil
}

// openAIURL makes an endpoint's baseURL of an old baseUrl. Mother adds
// "/chat/completions" to it, as pi's client did, so a path is kept as
// given, but for a server's root: the servers pi's users ran (vLLM,
// llama.cpp's llama-server, LM Studio, SGLang, Ollama) all serve the API
// under /v1, so "/v1" is added, and OpenRouter's is /api/v1. note says
// what was changed ("" when nothing was).
func openAIURL(s string) (out, note string, err error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", "", fmt.Errorf("baseUrl %q is not an http(s) URL", redactURL(s))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return strings.TrimSpace(s), "", nil
	}
	path := strings.TrimRight(u.Path, "/")
	u.Path, u.RawPath = path, ""
	switch {
	case strings.HasSuffix(path, "/v1"):
	case strings.EqualFold(u.Hostname(), "openrouter.ai") && (path == "" || path == "/api"):
		u.Path = "/api/v1"
		note = "OpenRouter's API is at /api/v1"
	case path == "":
		u.Path = "/v1"
		note = "/v1 added, where OpenAI-compatible servers serve the API"
	default:
		note = "kept as given: its path does not end in /v1"
	}
	if note != "" {
		note = fmt.Sprintf("baseUrl %s: %s", redactURL(s), note)
	}
	return u.String(), note, nil
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
	if b, ok := builtinOpenAI[name]; ok {
		// Models added to one of pi's built-in providers: what the
		// file leaves out is the built-in's.
		if prov.BaseURL == "" {
			prov.BaseURL = b.baseURL
		}
		if prov.API == "" {
			prov.API = b.api
		}
		if prov.APIKey == "" {
			prov.APIKey = b.keyEnv
		}
	}
	k, why := kind(name, prov.API, prov.BaseURL)
	if len(prov.Headers) > 0 && k != "openai" {
		p.unmapped = append(p.unmapped, fmt.Sprintf("%s.headers: custom headers are not supported by Mother's Ollama and Anthropic providers (only by OpenAI-compatible endpoints); not carried", field))
	}
	if len(prov.ModelOverrides) > 0 {
		p.unmapped = append(p.unmapped, fmt.Sprintf("%s.modelOverrides: overrides of pi's built-in models have no counterpart; not carried", field))
	}
	if len(prov.Compat) > 0 && k != "" {
		p.unmapped = append(p.unmapped, fmt.Sprintf("%s.compat: pi's compatibility switches have no counterpart; not carried", field))
	}
	// Where the provider's models can go, and why not.
	providerOK, providerWhy := k != "", why
	var spec openAISpec
	var ep *plannedEndpoint // made for the first model that maps
	switch k {
	case "openai":
		var err error
		if spec, err = openAISpecOf(prov); err != nil {
			providerOK, providerWhy = false, err.Error()
		}
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
		ref := mk
		if mk == "openai" {
			if ep == nil {
				ep = p.endpoint(field, from, name, spec, root)
			}
			ref = "openai:" + ep.name
			p.window(ep, m, from, root)
		}
		if tier := p.tier(mfield, from, ref, m, root); tier != "" {
			p.models = append(p.models, mappedModel{oldProvider: name, id: m.ID, provider: ref, tier: tier})
		}
		if len(m.Compat) > 0 {
			p.unmapped = append(p.unmapped, fmt.Sprintf("%s.compat: pi's compatibility switches have no counterpart; not carried", mfield))
		}
	}
	if k == "openai" && providerOK && len(prov.Models) == 0 {
		p.unmapped = append(p.unmapped, fmt.Sprintf("%s: no models; no endpoint made for it", field))
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

// keyRef tells what pi makes of an apiKey or a header's value: "!command"
// runs a command for it (command); a name such as OPENROUTER_API_KEY is an
// environment variable (env; "$NAME" and "${NAME}", which pi would have
// sent as written, are taken as meant); anything else is the value itself
// (literal).
func keyRef(v string) (literal, env string, command bool) {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		return "", "", false
	case strings.HasPrefix(v, "!"):
		return "", "", true
	case envName.MatchString(v):
		return "", v, false
	case strings.HasPrefix(v, "${") && strings.HasSuffix(v, "}") && envName.MatchString(v[2:len(v)-1]):
		return "", v[2 : len(v)-1], false
	case strings.HasPrefix(v, "$") && envName.MatchString(v[1:]):
		return "", v[1:], false
	}
	return v, "", false
}

// openAISpecOf makes the endpoint an old OpenAI-compatible provider needs.
func openAISpecOf(prov oldProvider) (openAISpec, error) {
	var spec openAISpec
	if strings.TrimSpace(prov.BaseURL) == "" {
		return spec, errors.New("no baseUrl: Mother cannot tell where the server is")
	}
	u, note, err := openAIURL(prov.BaseURL)
	if err != nil {
		return spec, err
	}
	spec.baseURL, spec.note = u, note
	spec.apiKey, spec.apiKeyEnv, spec.keyCommand = keyRef(prov.APIKey)
	for _, h := range slices.Sorted(maps.Keys(prov.Headers)) {
		lit, env, cmd := keyRef(prov.Headers[h])
		switch {
		case cmd || env != "":
			spec.headersNotSet = append(spec.headersNotSet, h)
		default:
			if spec.headers == nil {
				spec.headers = map[string]string{}
			}
			spec.headers[h] = lit
		}
	}
	return spec, nil
}

// serves reports whether the endpoint e of config.json (or of the plan)
// serves spec: the same baseURL and, when spec names a key, the same key.
// An endpoint the operator gave a key by hand still serves a provider
// whose key could not be carried.
func serves(e map[string]any, spec openAISpec) bool {
	base, _ := e["baseURL"].(string)
	if strings.TrimRight(strings.TrimSpace(base), "/") != strings.TrimRight(spec.baseURL, "/") {
		return false
	}
	if spec.apiKey == "" && spec.apiKeyEnv == "" {
		return true
	}
	key, _ := e["apiKey"].(string)
	env, _ := e["apiKeyEnv"].(string)
	return key == spec.apiKey && env == spec.apiKeyEnv
}

// specMap is spec as config.json writes the endpoint.
func specMap(spec openAISpec) map[string]any {
	m := map[string]any{"baseURL": spec.baseURL}
	if spec.apiKey != "" {
		m["apiKey"] = spec.apiKey
	}
	if spec.apiKeyEnv != "" {
		m["apiKeyEnv"] = spec.apiKeyEnv
	}
	if len(spec.headers) > 0 {
		h := map[string]any{}
		for k, v := range spec.headers {
			h[k] = v
		}
		m["headers"] = h
	}
	return m
}

// endpoint finds the endpoint of providers.openai that serves an old
// provider (in config.json or planned from an earlier provider) or plans
// a new one, named after the provider (made a valid name; "-2", "-3"...
// when the name is taken by an endpoint elsewhere).
func (p *modelsPlan) endpoint(field, from, provName string, spec openAISpec, root map[string]any) *plannedEndpoint {
	base := tierName(provName)
	if base == "" {
		base = "openai"
	}
	existing, _ := getPath(root, "providers", "openai").(map[string]any)
	name := base
	for i := 2; ; i++ {
		if e, ok := existing[name].(map[string]any); ok {
			if serves(e, spec) {
				if pe := p.plannedEndpoint(name); pe != nil {
					return pe
				}
				pe := &plannedEndpoint{name: name, spec: spec, existing: true, windows: map[string]int{}}
				p.endpoints = append(p.endpoints, pe)
				p.mapped = append(p.mapped, fmt.Sprintf("providers.openai.%s: %s already there (from %s)", name, redactURL(spec.baseURL), from))
				return pe
			}
		} else if pe := p.plannedEndpoint(name); pe == nil {
			break
		} else if !pe.existing && serves(specMap(pe.spec), spec) {
			return pe
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
	pe := &plannedEndpoint{name: name, spec: spec, windows: map[string]int{}}
	p.endpoints = append(p.endpoints, pe)
	f := "providers.openai." + name
	line := fmt.Sprintf("%s.baseURL = %s (from %s", f, redactURL(spec.baseURL), from)
	if spec.note != "" {
		line += "; " + spec.note
	}
	p.mapped = append(p.mapped, line+")")
	switch {
	case spec.apiKey != "":
		p.mapped = append(p.mapped, fmt.Sprintf("%s.apiKey = (the key of %s)", f, from))
	case spec.apiKeyEnv != "":
		p.mapped = append(p.mapped, fmt.Sprintf("%s.apiKeyEnv = %s (from %s: the variable pi read the key from; set it in Mother's environment)", f, spec.apiKeyEnv, from))
	case spec.keyCommand:
		p.unmapped = append(p.unmapped, fmt.Sprintf("%s.apiKey: a shell command (pi ran it for the key); Mother runs none: set %s.apiKeyEnv (or apiKey) by hand", field, f))
	}
	if len(spec.headers) > 0 {
		p.mapped = append(p.mapped, fmt.Sprintf("%s.headers: %s", f, strings.Join(slices.Sorted(maps.Keys(spec.headers)), ", ")))
	}
	for _, h := range spec.headersNotSet {
		p.unmapped = append(p.unmapped, fmt.Sprintf("%s.headers.%s: its value is an environment variable or a shell command, and Mother sends headers as written: set %s.headers.%s by hand", field, h, f, h))
	}
	return pe
}

// plannedEndpoint returns the endpoint the plan has by that name, or nil.
func (p *modelsPlan) plannedEndpoint(name string) *plannedEndpoint {
	for _, pe := range p.endpoints {
		if pe.name == name {
			return pe
		}
	}
	return nil
}

// window plans an old model's context window for the endpoint e, unless
// it has one for that model already.
func (p *modelsPlan) window(e *plannedEndpoint, m oldModelDef, from string, root map[string]any) {
	cw := int(m.ContextWindow)
	if cw <= 0 {
		return
	}
	if _, ok := e.windows[m.ID]; ok {
		return
	}
	if e.existing && getPath(root, "providers", "openai", e.name, "models", m.ID) != nil {
		return
	}
	e.windows[m.ID] = cw
	p.mapped = append(p.mapped, fmt.Sprintf("providers.openai.%s.models.%s.contextWindow = %d (from %s)", e.name, m.ID, cw, from))
}

// tierName makes a tier name of a model id (or an endpoint name of a
// provider's): letters, digits, '.', '_' and '-', starting with a letter
// or digit, at most 64 characters.
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

// tier plans one model as a tier and returns its name ("" when it has
// none).
func (p *modelsPlan) tier(field, from, provider string, m oldModelDef, root map[string]any) string {
	base := tierName(m.ID)
	if base == "" {
		p.unmapped = append(p.unmapped, fmt.Sprintf("%s: no tier name can be made of the id", field))
		return ""
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
			return name
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
	// What pi knew of the model helps Mother's model pick the tier.
	var notes []string
	if m.Reasoning {
		notes = append(notes, "a reasoning model: it thinks before it answers")
	}
	if slices.Contains(m.Input, "image") {
		notes = append(notes, "reads images")
	}
	notes = append(notes, "from the old models.json")
	tier := map[string]any{"provider": provider, "model": m.ID, "description": desc + " (" + strings.Join(notes, "; ") + ")"}
	price := ""
	if m.Cost != nil && (m.Cost.Input > 0 || m.Cost.Output > 0) {
		tier["price"] = map[string]any{"inputPerMTok": m.Cost.Input, "outputPerMTok": m.Cost.Output}
		price = fmt.Sprintf(", $%g/$%g per million tokens in/out", m.Cost.Input, m.Cost.Output)
	}
	out := ""
	if n := int(m.MaxTokens); n > 0 {
		tier["maxOutputTokens"] = n
		out = fmt.Sprintf(", at most %d output tokens", n)
	}
	p.tiers = append(p.tiers, plannedTier{name: name, from: from, tier: tier, provider: provider, model: m.ID})
	p.mapped = append(p.mapped, fmt.Sprintf("chicks.tiers.%s = %s/%s%s%s (from %s)", name, provider, m.ID, price, out, from))
	return name
}

// ownModel plans the old Mother's own model, when it is one of the models
// that have a tier: as model.provider and model.id unless config.json
// names a model already, and its tier as chicks.defaultTier when
// config.json has no default tier (neither chicks.defaultTier nor a
// "local" tier, the default's): the old Mother did all her work with it.
func (p *modelsPlan) ownModel(root map[string]any) {
	o := p.own
	if o.ID == "" {
		return
	}
	what := o.ID
	if o.Provider != "" {
		what = o.Provider + "/" + o.ID
	}
	var found *mappedModel
	for i, m := range p.models {
		if m.id == o.ID && (o.Provider == "" || m.oldProvider == o.Provider) {
			found = &p.models[i]
			break
		}
	}
	if found == nil {
		p.unmapped = append(p.unmapped, fmt.Sprintf("the old Mother's model %s (from %s): not one of the models mapped from the models files; model left as it is", what, o.From))
		return
	}
	haveProvider, haveID := getString(root, "model", "provider"), getString(root, "model", "id")
	switch {
	case haveProvider == found.provider && haveID == found.id:
		p.mapped = append(p.mapped, fmt.Sprintf("model: %s/%s already there (the old Mother's model %s)", found.provider, found.id, what))
	case haveProvider != "" || haveID != "":
		p.unmapped = append(p.unmapped, fmt.Sprintf("the old Mother's model %s (from %s): config.json names model %s/%s already; left as it is", what, o.From, orDefault(haveProvider), orDefault(haveID)))
	default:
		p.ownProvider = found.provider
		line := fmt.Sprintf("model.provider = %s, model.id = %s (the old Mother's model %s, from %s)", found.provider, found.id, what, o.From)
		if o.ProviderFromEnv && o.Provider != found.provider {
			line += fmt.Sprintf("; Mother reads MOTHER_MODEL_PROVIDER over config.json: remove it from her environment (%q is not a provider of hers)", o.Provider)
		}
		p.mapped = append(p.mapped, line)
	}
	if getPath(root, "chicks", "defaultTier") == nil && getPath(root, "chicks", "tiers", config.DefaultTier) == nil {
		p.ownTier = found.tier
		p.mapped = append(p.mapped, fmt.Sprintf("chicks.defaultTier = %s (the old Mother's model; config.json had no default tier)", found.tier))
	}
}

func orDefault(s string) string {
	if s == "" {
		return "(default)"
	}
	return s
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
	for _, e := range p.endpoints {
		if !e.existing {
			obj(obj(root, "providers"), "openai")[e.name] = specMap(e.spec)
			changed = true
		}
		for id, cw := range e.windows {
			ep := obj(obj(obj(root, "providers"), "openai"), e.name)
			obj(obj(ep, "models"), id)["contextWindow"] = cw
			changed = true
		}
	}
	for _, t := range p.tiers {
		obj(obj(root, "chicks"), "tiers")[t.name] = t.tier
		changed = true
	}
	if p.ownProvider != "" {
		m := obj(root, "model")
		m["provider"], m["id"] = p.ownProvider, p.own.ID
		changed = true
	}
	if p.ownTier != "" {
		obj(root, "chicks")["defaultTier"] = p.ownTier
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
