package migrate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	// The merged config names a Discord adapter; loading it needs the type.
	_ "github.com/mother-chat/mother/pkg/adapters/discord"
	"github.com/mother-chat/mother/pkg/config"
)

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

func modelsFixture(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	var out []string
	for _, f := range []string{"models.json", "models-broken.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, f)
		os.WriteFile(p, b, 0o600)
		out = append(out, p)
	}
	return out
}

func TestMigrateModelsIntoNewConfig(t *testing.T) {
	t.Parallel()
	old := copyFixture(t)
	files := modelsFixture(t)
	before := treeHash(t, filepath.Dir(files[0]))
	newDir := filepath.Join(t.TempDir(), "new")
	rep, err := Run(Options{OldDir: old, NewDir: newDir, Adapter: "discord-mybot", ModelsFiles: files})
	if err != nil {
		t.Fatal(err)
	}
	text := rep.String()
	t.Logf("report:\n%s", text)
	if after := treeHash(t, filepath.Dir(files[0])); after != before {
		t.Error("the models files changed")
	}
	if strings.Contains(text, "sk-ant-test") {
		t.Error("the report shows the Anthropic key")
	}
	for _, want := range []string{
		"mapped: providers.ollama.url = http://192.168.1.41:11434 (from " + files[0] + " (provider ollama))",
		"mapped: chicks.tiers.qwen3-30b-a3b = ollama/qwen3:30b-a3b",
		"mapped: chicks.tiers.qwen3-14b = ollama/qwen3:14b",
		"mapped: chicks.tiers.claude-sonnet-4-5 = anthropic/claude-sonnet-4-5",
		"mapped: providers.anthropic.baseURL = https://proxy.example.com/anthropic",
		"mapped: providers.anthropic.apiKey = (the key of",
		"not mapped: " + files[0] + ": providers.ollama.models[2]: no \"id\"",
		"mapped: providers.openai.openrouter.baseURL = https://openrouter.ai/api/v1 (from " + files[0] + " (provider openrouter))",
		"mapped: providers.openai.openrouter.apiKeyEnv = OPENROUTER_API_KEY",
		"mapped: chicks.tiers.deepseek-deepseek-chat = openai:openrouter/deepseek/deepseek-chat",
		"providers.gemini.models[0] (gemini-2.5-pro): api \"google-generative-ai\" is not one Mother speaks",
		"providers.other-ollama.headers: custom headers are not supported",
		"providers.other-ollama.models[0] (llama3.1:8b): its server http://10.0.0.9:11434 is a second Ollama server; Mother has one (http://192.168.1.41:11434",
		"not mapped: " + files[1] + ":3:3: not JSON",
		"config: written to " + filepath.Join(newDir, "config.json"),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	cfgPath := filepath.Join(newDir, "config.json")
	if info, err := os.Stat(cfgPath); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("config.json: %v (mode %v)", err, info.Mode())
	}
	// The new Mother loads it as is.
	cfg, err := config.Load(newDir, func(string) string { return "" })
	if err != nil {
		t.Fatalf("config.Load of the merged config: %v", err)
	}
	if cfg.Providers.Ollama.URL != "http://192.168.1.41:11434" || cfg.Providers.Anthropic.BaseURL != "https://proxy.example.com/anthropic" || cfg.Providers.Anthropic.APIKey.Value() != "sk-ant-test-not-a-real-key" {
		t.Errorf("providers = %+v", cfg.Providers)
	}
	sonnet := cfg.Chicks.Tiers["claude-sonnet-4-5"]
	if sonnet.Provider != "anthropic" || sonnet.Model != "claude-sonnet-4-5" || sonnet.Price == nil || sonnet.Price.InputPerMTok != 3 || sonnet.Price.OutputPerMTok != 15 || !strings.Contains(sonnet.Description, "Claude Sonnet 4.5") {
		t.Errorf("sonnet tier = %+v", sonnet)
	}
	if q := cfg.Chicks.Tiers["qwen3-30b-a3b"]; q.Provider != "ollama" || q.Model != "qwen3:30b-a3b" || q.Price != nil {
		t.Errorf("qwen tier = %+v", q)
	}
	if ds := cfg.Chicks.Tiers["deepseek-deepseek-chat"]; ds.Provider != "openai:openrouter" || ds.Model != "deepseek/deepseek-chat" || cfg.Providers.OpenAI["openrouter"].APIKeyEnv != "OPENROUTER_API_KEY" {
		t.Errorf("openrouter tier = %+v, endpoint = %+v", ds, cfg.Providers.OpenAI["openrouter"])
	}
	if _, ok := cfg.Chicks.Tiers["llama3.1-8b"]; ok {
		t.Error("a model of the second Ollama server became a tier")
	}
}

func TestMigrateModelsMergesExistingConfig(t *testing.T) {
	t.Parallel()
	files := modelsFixture(t)
	newDir := filepath.Join(t.TempDir(), "new")
	os.MkdirAll(newDir, 0o700)
	orig := `{"adapters": {"discord-mybot": {"type": "discord", "botToken": "test-token", "admins": ["111"]}},
  "providers": {"ollama": {"url": "http://192.168.1.41:11434/v1/"}},
  "chicks": {"tiers": {"qwen3-14b": {"provider": "ollama", "model": "something-else"}}, "maxConcurrent": 3}}
`
	cfgPath := filepath.Join(newDir, "config.json")
	os.WriteFile(cfgPath, []byte(orig), 0o600)
	old := copyFixture(t)
	rep, err := Run(Options{OldDir: old, NewDir: newDir, Adapter: "discord-mybot", ModelsFiles: files[:1]})
	if err != nil {
		t.Fatal(err)
	}
	text := rep.String()
	t.Logf("report:\n%s", text)
	if b, _ := os.ReadFile(cfgPath + ".before-migrate"); string(b) != orig {
		t.Errorf("previous config.json not kept: %q", b)
	}
	if strings.Contains(text, "mapped: providers.ollama.url") {
		t.Error("the URL config.json already names (written differently) was set again")
	}
	m := readJSON(t, cfgPath)
	tiers := m["chicks"].(map[string]any)["tiers"].(map[string]any)
	if tiers["qwen3-14b"].(map[string]any)["model"] != "something-else" {
		t.Errorf("an existing tier was replaced: %v", tiers["qwen3-14b"])
	}
	if tiers["qwen3-14b-2"].(map[string]any)["model"] != "qwen3:14b" {
		t.Errorf("tiers = %v", tiers)
	}
	if m["chicks"].(map[string]any)["maxConcurrent"] != float64(3) || m["adapters"].(map[string]any)["discord-mybot"] == nil {
		t.Errorf("other settings lost: %v", m)
	}
	if _, err := config.Load(newDir, func(string) string { return "" }); err != nil {
		t.Fatalf("config.Load of the merged config: %v", err)
	}

	// Again: nothing new, nothing written, no second backup.
	rep2, err := Run(Options{OldDir: old, NewDir: newDir, Adapter: "discord-mybot", ModelsFiles: files[:1]})
	if err != nil {
		t.Fatal(err)
	}
	if rep2.Models.Config != "" {
		t.Errorf("second run rewrote config.json:\n%s", rep2)
	}
	if !strings.Contains(rep2.String(), "chicks.tiers.qwen3-14b-2: ollama/qwen3:14b already there") {
		t.Errorf("second run report:\n%s", rep2)
	}
	if _, err := os.Stat(cfgPath + ".before-migrate.2"); err == nil {
		t.Error("a second backup was made without a change")
	}
}

func TestMigrateModelsOtherOllamaInConfig(t *testing.T) {
	t.Parallel()
	files := modelsFixture(t)
	newDir := filepath.Join(t.TempDir(), "new")
	os.MkdirAll(newDir, 0o700)
	os.WriteFile(filepath.Join(newDir, "config.json"), []byte(`{"providers": {"ollama": {"url": "http://127.0.0.1:11434"}}}`), 0o600)
	rep, err := Run(Options{OldDir: copyFixture(t), NewDir: newDir, Adapter: "d", ModelsFiles: files[:1]})
	if err != nil {
		t.Fatal(err)
	}
	text := rep.String()
	if !strings.Contains(text, "providers.ollama.models[0] (qwen3:30b-a3b): its server http://192.168.1.41:11434 is not the one config.json already names (providers.ollama.url http://127.0.0.1:11434)") {
		t.Errorf("report:\n%s", text)
	}
	// other-ollama is not the configured one either; the Anthropic tier
	// still maps.
	if !strings.Contains(text, "providers.other-ollama.models[0] (llama3.1:8b): its server http://10.0.0.9:11434 is not the one") ||
		!strings.Contains(text, "mapped: chicks.tiers.claude-sonnet-4-5") {
		t.Errorf("report:\n%s", text)
	}
}

func TestAnthropicKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		key, want string
		ok        bool
	}{
		{"ANTHROPIC_API_KEY", "from the environment variable ANTHROPIC_API_KEY", true},
		{"MY_CLAUDE_KEY", "apiKey names the environment variable MY_CLAUDE_KEY", false},
		{"!pass show claude", "apiKey is a shell command", false},
		{"", "no apiKey", false},
		{"sk-ant-literal", "providers.anthropic.apiKey = (the key of f (provider p))", true},
	} {
		p := &modelsPlan{}
		ok, why := p.anthropicKeyFor("field", "f (provider p)", tc.key, map[string]any{})
		got := why + strings.Join(p.mapped, "")
		if ok != tc.ok || !strings.Contains(got, tc.want) {
			t.Errorf("anthropicKeyFor(%q) = %v, %q; want %v, %q", tc.key, ok, got, tc.ok, tc.want)
		}
		if strings.Contains(got, "sk-ant-literal") {
			t.Errorf("the key is shown: %q", got)
		}
	}
	// A key config.json has already serves.
	p := &modelsPlan{}
	if ok, _ := p.anthropicKeyFor("f", "f", "", map[string]any{"providers": map[string]any{"anthropic": map[string]any{"apiKey": "k"}}}); !ok {
		t.Error("the key in config.json was not used")
	}
}

func TestTierName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"qwen3:30b-a3b":          "qwen3-30b-a3b",
		"deepseek/deepseek-chat": "deepseek-deepseek-chat",
		"-x":                     "x",
		"::":                     "",
		"llama3.1:8b":            "llama3.1-8b",
		strings.Repeat("a", 70):  strings.Repeat("a", 64),
	} {
		if got := tierName(in); got != want {
			t.Errorf("tierName(%q) = %q, want %q", in, got, want)
		}
	}
}

// openAIFixture copies testdata/models-openai.json into a temp dir.
func openAIFixture(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "models-openai.json"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMigrateOpenAICompatible: OpenAI-compatible providers become
// endpoints of providers.openai and their models tiers on them; the old
// Mother's model (her settings.json) becomes model and the default tier.
func TestMigrateOpenAICompatible(t *testing.T) {
	t.Parallel()
	old := copyFixture(t)
	os.WriteFile(filepath.Join(old, "settings.json"), []byte(`{"defaultProvider": "openrouter", "defaultModel": "moonshotai/kimi-k2", "compaction": {"enabled": true}}`), 0o644)
	file := openAIFixture(t)
	newDir := filepath.Join(t.TempDir(), "new")
	rep, err := Run(Options{OldDir: old, NewDir: newDir, Adapter: "discord-mybot", ModelsFiles: []string{file},
		Getenv: func(k string) string { return map[string]string{"MOTHER_MODEL_PROVIDER": "vllm"}[k] }})
	if err != nil {
		t.Fatal(err)
	}
	text := rep.String()
	t.Logf("report:\n%s", text)
	for _, secret := range []string{"lmstudio-literal-key-not-real", "pass show", "https://mother.example.org"} {
		if strings.Contains(text, secret) {
			t.Errorf("the report shows %q", secret)
		}
	}
	from := func(p string) string { return "(from " + file + " (provider " + p + ")" }
	for _, want := range []string{
		"mapped: providers.openai.openrouter.baseURL = https://openrouter.ai/api/v1 " + from("openrouter") + ")",
		"mapped: providers.openai.openrouter.apiKeyEnv = OPENROUTER_API_KEY " + from("openrouter") + ": the variable pi read the key from; set it in Mother's environment)",
		"mapped: providers.openai.openrouter.headers: HTTP-Referer, X-Title\n",
		"mapped: providers.openai.openrouter.models.moonshotai/kimi-k2.contextWindow = 131072",
		"mapped: providers.openai.openrouter.models.deepseek/deepseek-r1.contextWindow = 163840",
		"mapped: chicks.tiers.moonshotai-kimi-k2 = openai:openrouter/moonshotai/kimi-k2, $0.6/$2.5 per million tokens in/out, at most 16384 output tokens " + from("openrouter"),
		"mapped: chicks.tiers.deepseek-deepseek-r1 = openai:openrouter/deepseek/deepseek-r1, $0.4/$2 per million tokens in/out " + from("openrouter"),
		"mapped: providers.openai.vllm.baseURL = http://192.0.2.10:8000/v1 " + from("vllm") + ")",
		"mapped: providers.openai.vllm.models.Qwen/Qwen3-32B.contextWindow = 40960",
		"mapped: chicks.tiers.Qwen-Qwen3-32B = openai:vllm/Qwen/Qwen3-32B " + from("vllm"),
		"mapped: providers.openai.LM-Studio.baseURL = http://192.0.2.11:1234/v1 " + from("LM Studio") + "; baseUrl http://192.0.2.11:1234/: /v1 added",
		"mapped: providers.openai.LM-Studio.apiKey = (the key of " + file + " (provider LM Studio))",
		"mapped: providers.openai.proxy.baseURL = https://llm.example.com/openai " + from("proxy") + "; baseUrl https://llm.example.com/openai: kept as given",
		"not mapped: " + file + ": providers.proxy.apiKey: a shell command (pi ran it for the key); Mother runs none: set providers.openai.proxy.apiKeyEnv (or apiKey) by hand",
		"not mapped: " + file + ": providers.proxy.headers.X-Team: its value is an environment variable or a shell command",
		"not mapped: " + file + `: providers.azure.models[0] (gpt-5): api "openai-responses" at https://example.openai.azure.com/openai/v1 is OpenAI's Responses API`,
		"mapped: model.provider = openai:openrouter, model.id = moonshotai/kimi-k2 (the old Mother's model openrouter/moonshotai/kimi-k2, from " + filepath.Join(old, "settings.json") + ")\n",
		"mapped: chicks.defaultTier = moonshotai-kimi-k2 (the old Mother's model; config.json had no default tier)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(text, "could not map") || strings.Contains(text, "not mapped: "+file+": providers.openrouter") || strings.Contains(text, "not mapped: "+file+": providers.vllm") {
		t.Error("an OpenAI-compatible provider is reported as not mapped")
	}

	// The new Mother loads it as is; the variable's key is read at load.
	cfg, err := config.Load(newDir, func(k string) string {
		return map[string]string{"OPENROUTER_API_KEY": "sk-or-from-env"}[k]
	})
	if err != nil {
		t.Fatalf("config.Load of the merged config: %v", err)
	}
	or := cfg.Providers.OpenAI["openrouter"]
	if or.BaseURL != "https://openrouter.ai/api/v1" || or.APIKeyEnv != "OPENROUTER_API_KEY" || or.APIKey.Value() != "sk-or-from-env" ||
		or.Headers["HTTP-Referer"] != "https://mother.example.org" || or.Headers["X-Title"] != "Mother" ||
		or.Models["moonshotai/kimi-k2"].ContextWindow != 131072 || or.Models["deepseek/deepseek-r1"].ContextWindow != 163840 {
		t.Errorf("openrouter endpoint = %+v", or)
	}
	vllm := cfg.Providers.OpenAI["vllm"]
	if vllm.BaseURL != "http://192.0.2.10:8000/v1" || vllm.APIKey != "" || vllm.APIKeyEnv != "" || len(vllm.Headers) != 0 || vllm.Models["Qwen/Qwen3-32B"].ContextWindow != 40960 {
		t.Errorf("vllm endpoint = %+v", vllm)
	}
	lm := cfg.Providers.OpenAI["LM-Studio"]
	if lm.BaseURL != "http://192.0.2.11:1234/v1" || lm.APIKey.Value() != "lmstudio-literal-key-not-real" || lm.APIKeyEnv != "" || len(lm.Models) != 0 {
		t.Errorf("LM Studio endpoint = %+v", lm)
	}
	if px := cfg.Providers.OpenAI["proxy"]; px.BaseURL != "https://llm.example.com/openai" || px.APIKey != "" || px.APIKeyEnv != "" || len(px.Headers) != 0 {
		t.Errorf("proxy endpoint = %+v", px)
	}
	if _, ok := cfg.Providers.OpenAI["azure"]; ok {
		t.Error("the Responses API provider became an endpoint")
	}
	kimi := cfg.Chicks.Tiers["moonshotai-kimi-k2"]
	if kimi.Provider != "openai:openrouter" || kimi.Model != "moonshotai/kimi-k2" || kimi.Price == nil || kimi.Price.InputPerMTok != 0.6 || kimi.Price.OutputPerMTok != 2.5 ||
		kimi.MaxOutputTokens != 16384 || !strings.HasPrefix(kimi.Description, "Kimi K2 (") || strings.Contains(kimi.Description, "reasoning") {
		t.Errorf("kimi tier = %+v", kimi)
	}
	r1 := cfg.Chicks.Tiers["deepseek-deepseek-r1"]
	if r1.Provider != "openai:openrouter" || r1.Price == nil || r1.Price.InputPerMTok != 0.4 || r1.Price.OutputPerMTok != 2 ||
		r1.MaxOutputTokens != config.DefaultTierMaxOutputTokens || !strings.Contains(r1.Description, "DeepSeek R1 (a reasoning model") {
		t.Errorf("r1 tier = %+v", r1)
	}
	if q := cfg.Chicks.Tiers["Qwen-Qwen3-32B"]; q.Provider != "openai:vllm" || q.Model != "Qwen/Qwen3-32B" || q.Price != nil || !strings.HasPrefix(q.Description, "Qwen/Qwen3-32B (") {
		t.Errorf("vllm tier = %+v", q)
	}
	if c := cfg.Chicks.Tiers["qwen3-coder-30b"]; c.Provider != "openai:LM-Studio" || !strings.Contains(c.Description, "reads images") {
		t.Errorf("LM Studio tier = %+v", c)
	}
	if g := cfg.Chicks.Tiers["gpt-4.1-mini"]; g.Provider != "openai:proxy" {
		t.Errorf("proxy tier = %+v", g)
	}
	if cfg.Model.Provider != "openai:openrouter" || cfg.Model.ID != "moonshotai/kimi-k2" || cfg.Chicks.DefaultTier != "moonshotai-kimi-k2" {
		t.Errorf("model = %+v, default tier %q", cfg.Model, cfg.Chicks.DefaultTier)
	}
	// The literal key is in config.json (mode 0600), never elsewhere.
	m := readJSON(t, filepath.Join(newDir, "config.json"))
	if getString(m, "providers", "openai", "LM-Studio", "apiKey") != "lmstudio-literal-key-not-real" {
		t.Errorf("config.json providers.openai = %v", getPath(m, "providers", "openai"))
	}
}

// TestMigrateOpenAIIntoExistingConfig: an endpoint name config.json has
// for another server gets a suffix; config.json's default tier stays; the
// old Mother's model from the environment is set, with a word about the
// variable; a second run adds nothing.
func TestMigrateOpenAIIntoExistingConfig(t *testing.T) {
	t.Parallel()
	file := openAIFixture(t)
	newDir := filepath.Join(t.TempDir(), "new")
	os.MkdirAll(newDir, 0o700)
	cfgPath := filepath.Join(newDir, "config.json")
	os.WriteFile(cfgPath, []byte(`{"providers": {"openai": {"openrouter": {"baseURL": "http://192.0.2.99:8080/v1"}}},
  "chicks": {"defaultTier": "mine", "tiers": {"mine": {"provider": "openai:openrouter", "model": "local-model"}}}}`), 0o600)
	env := func(k string) string {
		return map[string]string{"MOTHER_MODEL_PROVIDER": "vllm", "MOTHER_MODEL_ID": "Qwen/Qwen3-32B"}[k]
	}
	old := copyFixture(t)
	rep, err := Run(Options{OldDir: old, NewDir: newDir, Adapter: "d", ModelsFiles: []string{file}, Getenv: env})
	if err != nil {
		t.Fatal(err)
	}
	text := rep.String()
	t.Logf("report:\n%s", text)
	for _, want := range []string{
		"mapped: providers.openai.openrouter-2.baseURL = https://openrouter.ai/api/v1",
		"mapped: chicks.tiers.moonshotai-kimi-k2 = openai:openrouter-2/moonshotai/kimi-k2",
		`mapped: model.provider = openai:vllm, model.id = Qwen/Qwen3-32B (the old Mother's model vllm/Qwen/Qwen3-32B, from MOTHER_MODEL_PROVIDER and MOTHER_MODEL_ID); Mother reads MOTHER_MODEL_PROVIDER over config.json: remove it from her environment ("vllm" is not a provider of hers)`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(text, "chicks.defaultTier") {
		t.Error("the default tier of config.json was touched")
	}
	cfg, err := config.Load(newDir, func(string) string { return "" })
	if err != nil {
		t.Fatalf("config.Load of the merged config: %v", err)
	}
	if cfg.Providers.OpenAI["openrouter"].BaseURL != "http://192.0.2.99:8080/v1" || cfg.Providers.OpenAI["openrouter-2"].BaseURL != "https://openrouter.ai/api/v1" {
		t.Errorf("endpoints = %+v", cfg.Providers.OpenAI)
	}
	if cfg.Chicks.DefaultTier != "mine" || cfg.Model.Provider != "openai:vllm" || cfg.Model.ID != "Qwen/Qwen3-32B" {
		t.Errorf("default tier %q, model %+v", cfg.Chicks.DefaultTier, cfg.Model)
	}

	// Again: nothing new, nothing written.
	rep2, err := Run(Options{OldDir: old, NewDir: newDir, Adapter: "d", ModelsFiles: []string{file}, Getenv: env})
	if err != nil {
		t.Fatal(err)
	}
	text2 := rep2.String()
	if rep2.Models.Config != "" {
		t.Errorf("second run rewrote config.json:\n%s", text2)
	}
	for _, want := range []string{
		"mapped: providers.openai.openrouter-2: https://openrouter.ai/api/v1 already there",
		"mapped: chicks.tiers.moonshotai-kimi-k2: openai:openrouter-2/moonshotai/kimi-k2 already there",
		"mapped: model: openai:vllm/Qwen/Qwen3-32B already there",
	} {
		if !strings.Contains(text2, want) {
			t.Errorf("second run report lacks %q:\n%s", want, text2)
		}
	}
	if strings.Contains(text2, "contextWindow =") {
		t.Errorf("second run planned a context window again:\n%s", text2)
	}

	// config.json naming another model keeps it.
	os.WriteFile(filepath.Join(old, "settings.json"), []byte(`{"defaultProvider": "openrouter", "defaultModel": "deepseek/deepseek-r1"}`), 0o644)
	rep3, err := Run(Options{OldDir: old, NewDir: newDir, Adapter: "d", ModelsFiles: []string{file}, Getenv: env})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep3.String(), "not mapped: the old Mother's model openrouter/deepseek/deepseek-r1 (from "+filepath.Join(old, "settings.json")+"): config.json names model openai:vllm/Qwen/Qwen3-32B already; left as it is") {
		t.Errorf("third run report:\n%s", rep3)
	}
}

func TestOpenAIURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want, note string }{
		{"http://192.0.2.10:8000/v1", "http://192.0.2.10:8000/v1", ""},
		{"http://192.0.2.10:8000/v1/", "http://192.0.2.10:8000/v1", ""},
		{"http://192.0.2.10:8080", "http://192.0.2.10:8080/v1", "/v1 added"},
		{"https://openrouter.ai/api", "https://openrouter.ai/api/v1", "OpenRouter's API is at /api/v1"},
		{"https://openrouter.ai", "https://openrouter.ai/api/v1", "OpenRouter's API is at /api/v1"},
		{"https://api.groq.com/openai/v1", "https://api.groq.com/openai/v1", ""},
		{"https://generativelanguage.googleapis.com/v1beta/openai/", "https://generativelanguage.googleapis.com/v1beta/openai", "kept as given"},
		{"https://user:hunter2@example.com", "https://user:hunter2@example.com/v1", "baseUrl https://user:xxxxx@example.com: /v1 added"},
	} {
		got, note, err := openAIURL(tc.in)
		if err != nil || got != tc.want || !strings.Contains(note, tc.note) || (tc.note == "") != (note == "") || strings.Contains(note, "hunter2") {
			t.Errorf("openAIURL(%q) = %q, %q, %v; want %q, %q", tc.in, got, note, err, tc.want, tc.note)
		}
	}
	for _, bad := range []string{"", "192.0.2.10:8000/v1", "ftp://x/v1"} {
		if _, _, err := openAIURL(bad); err == nil {
			t.Errorf("openAIURL(%q) accepted", bad)
		}
	}
}

func TestKeyRef(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, literal, env string
		command          bool
	}{
		{"OPENROUTER_API_KEY", "", "OPENROUTER_API_KEY", false},
		{"$OPENROUTER_API_KEY", "", "OPENROUTER_API_KEY", false},
		{"${OPENROUTER_API_KEY}", "", "OPENROUTER_API_KEY", false},
		{"sk-or-v1-abc", "sk-or-v1-abc", "", false},
		{"ollama", "ollama", "", false},
		{"!op read op://vault/key", "", "", true},
		{"", "", "", false},
	} {
		lit, env, cmd := keyRef(tc.in)
		if lit != tc.literal || env != tc.env || cmd != tc.command {
			t.Errorf("keyRef(%q) = %q, %q, %v", tc.in, lit, env, cmd)
		}
	}
}
