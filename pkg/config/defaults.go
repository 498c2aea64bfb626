package config

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Defaults, as documented in docs/configuration.md.
const (
	DefaultModelProvider      = "ollama"
	DefaultModelID            = "qwen3:30b-a3b"
	DefaultModelParallel      = 4
	DefaultOllamaURL          = "http://127.0.0.1:11434"
	DefaultChickImage         = "mother-chick:dev"
	DefaultChickModel         = "qwen3:14b"
	DefaultTier               = "local"
	DefaultMaxConcurrent      = 6
	DefaultMaxPerChannel      = 3
	DefaultChickQueue         = 20
	DefaultChickTimeout       = 30 * time.Minute
	DefaultChickMaxTurns      = 100
	DefaultHeartbeat          = 5 * time.Second
	DefaultKillGrace          = 10 * time.Second
	DefaultMemory             = "2g"
	DefaultCPUs               = 2.0
	DefaultPids               = 512
	DefaultTmpfs              = "256m"
	DefaultWorkspaceBytes     = "2g"
	DefaultUser               = "65534:65534"
	DefaultGRPCListen         = "127.0.0.1:7777"
	DefaultSocket             = "mother.sock"
	DefaultOneShotGrace       = 10 * time.Minute
	DefaultEventQueue         = 5
	DefaultDispatchQueue      = 5
	DefaultReserveTokens      = 4096
	DefaultKeepRecentTokens   = 8192
	DefaultMCPTimeout         = 60 * time.Second
	DefaultLogFormat          = "text"
	DefaultLogLevel           = "info"
	DefaultAnthropicBaseURL   = "https://api.anthropic.com"
	DefaultChickTokenBudget   = 2_000_000
	DefaultChannelDailyTokens = 0
	// DefaultModelMaxOutputTokens caps one answer of Mother's model
	// (model.maxOutputTokens).
	DefaultModelMaxOutputTokens = 8192
	// DefaultEgressMaxBytes caps what one chick sends out through its gate.
	DefaultEgressMaxBytes = "256m"
	// DefaultEgressLogMaxBytes caps a chick's egress.jsonl
	// (chicks.egress.logMaxBytes).
	DefaultEgressLogMaxBytes = "1m"
	// DefaultAccessPendingPerChick and DefaultAccessPendingPerChannel cap
	// the access requests waiting for an admin
	// (chicks.egress.maxPendingPerChick, maxPendingPerChannel).
	DefaultAccessPendingPerChick   = 3
	DefaultAccessPendingPerChannel = 10
	// DefaultEventMaxBytes caps one chick event (chicks.events.maxEventBytes).
	DefaultEventMaxBytes = "1m"
	// DefaultEventsPerSecond and DefaultEventBurst bound a chick's event
	// rate (chicks.events.perSecond, chicks.events.burst).
	DefaultEventsPerSecond = 100
	DefaultEventBurst      = 1000
	// DefaultPostsPerMinute and DefaultPostsBurst pace the notices one
	// chick causes in its channel (chicks.posts.perMinute, .burst);
	// DefaultProgressPerMinute and DefaultProgressBurst its progress
	// (chicks.posts.progressPerMinute, .progressBurst).
	DefaultPostsPerMinute    = 4
	DefaultPostsBurst        = 5
	DefaultProgressPerMinute = 20
	DefaultProgressBurst     = 20
	// DefaultEventsMaxBytes caps the bytes stored for one chick's events
	// (chicks.events.maxBytes).
	DefaultEventsMaxBytes = "64m"
	// DefaultCallMaxRequestBytes caps one chick model call
	// (chicks.calls.maxRequestBytes).
	DefaultCallMaxRequestBytes = "3m"
	// DefaultCallMaxImages caps the images of one chick model call
	// (chicks.calls.maxImages).
	DefaultCallMaxImages = 4
	// DefaultCallMaxImageBytes caps the bytes of one chick model call's
	// images (chicks.calls.maxImageBytes).
	DefaultCallMaxImageBytes = "2m"
	// DefaultCallMaxHeldBytes caps the bytes of chick model calls Mother
	// reads or holds at once (chicks.calls.maxHeldBytes).
	DefaultCallMaxHeldBytes = "4m"
	// DefaultAccessRequestTimeout is how long request_access waits.
	DefaultAccessRequestTimeout = 10 * time.Minute
	// Gate limits (chicks.gate): per chick on nest.sock and on the proxy,
	// connections still naming their chick, all connections, and the time
	// a connection has to name its chick.
	DefaultGateNestConnsPerChick  = 4
	DefaultGateProxyConnsPerChick = 32
	DefaultGatePending            = 64
	DefaultGateConns              = 512
	DefaultGatePrefaceTimeout     = 5 * time.Second
	// DefaultChannelQuota caps a channel's kept files (chicks.files.quota).
	DefaultChannelQuota = "256m"
	// DefaultSkillsMaxCount and DefaultSkillsMaxBytes cap one skills/
	// directory (chicks.skills.maxCount, chicks.skills.maxBytes).
	DefaultSkillsMaxCount = 100
	DefaultSkillsMaxBytes = "32m"
)

// MaxChannelQuota is the highest chicks.files.quota: what a chick
// receives at start can be no more (wire.MaxFetchBytes, which chicks of
// older images hold to as well).
const MaxChannelQuota = 1 << 30

// DefaultEventDailyUSD caps what one scheduled event's runs spend per
// day (budgets.mother.eventDailyUSD): a dollar.
const DefaultEventDailyUSD USD = 1_000_000

// Defaults of the broker's limits on chicks' model calls.
const (
	// DefaultTierMaxOutputTokens caps one answer of a chick's model
	// (chicks.tiers.<name>.maxOutputTokens); Anthropic's provider uses the
	// same when a request sets no limit.
	DefaultTierMaxOutputTokens = 8192
	// DefaultProviderCooldown is providers.cooldown.
	DefaultProviderCooldown = time.Minute
	// DefaultFailuresBeforeCooldown is providers.failuresBeforeCooldown.
	DefaultFailuresBeforeCooldown = 2
	// DefaultFirstTokenTimeout is providers.firstTokenTimeout.
	DefaultFirstTokenTimeout = 2 * time.Minute
	// DefaultModelThink is model.think: Mother's routing turns do not
	// think.
	DefaultModelThink = "off"
	// DefaultTierThink is chicks.tiers.<name>.think: a chick's model thinks
	// as it would by default.
	DefaultTierThink = "auto"
	// DefaultMaxModelCallsPerChick caps a chick's model calls in flight.
	DefaultMaxModelCallsPerChick = 2
)

// Chick network modes (chicks.network).
const (
	NetworkIsolated = "isolated"
	NetworkHost     = "host"
	NetworkBridge   = "bridge"
	NetworkNone     = "none"
)

// What Mother does with a chick's result (chicks.results).
const (
	ResultsAnswer = "answer"
	ResultsRelay  = "relay"
)

// ApplyEnv applies the environment overrides: those the registered adapter
// types declare (DISCORD_BOT_TOKEN, SLACK_BOT_TOKEN, ...; see EnvOverride),
// then MOTHER_MODEL_PROVIDER, MOTHER_MODEL_ID, MOTHER_OLLAMA_URL,
// MOTHER_CHICK_MODEL, MOTHER_CHICK_IMAGE, MOTHER_GRPC_LISTEN,
// ANTHROPIC_API_KEY, MOTHER_METRICS_TOKEN. An adapter variable creates an adapter named after its
// type ("discord", "slack") when config.json has no adapter of that type,
// and overrides the field of the only one when it has exactly one.
func (c *Config) ApplyEnv(getenv func(string) string) {
	if c.Adapters == nil {
		c.Adapters = map[string]Adapter{}
	}
	c.applyAdapterEnv(getenv)
	if v := getenv("MOTHER_MODEL_PROVIDER"); v != "" {
		c.Model.Provider = v
	}
	if v := getenv("MOTHER_MODEL_ID"); v != "" {
		c.Model.ID = v
	}
	if v := getenv("MOTHER_OLLAMA_URL"); v != "" {
		c.Providers.Ollama.URL = v
	}
	if v := getenv("ANTHROPIC_API_KEY"); v != "" && c.Providers.Anthropic.APIKey == "" {
		c.Providers.Anthropic.APIKey = Secret(v)
	}
	for name, o := range c.Providers.OpenAI {
		if o.APIKey == "" && o.APIKeyEnv != "" {
			o.APIKey = Secret(getenv(o.APIKeyEnv))
			c.Providers.OpenAI[name] = o
		}
	}
	if v := getenv("MOTHER_METRICS_TOKEN"); v != "" && c.Metrics.Token == "" {
		c.Metrics.Token = Secret(v)
	}
	if v := getenv("MOTHER_CHICK_IMAGE"); v != "" {
		c.Chicks.Image = v
	}
	if v := getenv("MOTHER_GRPC_LISTEN"); v != "" {
		c.GRPC.Listen = v
	}
	if v := getenv("MOTHER_CHICK_MODEL"); v != "" {
		if c.Chicks.Tiers == nil {
			c.Chicks.Tiers = map[string]Tier{}
		}
		tier := c.Chicks.DefaultTier
		if tier == "" {
			tier = DefaultTier
		}
		t := c.Chicks.Tiers[tier]
		t.Model = v
		if t.Provider == "" {
			t.Provider = "ollama"
		}
		c.Chicks.Tiers[tier] = t
	}
}

// overrideAdapter edits the only adapter of typ, or creates one named typ.
// With several adapters of typ, the environment cannot say which is meant;
// the one named typ is used if it exists.
func (c *Config) overrideAdapter(typ string, edit func(*Adapter)) {
	var found []string
	for name, a := range c.Adapters {
		if a.Type == typ {
			found = append(found, name)
		}
	}
	name := typ
	if len(found) == 1 {
		name = found[0]
	}
	a, ok := c.Adapters[name]
	if !ok {
		a = Adapter{Type: typ}
	}
	edit(&a)
	c.Adapters[name] = a
}

// SetDefaults fills every unset field. dataDir anchors relative paths.
func (c *Config) SetDefaults(dataDir string) {
	if c.Adapters == nil {
		c.Adapters = map[string]Adapter{}
	}
	c.setAdapterDefaults()
	c.Recall.setDefaults()
	c.setRolesDefaults()
	c.setSpeechDefaults()
	if c.Model.Provider == "" {
		c.Model.Provider = DefaultModelProvider
	}
	if c.Model.ID == "" {
		c.Model.ID = DefaultModelID
	}
	if c.Model.Think == "" {
		c.Model.Think = DefaultModelThink
	}
	if c.Model.MaxParallel == 0 {
		c.Model.MaxParallel = DefaultModelParallel
	}
	if c.Model.MaxOutputTokens == 0 {
		c.Model.MaxOutputTokens = DefaultModelMaxOutputTokens
	}
	if c.Providers.Cooldown.Duration == 0 {
		c.Providers.Cooldown = Dur(DefaultProviderCooldown)
	}
	if c.Providers.FailuresBeforeCooldown == 0 {
		c.Providers.FailuresBeforeCooldown = DefaultFailuresBeforeCooldown
	}
	if c.Providers.FirstTokenTimeout.Duration == 0 {
		c.Providers.FirstTokenTimeout = Dur(DefaultFirstTokenTimeout)
	}
	if c.Providers.Ollama.URL == "" {
		c.Providers.Ollama.URL = DefaultOllamaURL
	}
	if c.Providers.Anthropic.BaseURL == "" {
		c.Providers.Anthropic.BaseURL = DefaultAnthropicBaseURL
	}
	ch := &c.Chicks
	if ch.Image == "" {
		ch.Image = DefaultChickImage
	}
	if ch.DefaultTier == "" {
		ch.DefaultTier = DefaultTier
	}
	if ch.Tiers == nil {
		ch.Tiers = map[string]Tier{}
	}
	if _, ok := ch.Tiers[ch.DefaultTier]; !ok && ch.DefaultTier == DefaultTier {
		ch.Tiers[DefaultTier] = Tier{Provider: "ollama", Model: DefaultChickModel, Description: "local model for file work, scripting and searching"}
	}
	for name, t := range ch.Tiers {
		if t.Provider == "" {
			t.Provider = "ollama"
			ch.Tiers[name] = t
		}
		if t.MaxOutputTokens == 0 {
			t.MaxOutputTokens = DefaultTierMaxOutputTokens
			ch.Tiers[name] = t
		}
		if t.Think == "" {
			t.Think = DefaultTierThink
			ch.Tiers[name] = t
		}
	}
	if ch.MaxConcurrent == 0 {
		ch.MaxConcurrent = DefaultMaxConcurrent
	}
	if ch.MaxPerChannel == 0 {
		ch.MaxPerChannel = DefaultMaxPerChannel
	}
	if ch.QueueSize == 0 {
		ch.QueueSize = DefaultChickQueue
	}
	if ch.Timeout.Duration == 0 && ch.Timeout.invalid == "" {
		ch.Timeout = Dur(DefaultChickTimeout)
	}
	if ch.MaxTurns == 0 {
		ch.MaxTurns = DefaultChickMaxTurns
	}
	if ch.MaxModelCallsPerChick == 0 {
		ch.MaxModelCallsPerChick = DefaultMaxModelCallsPerChick
	}
	if ch.HeartbeatInterval.Duration == 0 && ch.HeartbeatInterval.invalid == "" {
		ch.HeartbeatInterval = Dur(DefaultHeartbeat)
	}
	if ch.KillGrace.Duration == 0 && ch.KillGrace.invalid == "" {
		ch.KillGrace = Dur(DefaultKillGrace)
	}
	if len(ch.Hosts) == 0 {
		ch.Hosts = []DockerHost{{Name: "local"}}
	}
	for i := range ch.Hosts {
		h := &ch.Hosts[i]
		if h.Name == "" {
			h.Name = fmt.Sprintf("host%d", i+1)
		}
		if h.Capacity == 0 {
			h.Capacity = ch.MaxConcurrent
		}
		if h.Kind == "" {
			h.Kind = HostDocker
		}
		if h.IsKubernetes() {
			if h.ImagePullPolicy == "" {
				h.ImagePullPolicy = "IfNotPresent"
			}
		}
	}
	if ch.Resources.Memory == "" {
		ch.Resources.Memory = DefaultMemory
	}
	if ch.Resources.CPUs == 0 {
		ch.Resources.CPUs = DefaultCPUs
	}
	if ch.Resources.Pids == 0 {
		ch.Resources.Pids = DefaultPids
	}
	if ch.Resources.Tmpfs == "" {
		ch.Resources.Tmpfs = DefaultTmpfs
	}
	if ch.Resources.WorkspaceBytes == "" {
		ch.Resources.WorkspaceBytes = DefaultWorkspaceBytes
	}
	if ch.Hardening.User == "" {
		ch.Hardening.User = DefaultUser
	}
	if ch.Network == "" {
		ch.Network = NetworkIsolated
	}
	if ch.Results == "" {
		ch.Results = ResultsAnswer
	}
	if ch.Posts.PerMinute == 0 {
		ch.Posts.PerMinute = DefaultPostsPerMinute
	}
	if ch.Posts.Burst == 0 {
		ch.Posts.Burst = DefaultPostsBurst
	}
	if ch.Posts.ProgressPerMinute == 0 {
		ch.Posts.ProgressPerMinute = DefaultProgressPerMinute
	}
	if ch.Posts.ProgressBurst == 0 {
		ch.Posts.ProgressBurst = DefaultProgressBurst
	}
	if ch.Egress.MaxBytes == "" {
		ch.Egress.MaxBytes = DefaultEgressMaxBytes
	}
	if ch.Egress.LogMaxBytes == "" {
		ch.Egress.LogMaxBytes = DefaultEgressLogMaxBytes
	}
	if ch.Egress.MaxPendingPerChick == 0 {
		ch.Egress.MaxPendingPerChick = DefaultAccessPendingPerChick
	}
	if ch.Egress.MaxPendingPerChannel == 0 {
		ch.Egress.MaxPendingPerChannel = DefaultAccessPendingPerChannel
	}
	if ch.Events.MaxEventBytes == "" {
		ch.Events.MaxEventBytes = DefaultEventMaxBytes
	}
	if ch.Events.PerSecond == 0 {
		ch.Events.PerSecond = DefaultEventsPerSecond
	}
	if ch.Events.Burst == 0 {
		ch.Events.Burst = DefaultEventBurst
	}
	if ch.Events.MaxBytes == "" {
		ch.Events.MaxBytes = DefaultEventsMaxBytes
	}
	if ch.Calls.MaxRequestBytes == "" {
		ch.Calls.MaxRequestBytes = DefaultCallMaxRequestBytes
	}
	if ch.Calls.MaxImages == 0 {
		ch.Calls.MaxImages = DefaultCallMaxImages
	}
	if ch.Calls.MaxImageBytes == "" {
		ch.Calls.MaxImageBytes = DefaultCallMaxImageBytes
	}
	if ch.Calls.MaxHeldBytes == "" {
		ch.Calls.MaxHeldBytes = DefaultCallMaxHeldBytes
	}
	if ch.Egress.RequestTimeout.Duration == 0 && ch.Egress.RequestTimeout.invalid == "" {
		ch.Egress.RequestTimeout = Dur(DefaultAccessRequestTimeout)
	}
	if ch.Files.Quota == "" {
		ch.Files.Quota = DefaultChannelQuota
	}
	if ch.Skills.MaxCount == 0 {
		ch.Skills.MaxCount = DefaultSkillsMaxCount
	}
	if ch.Skills.MaxBytes == "" {
		ch.Skills.MaxBytes = DefaultSkillsMaxBytes
	}
	if ch.Gate.MaxNestConnsPerChick == 0 {
		ch.Gate.MaxNestConnsPerChick = DefaultGateNestConnsPerChick
	}
	if ch.Gate.MaxProxyConnsPerChick == 0 {
		ch.Gate.MaxProxyConnsPerChick = DefaultGateProxyConnsPerChick
	}
	if ch.Gate.MaxPending == 0 {
		ch.Gate.MaxPending = DefaultGatePending
	}
	if ch.Gate.MaxConns == 0 {
		ch.Gate.MaxConns = DefaultGateConns
	}
	if ch.Gate.PrefaceTimeout.Duration == 0 && ch.Gate.PrefaceTimeout.invalid == "" {
		ch.Gate.PrefaceTimeout = Dur(DefaultGatePrefaceTimeout)
	}
	if c.GRPC.Listen == "" {
		c.GRPC.Listen = DefaultGRPCListen
	}
	if c.GRPC.Advertise == "" {
		c.GRPC.Advertise = c.GRPC.Listen
	}
	if c.Admin.Socket == "" {
		c.Admin.Socket = DefaultSocket
	}
	if !filepath.IsAbs(c.Admin.Socket) && dataDir != "" {
		if abs, err := filepath.Abs(filepath.Join(dataDir, c.Admin.Socket)); err == nil {
			c.Admin.Socket = abs
		}
	}
	if c.Budgets.ChickTokens == 0 {
		c.Budgets.ChickTokens = DefaultChickTokenBudget
	}
	if c.Budgets.Mother.EventDailyUSD == 0 {
		c.Budgets.Mother.EventDailyUSD = DefaultEventDailyUSD
	}
	if c.Events.OneShotGrace.Duration == 0 && c.Events.OneShotGrace.invalid == "" {
		c.Events.OneShotGrace = Dur(DefaultOneShotGrace)
	}
	if c.Events.MaxQueuedPerChannel == 0 {
		c.Events.MaxQueuedPerChannel = DefaultEventQueue
	}
	if c.Dispatch.QueueSize == 0 {
		c.Dispatch.QueueSize = DefaultDispatchQueue
	}
	if c.Context.ReserveTokens == 0 {
		c.Context.ReserveTokens = DefaultReserveTokens
	}
	if c.Context.KeepRecentTokens == 0 {
		c.Context.KeepRecentTokens = DefaultKeepRecentTokens
	}
	for name, s := range c.MCPServers {
		if s.Timeout.Duration == 0 && s.Timeout.invalid == "" {
			s.Timeout = Dur(DefaultMCPTimeout)
			c.MCPServers[name] = s
		}
	}
	if c.Log.Format == "" {
		c.Log.Format = DefaultLogFormat
	}
	if c.Log.Level == "" {
		c.Log.Level = DefaultLogLevel
	}
}

// ValidName says what is wrong with a name of config.json (an adapter, a
// tier, an endpoint), or "" when it is fine.
func ValidName(s string) string { return validName(s) }

func validName(s string) string {
	if s == "" {
		return "is empty"
	}
	if len(s) > 64 {
		return "is longer than 64 characters"
	}
	for i, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || (i > 0 && (r == '.' || r == '_' || r == '-'))
		if !ok {
			return fmt.Sprintf("%q may only use letters, digits, '.', '_' and '-' (not first)", s)
		}
	}
	return ""
}

// ParseBytes parses "512m", "2g", "1024k" or a plain byte count.
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "" {
		return 0, fmt.Errorf("empty size")
	}
	mult := int64(1)
	switch s[len(s)-1] {
	case 'k':
		mult = 1 << 10
	case 'm':
		mult = 1 << 20
	case 'g':
		mult = 1 << 30
	case 'b':
	}
	num := strings.TrimRight(s, "kmgb")
	var n int64
	if _, err := fmt.Sscanf(num, "%d", &n); err != nil || n <= 0 || fmt.Sprint(n) != num {
		return 0, fmt.Errorf("must be a size such as \"512m\" or \"2g\", got %q", s)
	}
	return n * mult, nil
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
