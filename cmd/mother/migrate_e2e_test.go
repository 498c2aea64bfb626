package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/session"
)

// copyTreeForTest copies the directory from into a new temp directory.
func copyTreeForTest(t *testing.T, from string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(from))
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// fingerprint hashes every file's path, size, mtime and content.
func fingerprint(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		info, _ := os.Lstat(p)
		b, _ := os.ReadFile(p)
		lines = append(lines, fmt.Sprintf("%s %v %d %d %x", p, info.Mode(), info.Size(), info.ModTime().UnixNano(), sha256.Sum256(b)))
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestMigratedChannelContinues: a migrated fixture continues its
// conversation. `mother migrate` imports an old data directory whose
// terminal channel has a compacted context.jsonl; `mother --cli` on the
// result sends the model, in its first request, the old summary, the turns
// after it, the message logged after the old Mother's last run (once), and
// the new question, in that order.
func TestMigratedChannelContinues(t *testing.T) {
	t.Parallel()
	old := copyTreeForTest(t, "testdata/oldmother")
	before := fingerprint(t, old)
	data := filepath.Join(t.TempDir(), "data")

	r := runMother(t, "", nil, "migrate", filepath.Join(old), data, "--adapter", "cli", "--models", filepath.Join(old, "models.json"))
	if r.code != 0 {
		t.Fatalf("migrate: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("migrate report:\n%s", r.stdout)
	for _, want := range []string{
		"channel local: 5 messages",
		"context: the compaction summary carried; 2 recent message(s) carried; it holds the log up to message 1003 (matched by text); the 1 message(s) logged after it come in on the first run",
		"local/context.jsonl:9: not JSON",
		"mapped: chicks.tiers.qwen3-14b = ollama/qwen3:14b",
		// OpenAI's own API serves Chat Completions as well as Responses.
		"mapped: chicks.tiers.gpt-5 = openai:openai/gpt-5",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("migrate report lacks %q", want)
		}
	}

	fake := ollamatest.New(ollamatest.Turn{Text: "Staging is kiwi, and the billing page goes out on Friday."})
	defer fake.Close()
	r = runMother(t, "so what did we settle?\n", []string{"MOTHER_OLLAMA_URL=" + fake.URL, "MOTHER_MODEL_ID=tiny"}, "--cli", data)
	if r.code != 0 {
		t.Fatalf("mother --cli: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "billing page goes out on Friday") {
		t.Errorf("stdout = %q", r.stdout)
	}
	reqs := fake.Requests()
	if len(reqs) == 0 {
		t.Fatal("no model request")
	}
	var convo []string
	for _, m := range reqs[0].Messages {
		if m.Role != "system" {
			convo = append(convo, m.Role+": "+m.Content)
		}
	}
	joined := strings.Join(convo, "\n---\n")
	want := []struct{ role, has string }{
		{"user", session.SummaryPrefix + "- mario: the staging server is called kiwi\n- deploys happen on Fridays"},
		{"user", "[mario]: what should we deploy on Friday?"},
		{"assistant", "[used read: {\"path\":\"/workspace/plan.md\"}]\n[read result: Friday: billing page]\nThe new billing page."},
		{"user", "[luigi]: i will be on holiday next week"},
		{"user", "[mario]: so what did we settle?"},
	}
	if len(convo) != len(want) {
		t.Fatalf("first request has %d messages, want %d:\n%s", len(convo), len(want), joined)
	}
	for i, w := range want {
		if !strings.HasPrefix(convo[i], w.role+": ") || !strings.Contains(convo[i], w.has) {
			t.Errorf("message %d = %q, want a %s message containing %q", i, convo[i], w.role, w.has)
		}
	}
	// The turn before the compaction is known through the summary only.
	if strings.Contains(joined, "remember it") {
		t.Errorf("a compacted turn was carried verbatim:\n%s", joined)
	}
	if after := fingerprint(t, old); after != before {
		t.Error("the old directory changed")
	}
}

// openAIModelsJSON is an old models.json with OpenAI-compatible
// providers: OpenRouter (its key in a variable, its attribution headers),
// a vLLM server (192.0.2.10 is an address for documentation, never
// contacted) and one on the Responses API that does not map.
const openAIModelsJSON = `{
  "providers": {
    "openrouter": {
      "baseUrl": "https://openrouter.ai/api/v1",
      "api": "openai-completions",
      "apiKey": "OPENROUTER_API_KEY",
      "headers": {"HTTP-Referer": "https://mother.example.org", "X-Title": "Mother"},
      "models": [
        {"id": "moonshotai/kimi-k2", "name": "Kimi K2", "contextWindow": 131072, "maxTokens": 16384,
         "cost": {"input": 0.6, "output": 2.5, "cacheRead": 0.15, "cacheWrite": 0}},
        {"id": "deepseek/deepseek-r1", "name": "DeepSeek R1", "reasoning": true, "contextWindow": 163840,
         "cost": {"input": 0.4, "output": 2}}
      ]
    },
    "vllm": {
      "baseUrl": "http://192.0.2.10:8000/v1",
      "api": "openai-completions",
      "models": [{"id": "Qwen/Qwen3-32B", "contextWindow": 40960}]
    },
    "azure": {
      "baseUrl": "https://example.openai.azure.com/openai/v1",
      "api": "openai-responses",
      "apiKey": "sk-azure-literal-not-real",
      "models": [{"id": "gpt-5"}]
    }
  }
}
`

// TestMigrateOpenAICompatibleModels: the real mother migrate maps the
// OpenAI-compatible providers of an old models.json to providers.openai
// and their models to tiers, the old Mother's model (from her
// environment) to model, and mother --check-config accepts the result.
func TestMigrateOpenAICompatibleModels(t *testing.T) {
	t.Parallel()
	old := copyTreeForTest(t, "testdata/oldmother")
	models := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(models, []byte(openAIModelsJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	r := runMother(t, "", []string{"MOTHER_MODEL_PROVIDER=openrouter", "MOTHER_MODEL_ID=deepseek/deepseek-r1"},
		"migrate", old, data, "--adapter", "cli", "--models", models)
	if r.code != 0 {
		t.Fatalf("migrate: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("migrate report:\n%s", r.stdout)
	from := " (from " + models + " (provider "
	for _, want := range []string{
		"mapped: providers.openai.openrouter.baseURL = https://openrouter.ai/api/v1" + from + "openrouter))",
		"mapped: providers.openai.openrouter.apiKeyEnv = OPENROUTER_API_KEY",
		"mapped: providers.openai.openrouter.headers: HTTP-Referer, X-Title",
		"mapped: chicks.tiers.moonshotai-kimi-k2 = openai:openrouter/moonshotai/kimi-k2, $0.6/$2.5 per million tokens in/out, at most 16384 output tokens",
		"mapped: chicks.tiers.deepseek-deepseek-r1 = openai:openrouter/deepseek/deepseek-r1, $0.4/$2 per million tokens in/out",
		"mapped: providers.openai.vllm.baseURL = http://192.0.2.10:8000/v1" + from + "vllm))",
		"mapped: providers.openai.vllm.models.Qwen/Qwen3-32B.contextWindow = 40960",
		"mapped: chicks.tiers.Qwen-Qwen3-32B = openai:vllm/Qwen/Qwen3-32B",
		"mapped: model.provider = openai:openrouter, model.id = deepseek/deepseek-r1 (the old Mother's model openrouter/deepseek/deepseek-r1, from MOTHER_MODEL_PROVIDER and MOTHER_MODEL_ID); Mother reads MOTHER_MODEL_PROVIDER over config.json: remove it",
		"mapped: chicks.defaultTier = deepseek-deepseek-r1",
		"not mapped: " + models + `: providers.azure.models[0] (gpt-5): api "openai-responses" at https://example.openai.azure.com/openai/v1 is OpenAI's Responses API`,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("migrate report lacks %q", want)
		}
	}
	if strings.Contains(r.stdout, "sk-azure") || strings.Contains(r.stdout, "mother.example.org") {
		t.Error("the report shows a key or a header's value")
	}

	// The written config, as the file says it.
	b, err := os.ReadFile(filepath.Join(data, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Model     struct{ Provider, ID string }
		Providers struct {
			OpenAI map[string]struct {
				BaseURL, APIKey, APIKeyEnv string
				Headers                    map[string]string
				Models                     map[string]struct{ ContextWindow int }
			}
		}
		Chicks struct {
			DefaultTier string
			Tiers       map[string]struct {
				Provider, Model, Description string
				MaxOutputTokens              int
				Price                        *struct{ InputPerMTok, OutputPerMTok float64 }
			}
		}
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	or, vllm := cfg.Providers.OpenAI["openrouter"], cfg.Providers.OpenAI["vllm"]
	if or.BaseURL != "https://openrouter.ai/api/v1" || or.APIKey != "" || or.APIKeyEnv != "OPENROUTER_API_KEY" || or.Headers["X-Title"] != "Mother" ||
		or.Models["moonshotai/kimi-k2"].ContextWindow != 131072 || or.Models["deepseek/deepseek-r1"].ContextWindow != 163840 {
		t.Errorf("openrouter endpoint = %+v", or)
	}
	if vllm.BaseURL != "http://192.0.2.10:8000/v1" || vllm.APIKey != "" || vllm.APIKeyEnv != "" || vllm.Models["Qwen/Qwen3-32B"].ContextWindow != 40960 {
		t.Errorf("vllm endpoint = %+v", vllm)
	}
	r1 := cfg.Chicks.Tiers["deepseek-deepseek-r1"]
	if r1.Provider != "openai:openrouter" || r1.Model != "deepseek/deepseek-r1" || r1.Price == nil || r1.Price.InputPerMTok != 0.4 || r1.Price.OutputPerMTok != 2 || !strings.Contains(r1.Description, "reasoning") {
		t.Errorf("r1 tier = %+v", r1)
	}
	if k := cfg.Chicks.Tiers["moonshotai-kimi-k2"]; k.MaxOutputTokens != 16384 || k.Price == nil || k.Price.OutputPerMTok != 2.5 {
		t.Errorf("kimi tier = %+v", k)
	}
	if cfg.Model.Provider != "openai:openrouter" || cfg.Model.ID != "deepseek/deepseek-r1" || cfg.Chicks.DefaultTier != "deepseek-deepseek-r1" {
		t.Errorf("model = %+v, default tier %q", cfg.Model, cfg.Chicks.DefaultTier)
	}

	// Mother takes it as it is (without the old variables, as the report
	// says).
	r = runMother(t, "", []string{"OPENROUTER_API_KEY=sk-or-test-not-real"}, "--check-config", data)
	if r.code != 0 || !strings.Contains(r.stdout, "model openai:openrouter/deepseek/deepseek-r1") {
		t.Errorf("--check-config: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestDefaultModelsFiles(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	if got := defaultModelsFiles(env(map[string]string{"HOME": home})); len(got) != 0 {
		t.Errorf("with no files: %v", got)
	}
	for _, p := range []string{".pi/mother/models.json", ".pi/agent/models.json"} {
		os.MkdirAll(filepath.Dir(filepath.Join(home, p)), 0o700)
		os.WriteFile(filepath.Join(home, p), []byte("{}"), 0o600)
	}
	got := defaultModelsFiles(env(map[string]string{"HOME": home}))
	if want := []string{filepath.Join(home, ".pi/mother/models.json"), filepath.Join(home, ".pi/agent/models.json")}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("defaults = %v, want %v", got, want)
	}
	// MOTHER_MODELS_JSON replaces the old Mother's default, even when the
	// file is missing (the report then says so).
	got = defaultModelsFiles(env(map[string]string{"HOME": home, "MOTHER_MODELS_JSON": "/nowhere/models.json"}))
	if want := []string{"/nowhere/models.json", filepath.Join(home, ".pi/agent/models.json")}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("with MOTHER_MODELS_JSON = %v, want %v", got, want)
	}
}

// TestMigrateModelsFlags: --no-models reads none (no config.json is
// written); --models with a missing file is reported, not fatal.
func TestMigrateModelsFlags(t *testing.T) {
	t.Parallel()
	old := copyTreeForTest(t, "testdata/oldmother")
	data := filepath.Join(t.TempDir(), "data")
	r := runMother(t, "", []string{"MOTHER_MODELS_JSON=" + filepath.Join(old, "models.json")}, "migrate", "--no-models", old, data, "--adapter", "cli")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(data, "config.json")); err == nil || strings.Contains(r.stdout, "models files") {
		t.Errorf("--no-models read a models file:\n%s", r.stdout)
	}
	data2 := filepath.Join(t.TempDir(), "data")
	r = runMother(t, "", nil, "migrate", old, data2, "--adapter", "cli", "--models", filepath.Join(old, "missing.json"))
	if r.code != 0 || !strings.Contains(r.stdout, "not mapped: "+filepath.Join(old, "missing.json")+": open ") {
		t.Errorf("exit %d, report:\n%s", r.code, r.stdout)
	}
	if r := runMother(t, "", nil, "migrate", old, data2, "--adapter", "cli", "--models", "x", "--no-models"); r.code != 2 {
		t.Errorf("--models with --no-models: exit %d", r.code)
	}
}
