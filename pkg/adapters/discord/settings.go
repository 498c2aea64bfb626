package discord

import (
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
)

// Settings are a Discord adapter's own fields in config.json, beside the
// shared ones (type, admins, dm, quiet, quietChannels).
type Settings struct {
	// BotToken is the bot's token (or set DISCORD_BOT_TOKEN).
	BotToken config.Secret `json:"botToken"`
	// GuildID limits the adapter to one guild (server); empty: every guild
	// the bot is in (or set DISCORD_GUILD_ID).
	GuildID string `json:"guildId"`
	// APIURL overrides Discord's API base URL (a REST proxy, or a local
	// fake in tests). Empty: Discord's own.
	APIURL string `json:"apiURL"`
}

// Validate implements config.AdapterSettings.
func (s *Settings) Validate(bad func(field, format string, args ...any)) {
	if s.BotToken == "" {
		bad("botToken", "missing (or set DISCORD_BOT_TOKEN)")
	}
	if s.APIURL != "" && !config.IsHTTPURL(s.APIURL) {
		bad("apiURL", "must be an http(s) URL, got %q", s.APIURL)
	}
}

// Spec declares the "discord" type's configuration.
var Spec = config.AdapterSpec{
	NewSettings: func() config.AdapterSettings { return &Settings{} },
	Env: []config.EnvOverride{
		{Var: "DISCORD_BOT_TOKEN", Field: "botToken", Set: func(s config.AdapterSettings, v string) { s.(*Settings).BotToken = config.Secret(v) }},
		{Var: "DISCORD_GUILD_ID", Field: "guildId", Set: func(s config.AdapterSettings, v string) { s.(*Settings).GuildID = v }},
	},
	Fields: []config.FieldDoc{
		{Name: "botToken", Type: "secret", Env: "DISCORD_BOT_TOKEN", Doc: "The bot's token (Developer Portal, Bot, Reset Token). Required."},
		{Name: "guildId", Type: "string", Env: "DISCORD_GUILD_ID", Doc: "Limits the adapter to one guild (server). Empty: every guild the bot is in."},
		{Name: "apiURL", Type: "http(s) URL", Doc: "Overrides Discord's API base URL (a REST proxy, or a local fake in tests). Empty: Discord's own."},
	},
}

func init() {
	chat.Register("discord", chat.Type{
		Config: Spec,
		New: func(env chat.Env) (chat.Adapter, error) {
			return New(env, Options{})
		},
	})
}

// settingsOf returns the adapter's Discord settings (zero when absent).
func settingsOf(env chat.Env) Settings {
	if s, ok := env.Config.Settings.(*Settings); ok && s != nil {
		return *s
	}
	return Settings{}
}
