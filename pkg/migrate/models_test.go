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
		"providers.openrouter.models[0] (deepseek/deepseek-chat): api \"openai-completions\" at https://openrouter.ai/api/v1 is OpenAI's (not an Ollama server)",
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
