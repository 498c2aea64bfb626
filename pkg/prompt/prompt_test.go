package prompt

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
)

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// worstCase fills every injected part past its budget: long memory files,
// many users, channels, skills and files.
func worstCase(t *testing.T) Input {
	t.Helper()
	ws := t.TempDir()
	ch := filepath.Join(ws, "channels", "slack-acme", "C0A34FL8PMH")
	writeFile(t, filepath.Join(ws, "MOTHER.md"), strings.Repeat("Guide line with some words in it.\n", 200))
	writeFile(t, filepath.Join(ws, "MEMORY.md"), strings.Repeat("global fact ", 400))
	writeFile(t, filepath.Join(ch, "MEMORY.md"), strings.Repeat("channel fact ", 400))
	writeFile(t, filepath.Join(ws, "channels", "slack-acme", "OTHER", "secret.txt"), "not for this channel")
	for i := range 30 {
		writeFile(t, filepath.Join(ws, "skills", fmt.Sprintf("skill-%02d", i), "SKILL.md"), fmt.Sprintf("---\nname: skill-%02d\ndescription: does thing number %d with a fairly long description\n---\n", i, i))
		writeFile(t, filepath.Join(ch, "scratch", fmt.Sprintf("file-%02d.txt", i)), "x")
		writeFile(t, filepath.Join(ch, "attachments", fmt.Sprintf("photo-%02d.jpg", i)), "x")
	}
	var users []chat.UserInfo
	var chans []chat.ChannelInfo
	for i := range 200 {
		users = append(users, chat.UserInfo{ID: fmt.Sprintf("U%05d", i), Username: fmt.Sprintf("user%03d", i), DisplayName: fmt.Sprintf("User Number %d", i)})
		chans = append(chans, chat.ChannelInfo{ID: fmt.Sprintf("C%05d", i), Name: fmt.Sprintf("channel-%03d", i)})
	}
	var tools []HostTool
	for i := range 60 {
		tools = append(tools, HostTool{
			Name:        fmt.Sprintf("server%02d.tool", i),
			Description: strings.Repeat("A host tool with a long description. ", 20),
			Params: []HostToolParam{
				{Name: "query", Type: "string", Required: true, Description: strings.Repeat("what to look for ", 10)},
				{Name: "limit", Type: "integer", Description: "at most this many"},
			},
		})
	}
	loc, _ := time.LoadLocation("Europe/Vienna")
	return Input{Workspace: ws, ChannelDir: ch, Channel: "slack-acme/C0A34FL8PMH", Users: users, Channels: chans,
		Now: time.Date(2025, 12, 14, 9, 30, 0, 0, loc), Location: loc, HostTools: tools}
}

// TestSectionBudgets prints the size of every part and checks each stays
// within its budget and the whole within mother-design.md 1.8's total.
func TestSectionBudgets(t *testing.T) {
	for _, fl := range []Flavour{Mother, Chick} {
		name := map[Flavour]string{Mother: "mother", Chick: "chick"}[fl]
		t.Run(name, func(t *testing.T) {
			in := worstCase(t)
			in.Flavour = fl
			secs := Sections(in)
			static := 0
			t.Logf("%-30s %6s %6s", "section ("+name+")", "chars", "budget")
			for _, s := range secs {
				n := utf8.RuneCountInString(strings.TrimSpace(s.Body))
				head := 0
				if s.Title != "" {
					head = len("## \n") + utf8.RuneCountInString(s.Title)
				}
				static += head
				title := s.Title
				if title == "" {
					title = "(identity)"
				}
				if s.Budget == 0 {
					static += n
					t.Logf("%-30s %6d %6s", title, n, "static")
					continue
				}
				t.Logf("%-30s %6d %6d%s", title, n, s.Budget, map[bool]string{true: " (cut)"}[s.Truncated])
				if n > s.Budget {
					t.Errorf("%s: %d characters, budget %d", title, n, s.Budget)
				}
			}
			total := utf8.RuneCountInString(Render(secs))
			t.Logf("%-30s %6d %6d", "static rules and headings", static, BudgetStatic)
			t.Logf("%-30s %6d %6d (~%d tokens)", "total injected", total, BudgetTotal, total/4)
			if static > BudgetStatic {
				t.Errorf("static rules and headings: %d characters, budget %d", static, BudgetStatic)
			}
			if total > BudgetTotal {
				t.Errorf("total: %d characters, budget %d", total, BudgetTotal)
			}
		})
	}
}

func TestPromptContents(t *testing.T) {
	in := worstCase(t)
	p := Build(in)
	for _, want := range []string{
		"You are Mother", "@username", "[SILENT]",
		"Sunday 2025-12-14 09:30 +01:00 (time zone Europe/Vienna)", "Channel: slack-acme/C0A34FL8PMH",
		"Users: @user000 (User Number 0)", "more users",
		"channels/slack-acme/C0A34FL8PMH/ with MEMORY.md",
		"## Workspace guide (MOTHER.md)\nGuide line", "[... truncated at the 3000 character budget",
		"[... truncated at the 1500 character budget", "[... truncated at the 1000 character budget",
		"- skill-00: does thing number 0", "more in skills/",
		`{"type":"one-shot","channelId":"slack-acme/C0A34FL8PMH"`, `"timezone":"Europe/Vienna"`, "[EVENT:file:type:schedule]",
		"channels/slack-acme/C0A34FL8PMH/: MEMORY.md attachments/", "(+",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("prompt lacks %q", want)
		}
	}
	if strings.Contains(p, "OTHER/") || strings.Contains(p, "secret.txt") {
		t.Error("the file tree shows another channel")
	}
	in.Flavour = Chick
	c := Build(in)
	for _, want := range []string{"You are a chick", "/workspace is this channel's directory", "/workspace/: MEMORY.md attachments/", "skill-00"} {
		if !strings.Contains(c, want) {
			t.Errorf("chick prompt lacks %q", want)
		}
	}
	if strings.Contains(c, "## Events") || strings.Contains(c, "spawn_chick") {
		t.Error("the chick prompt has Mother's parts")
	}
}

func TestEmptyWorkspacePrompt(t *testing.T) {
	ws := t.TempDir()
	p := Build(Input{Workspace: ws, ChannelDir: filepath.Join(ws, "channels", "cli", "local"), Channel: "cli/local", Now: time.Unix(0, 0)})
	if strings.Contains(p, "## Skills") || strings.Contains(p, "## Users") || strings.Contains(p, "MOTHER.md)\n") {
		t.Errorf("empty parts rendered:\n%s", p)
	}
}

func TestSkillsChannelOverridesWorkspace(t *testing.T) {
	ws := t.TempDir()
	ch := filepath.Join(ws, "channels", "a", "b")
	writeFile(t, filepath.Join(ws, "skills", "deploy", "SKILL.md"), "---\nname: deploy\ndescription: shared deploy\n---\n")
	writeFile(t, filepath.Join(ch, "skills", "deploy", "SKILL.md"), "# Deploy this channel's app\nsteps")
	writeFile(t, filepath.Join(ws, "skills", "notes", "SKILL.md"), "\n\n## Take notes\n")
	writeFile(t, filepath.Join(ws, "skills", "broken", "README"), "no SKILL.md")
	got := Skills(ws, ch)
	want := []Skill{
		{Name: "deploy", Description: "Deploy this channel's app", Path: "channels/a/b/skills/deploy/SKILL.md", Channel: true},
		{Name: "notes", Description: "Take notes", Path: "skills/notes/SKILL.md"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Skills = %+v\nwant %+v", got, want)
	}
}

func TestCap(t *testing.T) {
	s, cut := Cap(strings.Repeat("é", 5000), 3000)
	if !cut || utf8.RuneCountInString(s) > 3000 || !strings.HasSuffix(s, "not shown]") || !utf8.ValidString(s) {
		t.Errorf("Cap = %d runes, cut %v", utf8.RuneCountInString(s), cut)
	}
	if s, cut := Cap("short", 3000); s != "short" || cut {
		t.Errorf("Cap(short) = %q %v", s, cut)
	}
}

func TestScaffoldAndReference(t *testing.T) {
	ws := t.TempDir()
	created, err := Scaffold(ws)
	if err != nil || fmt.Sprint(created) != "[MEMORY.md MOTHER.md SYSTEM.md]" {
		t.Fatalf("Scaffold = %v, %v", created, err)
	}
	os.WriteFile(filepath.Join(ws, "MOTHER.md"), []byte("mine"), 0o600)
	if created, err := Scaffold(ws); err != nil || len(created) != 0 {
		t.Errorf("second Scaffold = %v, %v", created, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "MOTHER.md")); string(b) != "mine" {
		t.Error("Scaffold overwrote MOTHER.md")
	}
	if len(motherTemplate) > BudgetMotherMD {
		t.Errorf("the MOTHER.md template is %d characters, over its budget", len(motherTemplate))
	}
	os.WriteFile(filepath.Join(ws, "REFERENCE.md"), []byte("stale"), 0o600)
	loc, _ := time.LoadLocation("America/New_York")
	if err := WriteReference(ws, loc, Limits{}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(ws, "REFERENCE.md"))
	for _, want := range []string{ReferenceHeader, "## Events", "America/New_York", `"type": "periodic"`, "## Skills", "daily/", "[SILENT]"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("REFERENCE.md lacks %q", want)
		}
	}
	p := Build(Input{Workspace: ws, ChannelDir: filepath.Join(ws, "c"), Now: time.Unix(0, 0)})
	if strings.Contains(p, "Searching the past") {
		t.Error("REFERENCE.md is injected")
	}
}

// TestConfiguredNumbers: the queue sizes and budgets the prompt and
// REFERENCE.md state are the configuration's, not fixed text: changing a
// number in config changes what the model reads.
func TestConfiguredNumbers(t *testing.T) {
	cfg := &config.Config{}
	cfg.SetDefaults(t.TempDir())
	def := LimitsFrom(cfg)
	cfg.Events.MaxQueuedPerChannel = 17
	cfg.Dispatch.QueueSize = 9
	cfg.Chicks.MaxConcurrent, cfg.Chicks.MaxPerChannel, cfg.Chicks.QueueSize = 11, 4, 33
	cfg.Budgets.ChickTokens, cfg.Budgets.ChannelDailyTokens = 750000, 5000000
	cfg.Budgets.TierDailyTokens = map[string]config.Tokens{"local": 123456}
	cfg.Chicks.Timeout = config.Dur(45 * time.Minute)
	cfg.Chicks.MaxTurns = 77
	lim := LimitsFrom(cfg)

	ws := t.TempDir()
	in := Input{Workspace: ws, ChannelDir: filepath.Join(ws, "channels", "cli", "local"), Channel: "cli/local", Now: time.Unix(0, 0)}
	in.Limits = def
	if p := Build(in); !strings.Contains(p, "At most 5 queue per channel; more wait their turn.") {
		t.Errorf("default prompt lacks the default event queue:\n%s", p)
	}
	in.Limits = lim
	p := Build(in)
	if !strings.Contains(p, "At most 17 queue per channel; more wait their turn.") || strings.Contains(p, "At most 5 ") {
		t.Errorf("prompt does not state events.maxQueuedPerChannel 17:\n%s", p)
	}
	if !strings.Contains(p, "MOTHER.md (3000 characters)") {
		t.Errorf("prompt does not state MOTHER.md's budget:\n%s", p)
	}

	ref := Reference(time.UTC, lim)
	for _, want := range []string{
		"at most 9 more wait", "at most 17 queue per channel; more wait their turn", "at most 17 events queue per channel; more wait",
		"at most 11 run at once, 4 per channel; up to 33 more wait", "A chick runs for at most\n  45m and 77 model turns. Token budgets: one chick 750,000 tokens; a channel's chicks\n  per day 5,000,000 tokens.", "Per tier per day, all channels: local 123,456 tokens.",
		"MOTHER.md: the workspace guide, injected into every prompt (3000 characters)", "(1500 characters)", "(1000 characters)",
		"A file holds at most 64 KB", "write and append=true",
	} {
		if !strings.Contains(ref, want) {
			t.Errorf("REFERENCE.md lacks %q", want)
		}
	}
	for _, lie := range []string{"dropped", "grep -i", "jq -r", "${"} {
		if strings.Contains(ref, lie) {
			t.Errorf("REFERENCE.md says %q", lie)
		}
	}
	if d := Reference(time.UTC, def); !strings.Contains(d, "at most 5 more wait") || !strings.Contains(d, "one chick 2,000,000 tokens; a channel's chicks\n  per day no cap") {
		t.Errorf("default REFERENCE.md does not state the defaults")
	}
}
