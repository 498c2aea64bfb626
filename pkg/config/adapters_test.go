package config_test

// These tests read configurations with the real adapter types registered,
// as cmd/mother has them. Importing the adapter packages here (an external
// test package) registers them for every test of this package's binary,
// the in-package ones included.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mother-chat/mother/internal/testenv"
	"github.com/mother-chat/mother/pkg/adapters/cli"
	"github.com/mother-chat/mother/pkg/adapters/discord"
	"github.com/mother-chat/mother/pkg/adapters/slack"
	"github.com/mother-chat/mother/pkg/adapters/telegram"
	_ "github.com/mother-chat/mother/pkg/adapters/whatsapp" // registers "whatsapp"
	"github.com/mother-chat/mother/pkg/config"
)

var _ = cli.ChannelID // the "cli" type is registered by importing cli

func loadConfig(t *testing.T, body string, env map[string]string) (*config.Config, error) {
	t.Helper()
	dir := t.TempDir()
	if body != "" {
		if err := os.WriteFile(filepath.Join(dir, config.File), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return config.Load(dir, func(k string) string { return env[k] })
}

func TestEnvOverrides(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DISCORD_BOT_TOKEN":     "discord-token",
		"DISCORD_GUILD_ID":      "42",
		"SLACK_BOT_TOKEN":       "xoxb-1",
		"SLACK_APP_TOKEN":       "xapp-1",
		"TELEGRAM_BOT_TOKEN":    "123:telegram-token",
		"MOTHER_MODEL_PROVIDER": "ollama",
		"MOTHER_MODEL_ID":       "glm-4.7-flash",
		"MOTHER_OLLAMA_URL":     "http://127.0.0.1:11434/v1",
		"MOTHER_CHICK_MODEL":    "qwen3:32b",
		"MOTHER_CHICK_IMAGE":    "registry.local/chick:1",
	}
	cfg, err := loadConfig(t, `{"adapters": {"discord-mybot": {"type": "discord", "botToken": "old", "admins": ["7"]}}}`, env)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	d := cfg.Adapters["discord-mybot"]
	ds, _ := d.Settings.(*discord.Settings)
	if ds == nil || ds.BotToken.Value() != "discord-token" || ds.GuildID != "42" || len(d.Admins) != 1 {
		t.Errorf("discord adapter = %+v, want the env token and guild on the configured adapter", d)
	}
	if _, extra := cfg.Adapters["discord"]; extra {
		t.Error("env created a second discord adapter")
	}
	s, ok := cfg.Adapters["slack"]
	ss, _ := s.Settings.(*slack.Settings)
	if !ok || s.Type != "slack" || ss == nil || ss.BotToken.Value() != "xoxb-1" || ss.AppToken.Value() != "xapp-1" {
		t.Errorf("slack adapter from env = %+v (present %v)", s, ok)
	}
	tg, ok := cfg.Adapters["telegram"]
	ts, _ := tg.Settings.(*telegram.Settings)
	if !ok || tg.Type != "telegram" || ts == nil || ts.BotToken.Value() != "123:telegram-token" {
		t.Errorf("telegram adapter from env = %+v (present %v)", tg, ok)
	}
	if cfg.Model.ID != "glm-4.7-flash" || cfg.Chicks.Image != "registry.local/chick:1" {
		t.Errorf("model %q image %q", cfg.Model.ID, cfg.Chicks.Image)
	}
	if got := cfg.Chicks.Tiers[config.DefaultTier].Model; got != "qwen3:32b" {
		t.Errorf("default tier model = %q, want MOTHER_CHICK_MODEL", got)
	}
	if cfg.Providers.Ollama.URL != "http://127.0.0.1:11434/v1" {
		t.Errorf("ollama url = %q (the /v1 is stripped by the provider)", cfg.Providers.Ollama.URL)
	}
}

func TestAdapterSettingsFields(t *testing.T) {
	t.Parallel()
	const secret = "xoxb-123-super-secret"
	tests := []struct {
		name, body, want string
	}{
		{"misspelt slack field", `{"adapters": {"slack-acme": {"type": "slack", "botTken": "` + secret + `", "appToken": "xapp-1"}}}`, "adapters.slack-acme.botTken: unknown field"},
		{"field of another platform", `{"adapters": {"d": {"type": "discord", "botToken": "x", "appToken": "xapp-1"}}}`, "adapters.d.appToken: unknown field"},
		{"terminal has no settings", `{"adapters": {"t": {"type": "cli", "botToken": "` + secret + `"}}}`, "adapters.t.botToken: unknown field"},
		{"wrong type in settings", `{"adapters": {"d": {"type": "discord", "botToken": 5}}}`, "adapters.d.botToken: must be a string, not JSON number"},
		{"slack bot token prefix", `{"adapters": {"s": {"type": "slack", "botToken": "xoxp-1", "appToken": "xapp-1"}}}`, "adapters.s.botToken: a Slack bot token starts with xoxb-"},
		{"slack without app token", `{"adapters": {"s": {"type": "slack", "botToken": "` + secret + `"}}}`, "adapters.s.appToken: missing: Socket Mode needs an app-level token (or set SLACK_APP_TOKEN)"},
		{"telegram token shape", `{"adapters": {"tg": {"type": "telegram", "botToken": "` + secret + `"}}}`, "adapters.tg.botToken: a Telegram bot token looks like"},
		{"telegram webhook without secret", `{"adapters": {"tg": {"type": "telegram", "botToken": "1:x", "webhookURL": "https://bot.example/hook", "webhookListen": "127.0.0.1:8443"}}}`, "adapters.tg.webhookSecret: missing"},
		{"missing type lists the registered ones", `{"adapters": {"x": {}}}`, `adapters.x.type: missing ("cli", "discord", "slack", "telegram" or "whatsapp")`},
		{"whatsapp device name on two lines", `{"adapters": {"wa": {"type": "whatsapp", "deviceName": "a\nb"}}}`, "adapters.wa.deviceName: 1 to 50 characters on one line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadConfig(t, tt.body, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load(%s) = %v, want an error containing %q", tt.body, err, tt.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error contains the token: %v", err)
			}
		})
	}
}

func TestAdapterEnvCreatesAdapterWithSettings(t *testing.T) {
	t.Parallel()
	cfg, err := loadConfig(t, "", map[string]string{"DISCORD_BOT_TOKEN": "tok", "DISCORD_GUILD_ID": "9"})
	if err != nil {
		t.Fatal(err)
	}
	d, ok := cfg.Adapters["discord"]
	ds, _ := d.Settings.(*discord.Settings)
	if !ok || d.Type != "discord" || ds == nil || ds.BotToken.Value() != "tok" || ds.GuildID != "9" {
		t.Errorf("adapter from env = %+v (present %v), want type discord with the token and guild", d, ok)
	}
}

func TestAdapterRoundTrip(t *testing.T) {
	t.Parallel()
	cfg, err := loadConfig(t, `{"adapters": {"s": {"type": "slack", "botToken": "xoxb-1", "appToken": "xapp-1", "apiURL": "http://127.0.0.1:1/api/", "admins": ["U1"]}}}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cfg.Adapters["s"].MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{`"type":"slack"`, `"admins":["U1"]`, `"apiURL":"http://127.0.0.1:1/api/"`, `"botToken":"[redacted]"`} {
		if !strings.Contains(got, want) {
			t.Errorf("MarshalJSON = %s, want it to contain %s", got, want)
		}
	}
	if strings.Contains(got, "xoxb-1") || strings.Contains(got, "xapp-1") {
		t.Errorf("MarshalJSON = %s: it holds a token", got)
	}
}

// TestAdapterDocsListEveryField: each registered type documents every
// field of its settings, and nothing else.
func TestAdapterDocsListEveryField(t *testing.T) {
	t.Parallel()
	docs := config.AdapterDocs()
	if len(docs) != 5 {
		t.Fatalf("AdapterDocs() has %d types, want cli, discord, slack, telegram and whatsapp", len(docs))
	}
	for _, d := range docs {
		spec, _ := config.LookupAdapter(d.Type)
		if missing := config.UndocumentedFields(spec); len(missing) > 0 {
			t.Errorf("adapter type %q: fields not documented: %v", d.Type, missing)
		}
		for _, f := range d.Fields {
			if f.Doc == "" || f.Type == "" {
				t.Errorf("adapter type %q: field %q has no doc or type", d.Type, f.Name)
			}
		}
	}
}

// TestConfigKnowsNoPlatform: adapters depend on config, never the reverse.
func TestConfigKnowsNoPlatform(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "github.com/mother-chat/mother/pkg/config").Output()
	if err != nil {
		testenv.Unavailable(t, "go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/mother-chat/mother/pkg/adapters") || p == "github.com/mother-chat/mother/pkg/chat" {
			t.Errorf("pkg/config depends on %s; adapters register with config, not the reverse", p)
		}
	}
}
