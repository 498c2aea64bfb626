package telegram

import (
	"net"
	"strings"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
)

// DefaultAPIURL is Telegram's own Bot API server.
const DefaultAPIURL = "https://api.telegram.org"

// Settings are a Telegram adapter's own fields in config.json, beside the
// shared ones (type, admins, dm, quiet, quietChannels).
type Settings struct {
	// BotToken is the token BotFather gave the bot, "123456:ABC-..." (or
	// set TELEGRAM_BOT_TOKEN).
	BotToken config.Secret `json:"botToken"`
	// APIURL overrides the Bot API server (a self-hosted telegram-bot-api,
	// or a local fake in tests). Empty: DefaultAPIURL.
	APIURL string `json:"apiURL"`
	// WebhookURL, when set, receives updates by webhook instead of long
	// polling: the public https URL Telegram posts updates to. The adapter
	// registers it with setWebhook and listens on WebhookListen.
	WebhookURL string `json:"webhookURL"`
	// WebhookListen is the local address the webhook listener binds
	// ("127.0.0.1:8443", behind a TLS-terminating proxy). Required with
	// WebhookURL.
	WebhookListen string `json:"webhookListen"`
	// WebhookSecret is the secret Telegram sends in the
	// X-Telegram-Bot-Api-Secret-Token header; requests without it are
	// refused (or set TELEGRAM_WEBHOOK_SECRET). Required with WebhookURL.
	WebhookSecret config.Secret `json:"webhookSecret"`
}

// Validate implements config.AdapterSettings.
func (s *Settings) Validate(bad func(field, format string, args ...any)) {
	switch tok := s.BotToken.Value(); {
	case tok == "":
		bad("botToken", "missing (or set TELEGRAM_BOT_TOKEN)")
	case !validToken(tok):
		bad("botToken", "a Telegram bot token looks like 123456789:AA... (the bot id, a colon, the secret)")
	}
	if s.APIURL != "" && !config.IsHTTPURL(s.APIURL) {
		bad("apiURL", "must be an http(s) URL, got %q", s.APIURL)
	}
	if s.WebhookURL == "" {
		if s.WebhookListen != "" {
			bad("webhookListen", "set without webhookURL (the public URL Telegram posts to)")
		}
		return
	}
	if !config.IsHTTPURL(s.WebhookURL) {
		bad("webhookURL", "must be an http(s) URL, got %q", s.WebhookURL)
	}
	if s.WebhookListen == "" {
		bad("webhookListen", "missing: the local address the webhook listens on, such as 127.0.0.1:8443")
	} else if _, _, err := net.SplitHostPort(s.WebhookListen); err != nil {
		bad("webhookListen", "want host:port, got %q", s.WebhookListen)
	}
	switch sec := s.WebhookSecret.Value(); {
	case sec == "":
		bad("webhookSecret", "missing: a webhook needs a secret token (or set TELEGRAM_WEBHOOK_SECRET)")
	case len(sec) > 256 || strings.Trim(sec, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != "":
		bad("webhookSecret", "1 to 256 characters from A-Z a-z 0-9 _ -")
	}
}

// validToken checks a token's shape: digits, a colon, a secret.
func validToken(tok string) bool {
	id, secret, ok := strings.Cut(tok, ":")
	if !ok || id == "" || secret == "" || strings.Trim(id, "0123456789") != "" {
		return false
	}
	return !strings.ContainsAny(secret, " /\t\n")
}

// Spec declares the "telegram" type's configuration.
var Spec = config.AdapterSpec{
	NewSettings: func() config.AdapterSettings { return &Settings{} },
	Env: []config.EnvOverride{
		{Var: "TELEGRAM_BOT_TOKEN", Field: "botToken", Set: func(s config.AdapterSettings, v string) { s.(*Settings).BotToken = config.Secret(v) }},
		{Var: "TELEGRAM_WEBHOOK_SECRET", Field: "webhookSecret", Set: func(s config.AdapterSettings, v string) { s.(*Settings).WebhookSecret = config.Secret(v) }},
	},
	Fields: []config.FieldDoc{
		{Name: "botToken", Type: "secret", Env: "TELEGRAM_BOT_TOKEN", Doc: "The bot's token from BotFather (123456789:AA...). Required."},
		{Name: "apiURL", Type: "http(s) URL", Default: DefaultAPIURL, Doc: "Overrides the Bot API server (a self-hosted telegram-bot-api, or a local fake in tests)."},
		{Name: "webhookURL", Type: "http(s) URL", Doc: "Receive updates by webhook at this public URL instead of long polling. Empty: long polling."},
		{Name: "webhookListen", Type: "host:port", Doc: "The local address the webhook listener binds (behind a TLS proxy). Required with webhookURL."},
		{Name: "webhookSecret", Type: "secret", Env: "TELEGRAM_WEBHOOK_SECRET", Doc: "The secret Telegram sends in X-Telegram-Bot-Api-Secret-Token; other requests are refused. Required with webhookURL."},
	},
}

func init() {
	chat.Register("telegram", chat.Type{
		Config: Spec,
		New: func(env chat.Env) (chat.Adapter, error) {
			return New(env, Options{})
		},
	})
}

// settingsOf returns the adapter's Telegram settings (zero when absent).
func settingsOf(env chat.Env) Settings {
	if s, ok := env.Config.Settings.(*Settings); ok && s != nil {
		return *s
	}
	return Settings{}
}
