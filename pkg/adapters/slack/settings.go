package slack

import (
	"strings"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
)

// Settings are a Slack adapter's own fields in config.json, beside the
// shared ones (type, admins, dm, quiet, quietChannels).
type Settings struct {
	// BotToken is the bot user's OAuth token, xoxb-... (or set
	// SLACK_BOT_TOKEN).
	BotToken config.Secret `json:"botToken"`
	// AppToken is the app-level token, xapp-..., with connections:write,
	// for Socket Mode (or set SLACK_APP_TOKEN).
	AppToken config.Secret `json:"appToken"`
	// APIURL overrides Slack's API base URL (GovSlack, or a local fake in
	// tests). Empty: https://slack.com/api/.
	APIURL string `json:"apiURL"`
}

// Validate implements config.AdapterSettings.
func (s *Settings) Validate(bad func(field, format string, args ...any)) {
	if s.BotToken == "" {
		bad("botToken", "missing (or set SLACK_BOT_TOKEN)")
	} else if !strings.HasPrefix(s.BotToken.Value(), "xoxb-") {
		bad("botToken", "a Slack bot token starts with xoxb-")
	}
	if s.AppToken == "" {
		bad("appToken", "missing: Socket Mode needs an app-level token (or set SLACK_APP_TOKEN)")
	} else if !strings.HasPrefix(s.AppToken.Value(), "xapp-") {
		bad("appToken", "a Slack app-level token starts with xapp-")
	}
	if s.APIURL != "" && !config.IsHTTPURL(s.APIURL) {
		bad("apiURL", "must be an http(s) URL, got %q", s.APIURL)
	}
}

// Spec declares the "slack" type's configuration.
var Spec = config.AdapterSpec{
	NewSettings: func() config.AdapterSettings { return &Settings{} },
	Env: []config.EnvOverride{
		{Var: "SLACK_BOT_TOKEN", Field: "botToken", Set: func(s config.AdapterSettings, v string) { s.(*Settings).BotToken = config.Secret(v) }},
		{Var: "SLACK_APP_TOKEN", Field: "appToken", Set: func(s config.AdapterSettings, v string) { s.(*Settings).AppToken = config.Secret(v) }},
	},
	Fields: []config.FieldDoc{
		{Name: "botToken", Type: "secret", Env: "SLACK_BOT_TOKEN", Doc: "The bot user's OAuth token (xoxb-...). Required."},
		{Name: "appToken", Type: "secret", Env: "SLACK_APP_TOKEN", Doc: "The app-level token (xapp-...) with connections:write, for Socket Mode. Required."},
		{Name: "apiURL", Type: "http(s) URL", Default: DefaultAPIURL, Doc: "Overrides Slack's API base URL (GovSlack, or a local fake in tests)."},
	},
}

func init() {
	chat.Register("slack", chat.Type{
		Config: Spec,
		New: func(env chat.Env) (chat.Adapter, error) {
			return New(env, Options{})
		},
	})
}

// settingsOf returns the adapter's Slack settings (zero when absent).
func settingsOf(env chat.Env) Settings {
	if s, ok := env.Config.Settings.(*Settings); ok && s != nil {
		return *s
	}
	return Settings{}
}
