package mother

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/prompt"
)

// ownTools returns the harness Mother's write and edit tools.
func ownTools(h *harness) (write, edit agent.Tool) {
	ts := h.m.fileTools()
	return ts[0], ts[1]
}

// runCtx is the context of a run in channel rec/<channel> asked by user.
func runCtx(t *testing.T, h *harness, channel, user string) context.Context {
	t.Helper()
	ch, err := h.st.Channel("rec", channel)
	if err != nil {
		t.Fatal(err)
	}
	return chat.WithRunInfo(t.Context(), chat.RunInfo{Adapter: "rec", ChannelID: channel, UserID: user, ChannelDir: ch.Dir()})
}

func call(t *testing.T, tool agent.Tool, ctx context.Context, args map[string]any) (agent.Result, error) {
	t.Helper()
	raw, _ := json.Marshal(args)
	return tool.Run(ctx, raw)
}

// TestOwnFilesRefused: every path that is not Mother's, or not hers in
// this run, is refused with its reason, and nothing is written.
func TestOwnFilesRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := h.st.Workspace()
	write, edit := ownTools(h)
	cfgPath := filepath.Join(h.data, "config.json")
	if err := os.WriteFile(cfgPath, []byte(`{"operator":"only"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c1 := filepath.Join(ws, "channels/rec/C1")
	runCtx(t, h, "C2", "UMARIO") // creates C2
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(runDir(t, h, "C1"), "skills", "evil")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../C2/skills", filepath.Join(c1, "skills", "sneaky")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(c1, "skills", "hl"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(cfgPath, filepath.Join(c1, "skills", "hl", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", prompt.BudgetMotherMD+1)
	cases := []struct {
		name, tool, path, user, content, want string
	}{
		{"config.json", "write", "config.json", "UADMIN", "{}", "config.json is the operator's configuration"},
		{"config.json by absolute path", "write", cfgPath, "UADMIN", "{}", "config.json is the operator's configuration"},
		{"config.json with edit", "edit", cfgPath, "UADMIN", "", "config.json is the operator's configuration"},
		{"dot-dot", "write", "../config.json", "UADMIN", "{}", "`..` is not allowed"},
		{"dot-dot inside", "write", "channels/rec/C1/skills/../../C2/skills/x/SKILL.md", "UADMIN", "x", "`..` is not allowed"},
		{"the channel's log", "write", "channels/rec/C1/log.jsonl", "UADMIN", "{}", "log.jsonl is the channel's message log"},
		{"the context", "write", "channels/rec/C1/context.jsonl", "UADMIN", "{}", "your model context"},
		{"a daily log", "edit", "channels/rec/C1/daily/2025-01-01.md", "UADMIN", "", "daily logs"},
		{"another channel's skill", "write", "channels/rec/C2/skills/x/SKILL.md", "UADMIN", "x", "another channel's directory; this run (rec/C1) may write only channels/rec/C1/skills"},
		{"a symlink out of the workspace", "write", "channels/rec/C1/skills/evil/SKILL.md", "UMARIO", "x", "symbolic link leading outside the workspace"},
		{"a symlink into another channel", "write", "channels/rec/C1/skills/sneaky/x/SKILL.md", "UMARIO", "x", "channels/rec/C1/skills/sneaky is a symbolic link"},
		{"a hard link to config.json", "edit", "channels/rec/C1/skills/hl/SKILL.md", "UMARIO", "", "has other hard links"},
		{"outside the data directory", "write", "/etc/motd", "UADMIN", "x", "outside the data directory"},
		{"state beside the workspace", "write", filepath.Join(h.data, "state", "x"), "UADMIN", "x", "Mother's own state outside the workspace"},
		{"MOTHER.md by a non-admin", "write", "MOTHER.md", "UMARIO", "x", "MOTHER.md is the workspace's, shared by every channel: it is written only when an admin of rec asks, and the requester (UMARIO) is not one"},
		{"SYSTEM.md by a non-admin", "write", "SYSTEM.md", "UMARIO", "x", "requester (UMARIO) is not one"},
		{"a workspace skill by a non-admin", "write", "skills/w/SKILL.md", "UMARIO", "x", "a workspace skill is the workspace's"},
		{"SYSTEM.md from an event", "write", "SYSTEM.md", "", "x", "not started by a person"},
		{"MOTHER.md over budget", "write", "MOTHER.md", "UADMIN", big, "over its budget of 3000"},
		{"memory", "write", "channels/rec/C1/MEMORY.md", "UADMIN", "x", "update_memory"},
		{"events", "write", "events/x.json", "UADMIN", "{}", "schedule_event"},
		{"REFERENCE.md", "write", "REFERENCE.md", "UADMIN", "x", "regenerated from the configuration"},
		{"a hidden file", "write", "channels/rec/C1/skills/x/.hidden", "UADMIN", "x", "hidden files"},
		{"a bad skill name", "write", "channels/rec/C1/skills/a b/SKILL.md", "UADMIN", "x", "a skill's name is"},
		{"a skill without a file", "write", "skills/x", "UADMIN", "x", "name a file inside a skill"},
		{"over the file size", "write", "channels/rec/C1/skills/x/big.txt", "UMARIO", strings.Repeat("y", MaxOwnFileBytes+1), "over the 65536-byte limit"},
	}
	for _, c := range cases {
		ctx := runCtx(t, h, "C1", c.user)
		tool, args := write, map[string]any{"path": c.path, "content": c.content}
		if c.tool == "edit" {
			tool, args = edit, map[string]any{"path": c.path, "oldText": "only", "newText": "mine"}
		}
		_, err := call(t, tool, ctx, args)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Nothing was written") {
			t.Errorf("%s: %s(%q) = %v, want a refusal saying %q", c.name, c.tool, c.path, err, c.want)
		}
	}
	if b, _ := os.ReadFile(cfgPath); string(b) != `{"operator":"only"}` {
		t.Errorf("config.json changed: %s", b)
	}
	if es, _ := os.ReadDir(outside); len(es) != 0 {
		t.Errorf("written outside through a symlink: %v", es)
	}
	for _, p := range []string{"channels/rec/C2/skills/x", "skills/w", "events/x.json", "channels/rec/C1/skills/x", "config.json"} {
		if _, err := os.Stat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s exists after a refusal", p)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "MOTHER.md")); err == nil {
		t.Error("MOTHER.md written over budget or by a non-admin")
	}
	if b, _ := os.ReadFile(filepath.Join(c1, "log.jsonl")); strings.Contains(string(b), MetaFileWrite) {
		t.Errorf("a refused write was logged as a write: %s", b)
	}
}

// runDir is channel rec/<channel>'s directory, created.
func runDir(t *testing.T, h *harness, channel string) string {
	t.Helper()
	ch, err := h.st.Channel("rec", channel)
	if err != nil {
		t.Fatal(err)
	}
	return ch.Dir()
}

// TestOwnFilesWritten: what is Mother's is written, atomically (no temp
// file left, private mode), and each write is in the channel's log as a
// file write.
func TestOwnFilesWritten(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ws := h.st.Workspace()
	write, edit := ownTools(h)
	mario, admin := runCtx(t, h, "C1", "UMARIO"), runCtx(t, h, "C1", "UADMIN")
	skill := "channels/rec/C1/skills/weather/SKILL.md"
	steps := []struct {
		ctx  context.Context
		tool agent.Tool
		args map[string]any
		want string
	}{
		{mario, write, map[string]any{"path": skill, "content": "---\nname: weather\ndescription: the weather\n---\nRun curl.\n"}, "Created " + skill},
		{mario, edit, map[string]any{"path": skill, "oldText": "Run curl.", "newText": "Run curl wttr.in."}, "+Run curl wttr.in."},
		{mario, write, map[string]any{"path": filepath.Join(ws, "channels/rec/C1/skills/weather/run.sh"), "content": "curl wttr.in\n"}, "Created channels/rec/C1/skills/weather/run.sh"},
		{admin, write, map[string]any{"path": "MOTHER.md", "content": "# Guide\n"}, "Created MOTHER.md (8 of 3000 characters)"},
		{admin, write, map[string]any{"path": "SYSTEM.md", "content": "2025-12-14 installed jq"}, "Created SYSTEM.md"},
		{admin, write, map[string]any{"path": "SYSTEM.md", "content": "2025-12-15 rotated the key\n", "append": true}, "Appended to SYSTEM.md"},
		{admin, write, map[string]any{"path": "skills/deploy/SKILL.md", "content": "Deploy with make.\n"}, "Created skills/deploy/SKILL.md"},
	}
	for _, s := range steps {
		res, err := call(t, s.tool, s.ctx, s.args)
		if err != nil || !strings.Contains(res.Text, s.want) {
			t.Fatalf("%s(%v) = %q, %v; want %q", s.tool.Spec().Name, s.args["path"], res.Text, err, s.want)
		}
	}
	for p, want := range map[string]string{
		skill:                                   "---\nname: weather\ndescription: the weather\n---\nRun curl wttr.in.\n",
		"MOTHER.md":                             "# Guide\n",
		"SYSTEM.md":                             "2025-12-14 installed jq\n2025-12-15 rotated the key\n",
		"skills/deploy/SKILL.md":                "Deploy with make.\n",
		"channels/rec/C1/skills/weather/run.sh": "curl wttr.in\n",
	} {
		if got := readFile(t, filepath.Join(ws, p)); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
		if fi, _ := os.Stat(filepath.Join(ws, p)); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v", p, fi.Mode().Perm())
		}
	}
	for _, dir := range []string{"channels/rec/C1/skills/weather", "", "skills/deploy"} {
		names, _ := readDirNames(filepath.Join(ws, dir))
		for _, n := range names {
			if strings.Contains(n, ".tmp-") {
				t.Errorf("temp file left: %s/%s", dir, n)
			}
		}
	}
	if got := prompt.Skills(ws, filepath.Join(ws, "channels/rec/C1")); len(got) != 2 || got[1].Name != "weather" || got[1].Description != "the weather" || !got[1].Channel {
		t.Errorf("skills seen by the prompt = %+v", got)
	}
	var logged []string
	for _, m := range h.logged("C1") {
		fw, _ := m.Metadata[MetaFileWrite].(map[string]any)
		if fw == nil {
			continue
		}
		if m.Sender.ID != "UMOTHER" || !m.Sender.IsBot {
			t.Errorf("file write logged from %+v", m.Sender)
		}
		logged = append(logged, m.Text+" by "+fw["requestedBy"].(string))
	}
	want := []string{
		"[write] created " + skill + " (57 bytes) by UMARIO",
		"[edit] edited " + skill + " (65 bytes) by UMARIO",
		"[write] created channels/rec/C1/skills/weather/run.sh (13 bytes) by UMARIO",
		"[write] created MOTHER.md (8 bytes) by UADMIN",
		"[write] created SYSTEM.md (23 bytes) by UADMIN",
		"[write] appended to SYSTEM.md (51 bytes) by UADMIN",
		"[write] created skills/deploy/SKILL.md (18 bytes) by UADMIN",
	}
	if strings.Join(logged, "\n") != strings.Join(want, "\n") {
		t.Errorf("file writes in log.jsonl:\n%s\nwant:\n%s", strings.Join(logged, "\n"), strings.Join(want, "\n"))
	}
}

// TestOwnFileWriteInARun: the model writes a channel skill in a run; the
// write is logged, and the log record is not brought back into the next
// run's context (the tool call and result are there already).
func TestOwnFileWriteInARun(t *testing.T) {
	t.Parallel()
	skill := "channels/rec/C1/skills/greet/SKILL.md"
	h := newHarness(t, withScript(func(r ollamatest.Request) ollamatest.Turn {
		last := r.Messages[len(r.Messages)-1]
		switch {
		case last.Role == "tool":
			return ollamatest.Turn{Text: "tool said: " + last.Content}
		case strings.Contains(last.Content, "make a skill"):
			return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "write", Args: map[string]any{"path": skill, "content": "Say hello.\n"}}}}
		case strings.Contains(last.Content, "config"):
			return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "write", Args: map[string]any{"path": "config.json", "content": "{}"}}}}
		}
		return ollamatest.Turn{Text: "ok"}
	}))
	h.say("C1", "make a skill", false, dm)
	h.idle()
	h.say("C1", "change the config", false, dm)
	h.idle()
	if got := readFile(t, filepath.Join(h.st.Workspace(), skill)); got != "Say hello.\n" {
		t.Errorf("skill = %q", got)
	}
	finishes := texts(h.ad.of("finish"))
	if len(finishes) != 2 || !strings.Contains(finishes[0], "tool said: Created "+skill) ||
		!strings.Contains(finishes[1], "tool said: write: refused: config.json: config.json is the operator's configuration") {
		t.Errorf("answers = %q", finishes)
	}
	n := 0
	for _, m := range h.logged("C1") {
		if m.Metadata[MetaFileWrite] != nil {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d file writes logged, want 1", n)
	}
	reqs := h.fake.Requests()
	for _, msg := range reqs[len(reqs)-1].Messages {
		if strings.HasPrefix(msg.Content, "[write]") {
			t.Errorf("the log record of the write came back into the context: %+v", msg)
		}
	}
}
