package main

import (
	"crypto/sha256"
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
		"not mapped: " + filepath.Join(old, "models.json") + `: providers.openai.models[0] (gpt-5): api "openai-responses" at https://api.openai.com/v1 is OpenAI's`,
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
