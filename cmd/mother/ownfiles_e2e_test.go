package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/mother"
)

// TestTerminalOwnFiles: through the real binary, Mother's model writes a
// channel skill (it lands on disk and in the channel's log, and the next
// run's prompt lists it), the operator at the terminal (an admin) has her
// update MOTHER.md, and a write to config.json is refused with its reason,
// config.json untouched. The prompt and REFERENCE.md state the configured
// event queue size, not a fixed one.
func TestTerminalOwnFiles(t *testing.T) {
	t.Parallel()
	skill := "channels/cli/local/skills/weather/SKILL.md"
	fake := ollamatest.New(
		ollamatest.Turn{Calls: []ollamatest.Call{{Name: "write", Args: map[string]any{"label": "saving the skill", "path": skill,
			"content": "---\nname: weather\ndescription: Forecast for a city from wttr.in\n---\ncurl wttr.in/<city>\n"}}}},
		ollamatest.Turn{Text: "Skill saved."},
		ollamatest.Turn{Calls: []ollamatest.Call{{Name: "edit", Args: map[string]any{"path": "MOTHER.md", "oldText": "## People\n", "newText": "## People\n- @mario: runs the deploys\n"}}}},
		ollamatest.Turn{Text: "Guide updated."},
		ollamatest.Turn{Calls: []ollamatest.Call{{Name: "write", Args: map[string]any{"path": "config.json", "content": `{"adapters":{}}`}}}},
		ollamatest.Turn{Text: "I may not."},
	)
	defer fake.Close()
	data := t.TempDir()
	cfgText := `{"events":{"maxQueuedPerChannel":13}}`
	cfgPath := filepath.Join(data, "config.json")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runMother(t, "save a weather skill\nnote in the guide that I run the deploys\nchange your config\n", []string{"MOTHER_OLLAMA_URL=" + fake.URL}, "--cli", data)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if got, want := r.stdout, "→ saving the skill\nSkill saved.\n→ edit\nGuide updated.\n→ write\n"+
		"✗ write: write: refused: config.json: config.json is the operator's configuration (adapters, tokens, access control); only the operator changes it, on the host. Nothing was written.\n"+
		"I may not.\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	reqs := fake.Requests()
	if len(reqs) != 6 {
		t.Fatalf("%d model calls, want 6", len(reqs))
	}

	// The skill is on disk, in the log as a file write, and in the next
	// run's prompt.
	b, err := os.ReadFile(filepath.Join(data, "workspace", skill))
	if err != nil || !strings.Contains(string(b), "curl wttr.in/<city>") {
		t.Errorf("skill = %q, %v", b, err)
	}
	if got := toolResult(reqs[1]); !strings.HasPrefix(got, "Created "+skill) {
		t.Errorf("write result = %q", got)
	}
	var writes []string
	for _, m := range readLog(t, data) {
		if fw, ok := m.Metadata[mother.MetaFileWrite].(map[string]any); ok {
			writes = append(writes, m.Text+" path="+fw["path"].(string)+" by="+fw["requestedBy"].(string))
		}
	}
	want := []string{
		"[write] created " + skill + " (88 bytes) path=" + skill + " by=local-user",
		"[edit] edited MOTHER.md (",
	}
	if len(writes) != 2 || writes[0] != want[0] || !strings.HasPrefix(writes[1], want[1]) {
		t.Errorf("file writes in log.jsonl = %q, want %q", writes, want)
	}
	if sys := reqs[2].System(); !strings.Contains(sys, "- weather: Forecast for a city from wttr.in") {
		t.Errorf("the next run's prompt does not list the new skill:\n%s", sys)
	}

	// The operator at the terminal is an admin: MOTHER.md was edited.
	if b, _ := os.ReadFile(filepath.Join(data, "workspace/MOTHER.md")); !strings.Contains(string(b), "- @mario: runs the deploys\n") {
		t.Errorf("MOTHER.md = %q", b)
	}
	if sys := reqs[4].System(); !strings.Contains(sys, "- @mario: runs the deploys") {
		t.Errorf("the edited guide is not in the next prompt")
	}

	// config.json is refused, with the reason, and left as it was.
	if got := toolResult(reqs[5]); !strings.Contains(got, "refused: config.json: config.json is the operator's configuration") || !strings.Contains(got, "Nothing was written") {
		t.Errorf("config.json write result = %q", got)
	}
	if b, _ := os.ReadFile(cfgPath); string(b) != cfgText {
		t.Errorf("config.json = %q, want it untouched", b)
	}

	// The configured number, not a fixed one.
	if sys := reqs[0].System(); !strings.Contains(sys, "At most 13 queue per channel; more wait their turn.") {
		t.Errorf("prompt does not state events.maxQueuedPerChannel:\n%s", sys)
	}
	ref, _ := os.ReadFile(filepath.Join(data, "workspace/REFERENCE.md"))
	if !strings.Contains(string(ref), "at most 13 queue per channel") || strings.Contains(string(ref), "dropped") {
		t.Errorf("REFERENCE.md does not state the configured event queue:\n%s", ref)
	}
}
