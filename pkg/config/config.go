// Package config loads and validates <data>/config.json, applies the
// environment overrides the operator of today's Mother uses, and fills
// defaults. Every field is documented here and in docs/configuration.md.
//
// A chat adapter's own fields (tokens, API URL, ...) are not declared here:
// each adapter package registers its settings type, validation,
// environment overrides and field docs with RegisterAdapter (through
// chat.Register), and config decodes and checks them without knowing any
// platform. config imports no adapter and not pkg/chat.
//
// Errors name the field ("adapters.slack-acme.dm: ...") and never contain a
// token's value.
package config

import (
	"encoding/json"
	"fmt"
)

// Config is the whole of config.json.
type Config struct {
	// Adapters maps an adapter name ("slack-acme", "discord-mybot") to its
	// platform settings. The name is used in channel paths and qualified
	// channel ids. Empty: no chat platform (terminal mode still works).
	Adapters map[string]Adapter `json:"adapters"`
	// Model is Mother's own model (chat and routing).
	Model Model `json:"model"`
	// Providers holds how to reach each model provider; keys stay on
	// Mother's host.
	Providers Providers `json:"providers"`
	// Chicks configures the disposable workers.
	Chicks Chicks `json:"chicks"`
	// GRPC is where chicks reach Mother.
	GRPC GRPC `json:"grpc"`
	// Admin is momctl's unix socket.
	Admin Admin `json:"admin"`
	// Budgets are hard token and money caps.
	Budgets Budgets `json:"budgets"`
	// Prices are what model calls cost, in US dollars per million
	// tokens, keyed "<provider>/<model>" ("anthropic/claude-sonnet-4-5")
	// or "<provider>/*" for every model of a provider (a local server's
	// electricity). Anthropic's models have list prices by default
	// (DefaultPrices); any other model costs nothing unless priced here.
	Prices map[string]Price `json:"prices"`
	// Events tunes the scheduled-events watcher.
	Events Events `json:"events"`
	// Context tunes the model context management.
	Context Context `json:"context"`
	// Dispatch tunes per-channel queues.
	Dispatch Dispatch `json:"dispatch"`
	// MCPServers are host-side tool servers (Model Context Protocol).
	MCPServers map[string]MCPServer `json:"mcpServers"`
	// Log configures Mother's own log output.
	Log Log `json:"log"`
	// Metrics is the Prometheus listener.
	Metrics Metrics `json:"metrics"`
	// Recall is the search over the channels' history (recall.go).
	Recall Recall `json:"recall"`
	// Roles says who may do what (roles.go).
	Roles Roles `json:"roles"`
	// Speech is the speech server voice messages are heard through
	// (speech.go).
	Speech Speech `json:"speech"`

	// renamed are the old field names config.json used (Renamed).
	renamed []RenamedField
}

// Model names a provider and a model id.
type Model struct {
	// Provider is "ollama" or "anthropic".
	Provider string `json:"provider"`
	// ID is the provider's model id.
	ID string `json:"id"`
	// MaxParallel caps Mother's own model calls in flight at once (across
	// channels); further runs wait for a slot. 0 means the default.
	MaxParallel int `json:"maxParallel"`
	// Think is whether Mother's model thinks before it answers: "auto"
	// (the model's own default), "on" or "off" (default: off; routing a
	// message needs no long thought, and a small model's thinking is most
	// of its time). docs/agent.md says more.
	Think string `json:"think"`
	// Fallbacks answer in turn when the provider is down, overloaded or
	// silent (see Providers.Cooldown).
	Fallbacks []Fallback `json:"fallbacks"`
	// MaxOutputTokens caps one answer of Mother's model: the output limit
	// sent to the provider and what the broker reserves for the answer
	// against her budgets before the call.
	MaxOutputTokens int `json:"maxOutputTokens"`
}

// Providers holds provider endpoints and keys.
type Providers struct {
	Ollama    Ollama    `json:"ollama"`
	Anthropic Anthropic `json:"anthropic"`
	// OpenAI are OpenAI-compatible chat-completions endpoints by name
	// (vLLM, llama.cpp's llama-server, LM Studio, SGLang, OpenRouter,
	// OpenAI). A model or tier names one as "openai:<name>", or as
	// "openai" when there is only one.
	OpenAI map[string]OpenAI `json:"openai"`
	// Cooldown is how long a provider that failed FailuresBeforeCooldown
	// calls in a row is skipped for its fallbacks (default 1m).
	Cooldown Duration `json:"cooldown"`
	// FailuresBeforeCooldown (default 2).
	FailuresBeforeCooldown int `json:"failuresBeforeCooldown"`
	// FirstTokenTimeout is how long a call that has a fallback waits for
	// its first token before it goes to the fallback (default 2m: a model
	// being loaded onto the card takes a while).
	FirstTokenTimeout Duration `json:"firstTokenTimeout"`
}

// OpenAI is one OpenAI-compatible endpoint.
type OpenAI struct {
	// BaseURL is the API base, with its /v1 ("http://gpu:8000/v1").
	BaseURL string `json:"baseURL"`
	// APIKey is the bearer key, if the server wants one.
	APIKey Secret `json:"apiKey"`
	// APIKeyEnv names an environment variable holding the key (read
	// when apiKey is empty), so the key can stay in the service's
	// environment file.
	APIKeyEnv string `json:"apiKeyEnv"`
	// Headers are sent with every request (OpenRouter's HTTP-Referer and
	// X-Title).
	Headers map[string]string `json:"headers"`
	// ContextWindow is the window for models the server does not report
	// and Models does not set (0: ask /v1/models, else 32768).
	ContextWindow int `json:"contextWindow"`
	// Models holds per-model settings.
	Models map[string]OpenAIModel `json:"models"`
}

// OpenAIModel is one model's settings on an OpenAI-compatible endpoint.
type OpenAIModel struct {
	// ContextWindow in tokens (0: what the server reports).
	ContextWindow int `json:"contextWindow"`
	// Options are extra fields of every request for this model
	// ("temperature", "top_p", vLLM's "chat_template_kwargs"...).
	Options map[string]any `json:"options"`
}

// Fallback is a model that answers when the one before it cannot.
type Fallback struct {
	// Provider is "ollama", "anthropic" or "openai:<name>".
	Provider string `json:"provider"`
	// Model is the provider's model id.
	Model string `json:"model"`
}

// Ollama is an Ollama server.
type Ollama struct {
	// URL is the server's base URL; a trailing "/v1" is accepted and
	// ignored.
	URL string `json:"url"`
}

// Anthropic is the Anthropic API.
type Anthropic struct {
	// APIKey is the API key (or set ANTHROPIC_API_KEY).
	APIKey Secret `json:"apiKey"`
	// BaseURL overrides the API endpoint.
	BaseURL string `json:"baseURL"`
}

// GRPC is Mother's listener for chicks.
type GRPC struct {
	// Listen is the address Mother listens on.
	Listen string `json:"listen"`
	// Advertise is the address chicks are told to dial.
	Advertise string `json:"advertise"`
}

// Admin is the momctl socket.
type Admin struct {
	// Socket is the unix socket path; relative paths are under the data
	// directory.
	Socket string `json:"socket"`
}

// Budgets are hard caps. Zero means unlimited. Token caps count chicks'
// tokens; money caps count chicks' spend and, at channel and user scope,
// Mother's own too. Mother's own calls have caps of their own (Mother).
type Budgets struct {
	// ChickTokens caps the tokens of one chick.
	ChickTokens Tokens `json:"chickTokens"`
	// ChannelDailyTokens caps chick tokens per channel per day.
	ChannelDailyTokens Tokens `json:"channelDailyTokens"`
	// TierDailyTokens caps tokens per tier per day across all channels.
	TierDailyTokens map[string]Tokens `json:"tierDailyTokens"`
	// UserDailyTokens caps chick tokens per requester per day across
	// channels (0: no cap); chicks of events count against no user.
	UserDailyTokens Tokens `json:"userDailyTokens"`
	// ChickUSD caps what one chick may spend.
	ChickUSD USD `json:"chickUSD"`
	// ChannelDailyUSD caps what a channel may spend per day: its chicks'
	// calls and Mother's own runs there together.
	ChannelDailyUSD USD `json:"channelDailyUSD"`
	// TierDailyUSD caps what each tier's chicks may spend per day.
	TierDailyUSD map[string]USD `json:"tierDailyUSD"`
	// UserDailyUSD caps what one person may spend per day: the chicks
	// they asked for and Mother's runs on their messages.
	UserDailyUSD USD `json:"userDailyUSD"`
	// Mother caps Mother's own model calls.
	Mother MotherBudgets `json:"mother"`
}

// MotherBudgets cap Mother's own model calls: her runs (answers, events,
// her answers to chicks' results), their compaction, every retry and
// fallback. Zero means no cap.
type MotherBudgets struct {
	// DailyUSD caps what her own calls spend per day, everywhere.
	DailyUSD USD `json:"dailyUSD"`
	// ChannelDailyUSD caps what her own calls spend per channel per day.
	ChannelDailyUSD USD `json:"channelDailyUSD"`
	// EventDailyUSD caps what the runs of one scheduled event spend per
	// day; a periodic event that reaches it is paused until the next day
	// (default 1; "unlimited": no cap).
	EventDailyUSD USD `json:"eventDailyUSD"`
	// DailyTokens, ChannelDailyTokens and EventDailyTokens are the same
	// caps in tokens (for a model that costs nothing).
	DailyTokens        Tokens `json:"dailyTokens"`
	ChannelDailyTokens Tokens `json:"channelDailyTokens"`
	EventDailyTokens   Tokens `json:"eventDailyTokens"`
}

// Events tunes the events watcher.
type Events struct {
	// OneShotGrace: a one-shot missed by less than this while Mother was
	// down still runs (late); older ones are removed.
	OneShotGrace Duration `json:"oneShotGrace"`
	// MaxQueuedPerChannel caps queued events per channel.
	MaxQueuedPerChannel int `json:"maxQueuedPerChannel"`
}

// Context tunes context management.
type Context struct {
	// ReserveTokens is kept free in the window for the answer; compaction
	// starts when the context would eat into it.
	ReserveTokens int `json:"reserveTokens"`
	// KeepRecentTokens are kept verbatim when compacting.
	KeepRecentTokens int `json:"keepRecentTokens"`
	// WindowTokens overrides the model's context length (0: ask the
	// provider: Ollama's /api/show, Anthropic's Models API). Ollama is asked
	// to run with this num_ctx, so the context is never cut silently.
	WindowTokens int `json:"windowTokens"`
}

// Dispatch tunes per-channel queues.
type Dispatch struct {
	// QueueSize is the number of pending messages per channel.
	QueueSize int `json:"queueSize"`
}

// MCPServer is a host-side tool server: a command (stdio) or a URL
// (streamable HTTP). Its tools are called "<server name>.<tool>".
type MCPServer struct {
	// Command starts a stdio server; it runs in the data directory, and a
	// relative path with a slash is relative to it.
	Command string `json:"command"`
	// Args are the command's arguments.
	Args []string `json:"args"`
	// Env is added to the server's environment, which otherwise holds only
	// PATH, HOME, USER, LOGNAME, SHELL, TERM, LANG, LC_ALL, LC_CTYPE, TZ and
	// TMPDIR (never Mother's tokens or keys).
	Env map[string]string `json:"env"`
	// URL is a streamable HTTP server's endpoint.
	URL string `json:"url"`
	// Headers are sent with every HTTP request (an API key, say).
	Headers map[string]Secret `json:"headers"`
	// Timeout per tool call (default 60s).
	Timeout Duration `json:"timeout"`
	// Disabled keeps the server in the configuration without running it.
	Disabled bool `json:"disabled"`
}

// Log configures logging.
type Log struct {
	// Format is "text" or "json".
	Format string `json:"format"`
	// Level is "debug", "info", "warn" or "error".
	Level string `json:"level"`
}

// Metrics is the listener of /metrics (Prometheus), /healthz and the
// status page.
type Metrics struct {
	// Listen is an address such as "127.0.0.1:9464"; empty: off. An
	// address that is not loopback needs Token.
	Listen string `json:"listen"`
	// Token, when set, is required on every request to the listener, as
	// "Authorization: Bearer TOKEN" or as the password of HTTP basic
	// authentication (or set MOTHER_METRICS_TOKEN). At least 16
	// characters.
	Token Secret `json:"token"`
}

// DMPolicy is "everyone", "none", or a list of user ids allowed to DM.
type DMPolicy struct {
	Everyone bool
	Users    []string
	invalid  string
}

// Allows reports whether userID may DM (admins are checked separately).
func (p DMPolicy) Allows(userID string) bool {
	if p.Everyone {
		return true
	}
	for _, u := range p.Users {
		if u == userID {
			return true
		}
	}
	return false
}

// UnmarshalJSON accepts "everyone", "none" or ["id", ...]. A bad value is
// kept and reported by Validate with the field's name.
func (p *DMPolicy) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		switch s {
		case "everyone":
			*p = DMPolicy{Everyone: true}
		case "none":
			*p = DMPolicy{}
		default:
			*p = DMPolicy{invalid: fmt.Sprintf("must be \"everyone\", \"none\" or a list of user ids, not %q", s)}
		}
		return nil
	}
	var ids []string
	if err := json.Unmarshal(b, &ids); err != nil {
		*p = DMPolicy{invalid: "must be \"everyone\", \"none\" or a list of user ids"}
		return nil
	}
	*p = DMPolicy{Users: ids}
	return nil
}

func (p DMPolicy) decodeProblem() string { return p.invalid }

// MarshalJSON writes the policy back in its config form.
func (p DMPolicy) MarshalJSON() ([]byte, error) {
	if p.Everyone {
		return json.Marshal("everyone")
	}
	if len(p.Users) == 0 {
		return json.Marshal("none")
	}
	return json.Marshal(p.Users)
}

// Secret is a string that never prints.
type Secret string

// String hides the value.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString hides the value from %#v.
func (s Secret) GoString() string { return s.String() }

// Value returns the secret itself, for the one place that needs it.
func (s Secret) Value() string { return string(s) }

// MarshalJSON never writes the value.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }
