package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/model/anthropic/anthropictest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// TestTerminalMotherReadsWorkspace: at start Mother scaffolds MOTHER.md and
// writes REFERENCE.md; her model gets the full prompt and the read tool
// (never bash, write, edit or attach), reads REFERENCE.md through it, is refused another channel's files,
// and answers.
func TestTerminalMotherReadsWorkspace(t *testing.T) {
	t.Parallel()
	fake := ollamatest.New(
		ollamatest.Turn{Calls: []ollamatest.Call{{Name: "read", Args: map[string]any{"label": "Reading the reference", "path": "REFERENCE.md", "limit": 3}}}},
		ollamatest.Turn{Calls: []ollamatest.Call{{Name: "read", Args: map[string]any{"label": "Peeking", "path": "channels/cli/other/log.jsonl"}}}},
		ollamatest.Turn{Text: "The reference is there."},
	)
	defer fake.Close()
	data := t.TempDir()
	other := filepath.Join(data, "workspace/channels/cli/other")
	os.MkdirAll(other, 0o700)
	os.WriteFile(filepath.Join(other, "log.jsonl"), []byte(`{"text":"private"}`+"\n"), 0o600)

	r := runMother(t, "what is in the reference?\n", []string{"MOTHER_OLLAMA_URL=" + fake.URL, "MOTHER_MODEL_ID=tiny"}, "--cli", data)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "The reference is there.") {
		t.Errorf("stdout = %q", r.stdout)
	}
	for _, f := range []string{"MOTHER.md", "MEMORY.md", "SYSTEM.md", "REFERENCE.md"} {
		if _, err := os.Stat(filepath.Join(data, "workspace", f)); err != nil {
			t.Errorf("%s not created: %v", f, err)
		}
	}
	reqs := fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model calls", len(reqs))
	}
	sys := reqs[0].System()
	for _, want := range []string{"You are Mother", "## Workspace guide (MOTHER.md)\n# Workspace guide", "## Events", "channels/cli/local/"} {
		if !strings.Contains(sys, want) {
			t.Errorf("system prompt lacks %q", want)
		}
	}
	var names []string
	for _, raw := range reqs[0].Tools {
		var tl struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		json.Unmarshal(raw, &tl)
		names = append(names, tl.Function.Name)
	}
	joined := "," + strings.Join(names, ",") + ","
	if !strings.Contains(joined, ",read,") {
		t.Errorf("Mother's tools = %v, want read among them", names)
	}
	for _, unsafe := range []string{"bash", "attach"} {
		if strings.Contains(joined, ","+unsafe+",") {
			t.Errorf("Mother has the %s tool: %v", unsafe, names)
		}
	}
	// write and edit are hers, confined to her own files (TestTerminalOwnFiles).
	for _, own := range []string{"write", "edit"} {
		if !strings.Contains(joined, ","+own+",") {
			t.Errorf("Mother lacks her %s tool: %v", own, names)
		}
	}
	first := reqs[1].Messages[len(reqs[1].Messages)-1]
	if first.Role != "tool" || !strings.Contains(first.Content, "REFERENCE.md") || !strings.Contains(first.Content, "continue at offset 4") {
		t.Errorf("read result = %+v", first)
	}
	second := reqs[2].Messages[len(reqs[2].Messages)-1]
	if !strings.Contains(second.Content, "another channel's directory") || strings.Contains(second.Content, "private") {
		t.Errorf("read of another channel = %+v", second)
	}
}

// TestTerminalOnAnthropic: Mother's own model can be Claude, configured in
// config.json, reached over the wire.
func TestTerminalOnAnthropic(t *testing.T) {
	t.Parallel()
	fake := anthropictest.New(anthropictest.Turn{Text: "Hello from Claude."})
	defer fake.Close()
	data := t.TempDir()
	cfg := `{"model":{"provider":"anthropic","id":"claude-test"},"providers":{"anthropic":{"apiKey":"` + anthropictest.APIKey + `","baseURL":"` + fake.URL + `"}}}`
	os.WriteFile(filepath.Join(data, "config.json"), []byte(cfg), 0o600)
	r := runMother(t, "hi\n", nil, "--cli", data)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if strings.TrimSpace(r.stdout) != "Hello from Claude." {
		t.Errorf("stdout = %q", r.stdout)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 || reqs[0].Model != "claude-test" || !strings.Contains(reqs[0].SystemText(), "You are Mother") {
		t.Errorf("requests = %+v", reqs)
	}
}
