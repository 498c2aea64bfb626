package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// problems collects the field errors one Validate run finds.
type problems struct{ es Errors }

func (p *problems) bad(field, format string, args ...any) {
	p.es = append(p.es, FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

// Validate checks every field and returns all problems, section by section
// in the order of config.json.
func (c *Config) Validate() error {
	var p problems
	c.validateAdapters(&p)
	c.validateModel(&p)
	c.validateProviders(&p)
	c.validateChicks(&p)
	c.validateGRPC(&p)
	c.validateBudgets(&p)
	c.validatePrices(&p)
	c.validateQueues(&p)
	c.validateContext(&p)
	c.validateMCPServers(&p)
	c.validateLog(&p)
	c.validateMetrics(&p)
	c.validateRecall(&p)
	c.validateRoles(&p)
	c.validateSpeech(&p)
	if len(p.es) == 0 {
		return nil
	}
	return p.es
}

// checkProvider reports an unknown provider, Anthropic without a key, or
// an OpenAI-compatible endpoint that is not configured, for the field
// that names provider.
func (c *Config) checkProvider(p *problems, field, provider string) {
	switch {
	case provider == "ollama":
	case provider == "anthropic":
		if c.Providers.Anthropic.APIKey == "" {
			p.bad("providers.anthropic.apiKey", "missing, needed by %s (or set ANTHROPIC_API_KEY)", field)
		}
	case provider == "openai" || strings.HasPrefix(provider, "openai:"):
		if _, err := c.Providers.OpenAIEndpoint(provider); err != nil {
			p.bad(field, "%v", err)
		}
	default:
		p.bad(field, "unknown provider %q (\"ollama\", \"anthropic\" or \"openai:<name>\" of providers.openai)", provider)
	}
}

// checkFallbacks checks a list of fallbacks.
func (c *Config) checkFallbacks(p *problems, field string, fbs []Fallback) {
	for i, fb := range fbs {
		f := fmt.Sprintf("%s[%d]", field, i)
		c.checkProvider(p, f+".provider", fb.Provider)
		if fb.Model == "" {
			p.bad(f+".model", "missing")
		}
	}
}

// checkThink reports a think setting that is not auto, on or off, or "on"
// for a provider that does not send it.
func checkThink(p *problems, field, value, provider string) {
	switch value {
	case "", "auto", "off":
	case "on":
		if provider == "anthropic" {
			p.bad(field, `"on" is for models served by Ollama: the anthropic provider does not ask for extended thinking (use "auto" or "off")`)
		}
	default:
		p.bad(field, `%q is not a think setting: use "auto", "on" or "off"`, value)
	}
}

func (c *Config) validateModel(p *problems) {
	c.checkProvider(p, "model.provider", c.Model.Provider)
	checkThink(p, "model.think", c.Model.Think, c.Model.Provider)
	c.checkFallbacks(p, "model.fallbacks", c.Model.Fallbacks)
	if c.Model.MaxParallel < 0 {
		p.bad("model.maxParallel", "must be positive")
	}
	if c.Model.MaxOutputTokens < 0 {
		p.bad("model.maxOutputTokens", "must be positive")
	}
}

func (c *Config) validateProviders(p *problems) {
	if u, err := url.Parse(strings.TrimSpace(c.Providers.Ollama.URL)); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.bad("providers.ollama.url", "must be an http(s) URL such as http://127.0.0.1:11434, got %q", c.Providers.Ollama.URL)
	}
	if u, err := url.Parse(c.Providers.Anthropic.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.bad("providers.anthropic.baseURL", "must be an http(s) URL, got %q", c.Providers.Anthropic.BaseURL)
	}
	for _, name := range sortedKeys(c.Providers.OpenAI) {
		o := c.Providers.OpenAI[name]
		f := "providers.openai." + name
		if err := validName(name); err != "" {
			p.bad(f, "endpoint name %s", err)
		}
		if u, err := url.Parse(strings.TrimSpace(o.BaseURL)); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.bad(f+".baseURL", "must be an http(s) URL such as http://127.0.0.1:8000/v1, got %q", o.BaseURL)
		}
		if o.ContextWindow < 0 {
			p.bad(f+".contextWindow", "must be positive")
		}
		for _, m := range sortedKeys(o.Models) {
			if o.Models[m].ContextWindow < 0 {
				p.bad(f+".models."+m+".contextWindow", "must be positive")
			}
		}
	}
	if c.Providers.Cooldown.Duration < 0 {
		p.bad("providers.cooldown", "must be positive")
	}
	if c.Providers.FailuresBeforeCooldown < 0 {
		p.bad("providers.failuresBeforeCooldown", "must be positive")
	}
	if c.Providers.FirstTokenTimeout.Duration < 0 {
		p.bad("providers.firstTokenTimeout", "must be positive")
	}
}

func (c *Config) validateChicks(p *problems) {
	ch := c.Chicks
	tierNames := sortedKeys(ch.Tiers)
	for _, name := range tierNames {
		t := ch.Tiers[name]
		f := "chicks.tiers." + name
		if err := validName(name); err != "" {
			p.bad(f, "tier name %s", err)
		}
		for j, d := range t.Egress.Allow {
			if err := ValidDestination(d); err != nil {
				p.bad(fmt.Sprintf("%s.egress.allow[%d]", f, j), "%v", err)
			}
		}
		if t.Model == "" {
			p.bad(f+".model", "missing")
		}
		if pr := t.Price; pr != nil && (pr.InputPerMTok < 0 || pr.OutputPerMTok < 0) {
			p.bad(f+".price", "must not be negative")
		}
		if t.MaxOutputTokens < 0 {
			p.bad(f+".maxOutputTokens", "must be positive")
		}
		c.checkProvider(p, f+".provider", t.Provider)
		checkThink(p, f+".think", t.Think, t.Provider)
		c.checkFallbacks(p, f+".fallbacks", t.Fallbacks)
	}
	if _, ok := ch.Tiers[ch.DefaultTier]; !ok {
		p.bad("chicks.defaultTier", "%q is not in chicks.tiers (%s)", ch.DefaultTier, strings.Join(tierNames, ", "))
	}
	if ch.MaxConcurrent < 0 {
		p.bad("chicks.maxConcurrent", "must be positive")
	}
	if ch.MaxPerChannel < 0 {
		p.bad("chicks.maxPerChannel", "must be positive")
	}
	if ch.MaxPerUser < 0 {
		p.bad("chicks.maxPerUser", "must not be negative (0: no cap)")
	}
	if ch.QueueSize < 0 {
		p.bad("chicks.queueSize", "must be positive")
	}
	if ch.MaxTurns < 0 {
		p.bad("chicks.maxTurns", "must be positive")
	}
	if ch.MaxModelCallsPerChick < 0 {
		p.bad("chicks.maxModelCallsPerChick", "must be positive")
	}
	switch ch.Network {
	case NetworkIsolated, NetworkHost, NetworkBridge, NetworkNone:
	default:
		p.bad("chicks.network", "must be \"isolated\", \"host\", \"bridge\" or \"none\", got %q", ch.Network)
	}
	switch ch.Results {
	case ResultsAnswer, ResultsRelay:
	default:
		p.bad("chicks.results", "must be \"answer\" or \"relay\", got %q", ch.Results)
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"chicks.posts.perMinute", ch.Posts.PerMinute}, {"chicks.posts.burst", ch.Posts.Burst},
		{"chicks.posts.progressPerMinute", ch.Posts.ProgressPerMinute}, {"chicks.posts.progressBurst", ch.Posts.ProgressBurst}} {
		if f.n < 0 {
			p.bad(f.name, "must be positive, got %d", f.n)
		}
	}
	c.validateEgress(p)
	c.validateChickEvents(p)
	c.validateChickCalls(p)
	c.validateGate(p)
	c.validateChickFiles(p)
	c.validateHosts(p)
	if _, err := ParseBytes(ch.Resources.Memory); err != nil {
		p.bad("chicks.resources.memory", "%v", err)
	}
	if _, err := ParseBytes(ch.Resources.Tmpfs); err != nil {
		p.bad("chicks.resources.tmpfs", "%v", err)
	}
	if _, err := ParseBytes(ch.Resources.WorkspaceBytes); err != nil {
		p.bad("chicks.resources.workspaceBytes", "%v", err)
	}
	if ch.Resources.CPUs < 0 {
		p.bad("chicks.resources.cpus", "must be positive")
	}
	if ch.Resources.Pids < 0 {
		p.bad("chicks.resources.pids", "must be positive")
	}
	if ch.Hardening.User == "0" || strings.HasPrefix(ch.Hardening.User, "0:") || ch.Hardening.User == "root" {
		p.bad("chicks.hardening.user", "chicks must not run as root")
	}
	for i, ht := range ch.HostTools {
		if !strings.Contains(ht, ".") {
			p.bad(fmt.Sprintf("chicks.hostTools[%d]", i), "must be \"server.tool\" or \"server.*\", got %q", ht)
		}
	}
}

func (c *Config) validateHosts(p *problems) {
	ch := c.Chicks
	names := map[string]bool{}
	for i, h := range ch.Hosts {
		f := fmt.Sprintf("chicks.hosts[%d]", i)
		if names[h.Name] {
			p.bad(f+".name", "duplicate host name %q", h.Name)
		}
		names[h.Name] = true
		if h.Capacity < 0 {
			p.bad(f+".capacity", "must be positive")
		}
		if h.Address != "" {
			u, err := url.Parse(h.Address)
			switch {
			case err != nil:
				p.bad(f+".address", "not a URL: %v", err)
			case u.Scheme == "unix" || u.Scheme == "ssh":
			case u.Scheme == "tcp":
				if h.TLSCA == "" || h.TLSCert == "" || h.TLSKey == "" {
					p.bad(f+".address", "tcp:// Docker hosts need TLS client certificates (tlsCA, tlsCert, tlsKey); plain TCP is refused")
				}
			default:
				p.bad(f+".address", "scheme must be unix://, tcp:// (with TLS) or ssh://, got %q", h.Address)
			}
		}
		switch h.Kind {
		case HostDocker, "":
			c.validateDockerOnly(p, f, h)
		case HostKubernetes:
			c.validateKubernetesHost(p, f, h)
			continue
		default:
			p.bad(f+".kind", "must be \"docker\" or \"kubernetes\", got %q", h.Kind)
			continue
		}
		if (h.SSHIdentityFile != "" || h.SSHKnownHostsFile != "") && !strings.HasPrefix(h.Address, "ssh://") {
			p.bad(f+".sshIdentityFile", "sshIdentityFile and sshKnownHostsFile apply to ssh:// addresses only")
		}
		for j, t := range h.Tiers {
			if _, ok := ch.Tiers[t]; !ok {
				p.bad(fmt.Sprintf("%s.tiers[%d]", f, j), "unknown tier %q", t)
			}
		}
	}
}

// validateDockerOnly refuses the kubernetes fields on a Docker host.
func (c *Config) validateDockerOnly(p *problems, f string, h DockerHost) {
	only := func(field string, set bool) {
		if set {
			p.bad(f+"."+field, "applies to hosts of kind \"kubernetes\" only")
		}
	}
	only("kubeconfig", h.Kubeconfig != "")
	only("namespace", h.Namespace != "")
	only("imagePullPolicy", h.ImagePullPolicy != "")
	only("workspaceSize", h.WorkspaceSize != "")
	only("requests", h.Requests != Requests{})
	only("placement", len(h.Placement) > 0)
}

// validateKubernetesHost checks a host of kind "kubernetes"
// (docs/kubernetes.md).
func (c *Config) validateKubernetesHost(p *problems, f string, h DockerHost) {
	ch := c.Chicks
	for _, x := range []struct {
		field string
		set   bool
	}{
		{"address", h.Address != ""}, {"tlsCA", h.TLSCA != ""}, {"tlsCert", h.TLSCert != ""}, {"tlsKey", h.TLSKey != ""},
		{"sshIdentityFile", h.SSHIdentityFile != ""}, {"sshKnownHostsFile", h.SSHKnownHostsFile != ""},
	} {
		if x.set {
			p.bad(f+"."+x.field, "not used by a kubernetes host (it reaches the cluster through kubeconfig)")
		}
	}
	if h.Namespace != "" && !dnsLabel.MatchString(h.Namespace) {
		p.bad(f+".namespace", "must be a Kubernetes namespace name (lower-case letters, digits and '-', at most 63), got %q", h.Namespace)
	}
	switch h.ImagePullPolicy {
	case "", "IfNotPresent", "Always", "Never":
	default:
		p.bad(f+".imagePullPolicy", "must be \"IfNotPresent\", \"Always\" or \"Never\", got %q", h.ImagePullPolicy)
	}
	if h.WorkspaceSize != "" {
		if n, err := ParseBytes(h.WorkspaceSize); err != nil || n <= 0 {
			p.bad(f+".workspaceSize", "must be a size such as \"1g\", got %q", h.WorkspaceSize)
		}
	}
	if h.Requests.Memory != "" {
		if _, err := ParseBytes(h.Requests.Memory); err != nil {
			p.bad(f+".requests.memory", "%v", err)
		}
	}
	if h.Requests.CPUs < 0 {
		p.bad(f+".requests.cpus", "must not be negative")
	}
	if ch.Network == NetworkHost {
		p.bad(f+".kind", "chicks.network \"host\" is refused on a kubernetes host (a Pod on the node's network); use \"isolated\" or \"bridge\"")
	}
	if _, err := NumericUser(ch.Hardening.User); err != nil {
		p.bad("chicks.hardening.user", "a kubernetes host needs a numeric uid[:gid]: %v", err)
	}
	for _, tier := range sortedKeys(h.Placement) {
		pf := f + ".placement." + tier
		if _, ok := ch.Tiers[tier]; !ok && tier != "*" {
			p.bad(pf, "unknown tier %q (\"*\" is every tier not listed)", tier)
		}
		pl := h.Placement[tier]
		for _, k := range sortedKeys(pl.NodeSelector) {
			if k == "" {
				p.bad(pf+".nodeSelector", "empty label key")
			}
		}
		for i, t := range pl.Tolerations {
			tf := fmt.Sprintf("%s.tolerations[%d]", pf, i)
			switch t.Operator {
			case "", "Equal":
			case "Exists":
				if t.Value != "" {
					p.bad(tf+".value", "must be empty with operator \"Exists\"")
				}
			default:
				p.bad(tf+".operator", "must be \"Equal\" or \"Exists\", got %q", t.Operator)
			}
			switch t.Effect {
			case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
			default:
				p.bad(tf+".effect", "must be \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\" or empty, got %q", t.Effect)
			}
			if t.TolerationSeconds < 0 {
				p.bad(tf+".tolerationSeconds", "must not be negative")
			}
			if t.TolerationSeconds != 0 && t.Effect != "NoExecute" {
				p.bad(tf+".tolerationSeconds", "applies to effect \"NoExecute\" only")
			}
			if t.Key == "" && t.Operator != "Exists" {
				p.bad(tf+".key", "empty key needs operator \"Exists\"")
			}
		}
		for _, name := range sortedKeys(pl.ExtendedResources) {
			if !strings.Contains(name, "/") {
				p.bad(pf+".extendedResources."+name, "an extended resource is domain-qualified, such as \"nvidia.com/gpu\"")
			}
			if pl.ExtendedResources[name] <= 0 {
				p.bad(pf+".extendedResources."+name, "must be positive")
			}
		}
	}
}

// dnsLabel is a DNS-1123 label (a Kubernetes namespace name).
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// NumericUser parses a "uid[:gid]" user such as "65534:65534" (gid -1 when
// not given).
func NumericUser(user string) (ids [2]int64, err error) {
	u, g, hasG := strings.Cut(strings.TrimSpace(user), ":")
	ids[1] = -1
	if ids[0], err = strconv.ParseInt(u, 10, 64); err != nil || ids[0] < 0 {
		return ids, fmt.Errorf("%q is not uid[:gid]", user)
	}
	if hasG {
		if ids[1], err = strconv.ParseInt(g, 10, 64); err != nil || ids[1] < 0 {
			return ids, fmt.Errorf("%q is not uid[:gid]", user)
		}
	}
	return ids, nil
}

func (c *Config) validateGRPC(p *problems) {
	if _, _, err := net.SplitHostPort(c.GRPC.Listen); err != nil {
		p.bad("grpc.listen", "must be host:port, got %q", c.GRPC.Listen)
	}
	if _, _, err := net.SplitHostPort(c.GRPC.Advertise); err != nil {
		p.bad("grpc.advertise", "must be host:port, got %q", c.GRPC.Advertise)
	}
}

func (c *Config) validateBudgets(p *problems) {
	if c.Budgets.ChickTokens < 0 {
		p.bad("budgets.chickTokens", "must not be negative")
	}
	if c.Budgets.ChannelDailyTokens < 0 {
		p.bad("budgets.channelDailyTokens", "must not be negative")
	}
	if c.Budgets.UserDailyTokens < 0 {
		p.bad("budgets.userDailyTokens", "must not be negative (0: no cap)")
	}
	for t, n := range c.Budgets.TierDailyTokens {
		if _, ok := c.Chicks.Tiers[t]; !ok {
			p.bad("budgets.tierDailyTokens."+t, "unknown tier %q", t)
		}
		if n < 0 {
			p.bad("budgets.tierDailyTokens."+t, "must not be negative")
		}
	}
	for _, t := range sortedKeys(c.Budgets.TierDailyUSD) {
		if _, ok := c.Chicks.Tiers[t]; !ok {
			p.bad("budgets.tierDailyUSD."+t, "unknown tier %q (tiers: %s)", t, strings.Join(sortedKeys(c.Chicks.Tiers), ", "))
		}
	}
	mb := c.Budgets.Mother
	for field, n := range map[string]Tokens{"dailyTokens": mb.DailyTokens, "channelDailyTokens": mb.ChannelDailyTokens, "eventDailyTokens": mb.EventDailyTokens} {
		if n < 0 {
			p.bad("budgets.mother."+field, "must not be negative (0: no cap)")
		}
	}
	// A money cap below a single call's least cost refuses every call:
	// said at start rather than found out by a silent channel.
	if u := mb.EventDailyUSD; u > 0 && u < minUSDCap {
		p.bad("budgets.mother.eventDailyUSD", "%s is less than a cent: every event run would be refused (\"unlimited\": no cap)", u)
	}
}

// minUSDCap is the smallest money cap that is not a mistake: a cent.
const minUSDCap = 10_000

// validatePrices checks prices: keys "<provider>/<model>" (or
// "<provider>/*") of a provider Mother knows, and no negative price.
func (c *Config) validatePrices(p *problems) {
	for _, key := range sortedKeys(c.Prices) {
		f := "prices." + key
		prov, mod, ok := strings.Cut(key, "/")
		if !ok || prov == "" || mod == "" {
			p.bad(f, "the key must be \"<provider>/<model>\" (\"anthropic/claude-sonnet-4-5\", \"ollama/qwen3:14b\") or \"<provider>/*\"")
			continue
		}
		switch {
		case prov == "ollama" || prov == "anthropic":
		case prov == "openai" || strings.HasPrefix(prov, "openai:"):
			if _, err := c.Providers.OpenAIEndpoint(prov); err != nil {
				p.bad(f, "%v", err)
			}
		default:
			p.bad(f, "unknown provider %q (\"ollama\", \"anthropic\" or \"openai:<name>\" of providers.openai)", prov)
		}
		if pr := c.Prices[key]; pr.InputPerMTok < 0 || pr.OutputPerMTok < 0 {
			p.bad(f, "must not be negative")
		}
	}
}

// validateQueues checks the events and dispatch queue sizes.
func (c *Config) validateQueues(p *problems) {
	if c.Events.MaxQueuedPerChannel < 0 {
		p.bad("events.maxQueuedPerChannel", "must be positive")
	}
	if c.Dispatch.QueueSize < 0 {
		p.bad("dispatch.queueSize", "must be positive")
	}
}

func (c *Config) validateContext(p *problems) {
	if c.Context.ReserveTokens < 0 {
		p.bad("context.reserveTokens", "must be positive")
	}
	if c.Context.KeepRecentTokens < 0 {
		p.bad("context.keepRecentTokens", "must be positive")
	}
	if w := c.Context.WindowTokens; w < 0 {
		p.bad("context.windowTokens", "must be positive (0: ask the provider)")
	} else if w > 0 && c.Context.ReserveTokens+c.Context.KeepRecentTokens >= w {
		p.bad("context.windowTokens", "%d leaves no room: reserveTokens (%d) + keepRecentTokens (%d) must be smaller", w, c.Context.ReserveTokens, c.Context.KeepRecentTokens)
	}
}

func (c *Config) validateMCPServers(p *problems) {
	for _, name := range sortedKeys(c.MCPServers) {
		s := c.MCPServers[name]
		f := "mcpServers." + name
		if err := validName(name); err != "" {
			p.bad(f, "server name %s", err)
		}
		switch {
		case s.Command == "" && s.URL == "":
			p.bad(f, "needs \"command\" (stdio) or \"url\" (streamable HTTP)")
		case s.Command != "" && s.URL != "":
			p.bad(f, "has both \"command\" and \"url\"; pick one")
		case s.URL != "":
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				p.bad(f+".url", "must be an http(s) URL, got %q", s.URL)
			}
		}
	}
}

func (c *Config) validateLog(p *problems) {
	switch c.Log.Format {
	case "text", "json":
	default:
		p.bad("log.format", "must be \"text\" or \"json\", got %q", c.Log.Format)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		p.bad("log.level", "must be debug, info, warn or error, got %q", c.Log.Level)
	}
}

// MinMetricsToken is the shortest metrics.token accepted.
const MinMetricsToken = 16

func (c *Config) validateMetrics(p *problems) {
	if tok := c.Metrics.Token.Value(); tok != "" && (len(tok) < MinMetricsToken || strings.TrimSpace(tok) != tok) {
		p.bad("metrics.token", "must be at least %d characters without surrounding spaces (for example: openssl rand -hex 24)", MinMetricsToken)
	}
	if c.Metrics.Listen == "" {
		return
	}
	host, _, err := net.SplitHostPort(c.Metrics.Listen)
	if err != nil {
		p.bad("metrics.listen", "must be host:port, got %q", c.Metrics.Listen)
	} else if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) && c.Metrics.Token == "" {
		p.bad("metrics.listen", "%q is not a loopback address (127.0.0.1, ::1, localhost): set metrics.token (or MOTHER_METRICS_TOKEN) so that only those who hold it can read the listener", c.Metrics.Listen)
	}
}

func (c *Config) validateEgress(p *problems) {
	e := c.Chicks.Egress
	for i, d := range e.Allow {
		if err := ValidDestination(d); err != nil {
			p.bad(fmt.Sprintf("chicks.egress.allow[%d]", i), "%v", err)
		}
	}
	for _, chID := range sortedKeys(e.Channels) {
		if !strings.Contains(chID, "/") {
			p.bad("chicks.egress.channels."+chID, "must be a qualified channel id such as \"slack-acme/C123\"")
		}
		for i, d := range e.Channels[chID] {
			if err := ValidDestination(d); err != nil {
				p.bad(fmt.Sprintf("chicks.egress.channels.%s[%d]", chID, i), "%v", err)
			}
		}
	}
	for _, name := range sortedKeys(e.Hosts) {
		if err := validHostName(name); err != nil {
			p.bad("chicks.egress.hosts."+name, "%v", err)
		}
		if net.ParseIP(e.Hosts[name]) == nil {
			p.bad("chicks.egress.hosts."+name, "must be an IP address, got %q", e.Hosts[name])
		}
	}
	if _, err := e.MaxBytesValue(); err != nil {
		p.bad("chicks.egress.maxBytes", "%v", err)
	}
	if e.RequestTimeout.invalid != "" || e.RequestTimeout.Duration < 0 {
		p.bad("chicks.egress.requestTimeout", "must be a positive duration such as \"10m\"")
	}
	if n, err := e.LogMaxBytesValue(); err != nil {
		p.bad("chicks.egress.logMaxBytes", "%v", err)
	} else if n < MinEgressLogBytes {
		p.bad("chicks.egress.logMaxBytes", "must be at least %d bytes (room for the summary of what was not logged), got %d", MinEgressLogBytes, n)
	}
	if e.MaxPendingPerChick < 0 {
		p.bad("chicks.egress.maxPendingPerChick", "must be a positive number of requests, got %d", e.MaxPendingPerChick)
	}
	if e.MaxPendingPerChannel < 0 {
		p.bad("chicks.egress.maxPendingPerChannel", "must be a positive number of requests, got %d", e.MaxPendingPerChannel)
	}
}

// MinEgressLogBytes is the least chicks.egress.logMaxBytes may be.
const MinEgressLogBytes = 16 << 10

// LogMaxBytesValue is LogMaxBytes in bytes (empty: the default).
func (e Egress) LogMaxBytesValue() (int64, error) {
	if e.LogMaxBytes == "" {
		return ParseBytes(DefaultEgressLogMaxBytes)
	}
	return ParseBytes(e.LogMaxBytes)
}

// PendingCaps are MaxPendingPerChick and MaxPendingPerChannel, a zero or
// less taking the default.
func (e Egress) PendingCaps() (perChick, perChannel int) {
	perChick, perChannel = e.MaxPendingPerChick, e.MaxPendingPerChannel
	if perChick <= 0 {
		perChick = DefaultAccessPendingPerChick
	}
	if perChannel <= 0 {
		perChannel = DefaultAccessPendingPerChannel
	}
	return perChick, perChannel
}

func (c *Config) validateChickEvents(p *problems) {
	e := c.Chicks.Events
	if _, err := e.MaxEventBytesValue(); err != nil {
		p.bad("chicks.events.maxEventBytes", "%v", err)
	}
	if e.PerSecond < 0 {
		p.bad("chicks.events.perSecond", "must be a positive number of events a second, got %d", e.PerSecond)
	}
	if e.Burst < 0 {
		p.bad("chicks.events.burst", "must be a positive number of events, got %d", e.Burst)
	}
	maxBytes, err := e.MaxBytesValue()
	if err != nil {
		p.bad("chicks.events.maxBytes", "%v", err)
	}
	if one, err1 := e.MaxEventBytesValue(); err == nil && err1 == nil && maxBytes < one {
		p.bad("chicks.events.maxBytes", "must be at least chicks.events.maxEventBytes (%d bytes), got %d bytes", one, maxBytes)
	}
}

func (c *Config) validateChickCalls(p *problems) {
	l := c.Chicks.Calls
	req, err := l.MaxRequestBytesValue()
	if err != nil {
		p.bad("chicks.calls.maxRequestBytes", "%v", err)
	} else if req < 64<<10 || req > 64<<20 {
		p.bad("chicks.calls.maxRequestBytes", "must be between 64k and 64m, got %d bytes", req)
	}
	if l.MaxImages < 0 {
		p.bad("chicks.calls.maxImages", "must be a positive number of images, got %d", l.MaxImages)
	}
	if _, err := l.MaxImageBytesValue(); err != nil {
		p.bad("chicks.calls.maxImageBytes", "%v", err)
	}
	held, err1 := l.MaxHeldBytesValue()
	if err1 != nil {
		p.bad("chicks.calls.maxHeldBytes", "%v", err1)
	}
	if err == nil && err1 == nil && held < req {
		p.bad("chicks.calls.maxHeldBytes", "must be at least chicks.calls.maxRequestBytes (%d bytes), got %d bytes", req, held)
	}
}

// MaxRequestBytesValue is MaxRequestBytes in bytes (empty: the default).
func (l ChickCalls) MaxRequestBytesValue() (int64, error) {
	return bytesOr(l.MaxRequestBytes, DefaultCallMaxRequestBytes)
}

// MaxImageBytesValue is MaxImageBytes in bytes (empty: the default).
func (l ChickCalls) MaxImageBytesValue() (int64, error) {
	return bytesOr(l.MaxImageBytes, DefaultCallMaxImageBytes)
}

// MaxHeldBytesValue is MaxHeldBytes in bytes (empty: the default).
func (l ChickCalls) MaxHeldBytesValue() (int64, error) {
	return bytesOr(l.MaxHeldBytes, DefaultCallMaxHeldBytes)
}

// MaxImagesValue is MaxImages (0: the default).
func (l ChickCalls) MaxImagesValue() int {
	if l.MaxImages == 0 {
		return DefaultCallMaxImages
	}
	return l.MaxImages
}

func bytesOr(s, def string) (int64, error) {
	if s == "" {
		s = def
	}
	return ParseBytes(s)
}

// MaxEventBytesValue is MaxEventBytes in bytes (empty: the default).
func (e ChickEvents) MaxEventBytesValue() (int64, error) {
	if e.MaxEventBytes == "" {
		return ParseBytes(DefaultEventMaxBytes)
	}
	return ParseBytes(e.MaxEventBytes)
}

// MaxBytesValue is MaxBytes in bytes (empty: the default).
func (e ChickEvents) MaxBytesValue() (int64, error) {
	if e.MaxBytes == "" {
		return ParseBytes(DefaultEventsMaxBytes)
	}
	return ParseBytes(e.MaxBytes)
}

func (c *Config) validateGate(p *problems) {
	g := c.Chicks.Gate
	for _, f := range []struct {
		name string
		v    int
	}{
		{"maxNestConnsPerChick", g.MaxNestConnsPerChick}, {"maxProxyConnsPerChick", g.MaxProxyConnsPerChick},
		{"maxPending", g.MaxPending}, {"maxConns", g.MaxConns},
	} {
		if f.v < 1 || f.v > 65536 {
			p.bad("chicks.gate."+f.name, "must be between 1 and 65536, got %d", f.v)
		}
	}
	if g.MaxConns < g.MaxNestConnsPerChick+g.MaxProxyConnsPerChick {
		p.bad("chicks.gate.maxConns", "%d is less than one chick's maxNestConnsPerChick + maxProxyConnsPerChick (%d)", g.MaxConns, g.MaxNestConnsPerChick+g.MaxProxyConnsPerChick)
	}
	if g.PrefaceTimeout.invalid != "" || g.PrefaceTimeout.Duration < 0 || g.PrefaceTimeout.Duration > time.Minute {
		p.bad("chicks.gate.prefaceTimeout", "must be a positive duration up to 1m such as \"5s\"")
	}
}

// MaxBytesValue is MaxBytes in bytes; 0 means no cap ("unlimited").
func (e Egress) MaxBytesValue() (int64, error) {
	if strings.EqualFold(strings.TrimSpace(e.MaxBytes), "unlimited") {
		return 0, nil
	}
	if e.MaxBytes == "" {
		return ParseBytes(DefaultEgressMaxBytes)
	}
	return ParseBytes(e.MaxBytes)
}

// ValidDestination checks one allowlist entry: "name", "*.domain",
// "address", each with an optional ":port"; IPv6 addresses in brackets
// when a port follows ("[2001:db8::1]:443").
func ValidDestination(d string) error {
	host, port, err := SplitDestination(d)
	if err != nil {
		return err
	}
	_ = port
	if net.ParseIP(host) != nil {
		return nil
	}
	name := strings.TrimPrefix(host, "*.")
	if strings.Contains(name, "*") {
		return fmt.Errorf("a wildcard may only start a name (\"*.example.com\"), got %q", d)
	}
	return validHostName(name)
}

// SplitDestination splits "host[:port]" (port 0: any).
func SplitDestination(d string) (host string, port int, err error) {
	d = strings.TrimSpace(d)
	if d == "" {
		return "", 0, errors.New("empty destination")
	}
	if ip := net.ParseIP(d); ip != nil {
		return d, 0, nil
	}
	host = d
	if h, ps, err := net.SplitHostPort(d); err == nil {
		n, perr := strconv.Atoi(ps)
		if perr != nil || n < 1 || n > 65535 {
			return "", 0, fmt.Errorf("port must be 1-65535, got %q", d)
		}
		host, port = h, n
	} else if strings.Contains(d, ":") {
		return "", 0, fmt.Errorf("must be \"host\" or \"host:port\", got %q", d)
	}
	return strings.ToLower(host), port, nil
}

func validHostName(name string) error {
	if name == "" || len(name) > 253 {
		return fmt.Errorf("bad host name %q", name)
	}
	for _, label := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("bad host name %q", name)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return fmt.Errorf("bad host name %q", name)
			}
		}
	}
	return nil
}

func (c *Config) validateChickFiles(p *problems) {
	quota, err := c.Chicks.Files.QuotaValue()
	switch {
	case err != nil:
		p.bad("chicks.files.quota", "%v", err)
	case quota < 1<<20 || quota > MaxChannelQuota:
		p.bad("chicks.files.quota", "must be between 1m and 1g (what a chick can receive at start), got %d bytes", quota)
	}
	s := c.Chicks.Skills
	if s.MaxCount < 0 {
		p.bad("chicks.skills.maxCount", "must be a positive number of skills, got %d", s.MaxCount)
	}
	maxBytes, err := s.MaxBytesValue()
	switch {
	case err != nil:
		p.bad("chicks.skills.maxBytes", "%v", err)
	case maxBytes < 1<<20:
		p.bad("chicks.skills.maxBytes", "must be at least 1m (one skill may hold 1 MiB), got %d bytes", maxBytes)
	case quota > 0 && maxBytes > quota:
		p.bad("chicks.skills.maxBytes", "must be at most chicks.files.quota (%d bytes): skills count in it, got %d bytes", quota, maxBytes)
	}
}

// QuotaValue is Quota in bytes (empty: the default).
func (f ChickFiles) QuotaValue() (int64, error) {
	if f.Quota == "" {
		return ParseBytes(DefaultChannelQuota)
	}
	return ParseBytes(f.Quota)
}

// MaxCountValue is MaxCount (0: the default).
func (s ChickSkills) MaxCountValue() int {
	if s.MaxCount <= 0 {
		return DefaultSkillsMaxCount
	}
	return s.MaxCount
}

// MaxBytesValue is MaxBytes in bytes (empty: the default).
func (s ChickSkills) MaxBytesValue() (int64, error) {
	if s.MaxBytes == "" {
		return ParseBytes(DefaultSkillsMaxBytes)
	}
	return ParseBytes(s.MaxBytes)
}
