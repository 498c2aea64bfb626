package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func load(t *testing.T, body string, env map[string]string) (*Config, error) {
	t.Helper()
	dir := t.TempDir()
	if body != "" {
		if err := os.WriteFile(filepath.Join(dir, File), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return Load(dir, func(k string) string { return env[k] })
}

func TestBadConfigsNameTheField(t *testing.T) {
	t.Parallel()
	const secret = "xoxb-123-super-secret"
	tests := []struct {
		name string
		body string
		// want lists substrings the error must contain (the field path).
		want []string
	}{
		{"syntax", `{"adapters": {,}}`, []string{"(file): JSON syntax error at line 1, column 15"}},
		{"truncated", `{"adapters": {`, []string{"(file): JSON syntax error at line 1, column 14: unexpected end"}},
		{"not an object", `[1,2]`, []string{"(file): must be a JSON object"}},
		{"empty file", ` `, []string{"(file): empty file"}},
		{"unknown top-level field", `{"adaptors": {}}`, []string{"adaptors: unknown field"}},
		{"unknown nested field", `{"chicks": {"maxConcurent": 3}}`, []string{`chicks.maxConcurent: unknown field (did you mean "maxConcurrent"? docs/configuration.md lists every field)`}},
		{"unknown field far from any", `{"chicks": {"zzzzzz": 3}}`, []string{"chicks.zzzzzz: unknown field (check the spelling; docs/configuration.md lists every field)"}},
		{"a typo does not hide the rest", `{"modle": {}, "adapters": {"x": {"type": "irc"}}, "budgets": {"chickTokens": "lots"}}`, []string{
			`modle: unknown field (did you mean "model"?`, `adapters.x.type: unknown adapter type "irc"`, `budgets.chickTokens: "lots" is not a token count`}},
		{"unknown field in a map entry", `{"adapters": {"d": {"type": "discord", "botToken": "x", "guild": "1"}}}`, []string{"adapters.d.guild: unknown field"}},
		{"wrong type in a map entry", `{"adapters": {"d": {"type": "discord", "botToken": "x", "admins": "bob"}}}`, []string{"adapters.d.admins: must be a list, not JSON string"}},
		{"wrong type in a list", `{"chicks": {"hosts": [{"capacity": "six"}]}}`, []string{"chicks.hosts[0].capacity: must be a whole number, not JSON string"}},
		{"missing type", `{"adapters": {"x": {}}}`, []string{"adapters.x.type: missing"}},
		{"unknown adapter type", `{"adapters": {"x": {"type": "irc"}}}`, []string{"adapters.x.type: unknown adapter type \"irc\""}},
		{"bad adapter name", `{"adapters": {"my bot": {"type": "cli"}}}`, []string{"adapters.my bot: adapter name"}},
		{"discord without token", `{"adapters": {"d": {"type": "discord"}}}`, []string{"adapters.d.botToken: missing"}},
		{"slack tokens", `{"adapters": {"s": {"type": "slack", "botToken": "` + secret + `", "appToken": "nope"}}}`, []string{"adapters.s.appToken: a Slack app-level token starts with xapp-"}},
		{"dm word", `{"adapters": {"d": {"type": "discord", "botToken": "x", "dm": "friends"}}}`, []string{`adapters.d.dm: must be "everyone", "none" or a list of user ids, not "friends"`}},
		{"dm number", `{"adapters": {"d": {"type": "discord", "botToken": "x", "dm": 3}}}`, []string{"adapters.d.dm: must be"}},
		{"dm empty id", `{"adapters": {"d": {"type": "discord", "botToken": "x", "dm": [""]}}}`, []string{"adapters.d.dm[0]: empty user id"}},
		{"api url", `{"adapters": {"d": {"type": "discord", "botToken": "x", "apiURL": "ftp://x"}}}`, []string{"adapters.d.apiURL: must be an http(s) URL"}},
		{"model provider", `{"model": {"provider": "gemini"}}`, []string{"model.provider: unknown provider \"gemini\""}},
		{"openai without an endpoint", `{"model": {"provider": "openai"}}`, []string{`model.provider: "openai": providers.openai has no endpoint`}},
		{"openai endpoint unknown", `{"providers": {"openai": {"vllm": {"baseURL": "http://127.0.0.1:8000/v1"}}}, "model": {"provider": "openai:llama"}}`, []string{
			`model.provider: "openai:llama": providers.openai has no endpoint "llama" (it has openai:vllm)`}},
		{"openai ambiguous", `{"providers": {"openai": {"a": {"baseURL": "http://127.0.0.1:1/v1"}, "b": {"baseURL": "http://127.0.0.1:2/v1"}}}, "model": {"provider": "openai"}}`, []string{
			`model.provider: "openai": providers.openai has 2 endpoints; name one as "openai:<name>" (openai:a, openai:b)`}},
		{"openai bad url and fallback", `{"providers": {"openai": {"v": {"baseURL": "gpu:8000"}}}, "model": {"fallbacks": [{"provider": "openai:v"}, {"provider": "nope", "model": "m"}]}}`, []string{
			`providers.openai.v.baseURL: must be an http(s) URL`, `model.fallbacks[0].model: missing`, `model.fallbacks[1].provider: unknown provider "nope"`}},
		{"negative parallel", `{"model": {"maxParallel": -1}}`, []string{"model.maxParallel: must be positive"}},
		{"think word", `{"model": {"think": "yes"}, "chicks": {"tiers": {"local": {"model": "m", "think": "maybe"}}}}`, []string{
			`model.think: "yes" is not a think setting: use "auto", "on" or "off"`, `chicks.tiers.local.think: "maybe" is not a think setting`}},
		{"think on for anthropic", `{"providers": {"anthropic": {"apiKey": "k"}}, "chicks": {"tiers": {"hard": {"provider": "anthropic", "model": "claude", "think": "on"}}}}`, []string{
			`chicks.tiers.hard.think: "on" is for models served by Ollama`}},
		{"anthropic without key", `{"model": {"provider": "anthropic", "id": "claude"}}`, []string{"providers.anthropic.apiKey: missing, needed by model.provider"}},
		{"ollama url", `{"providers": {"ollama": {"url": "localhost:11434"}}}`, []string{"providers.ollama.url: must be an http(s) URL"}},
		{"duration", `{"chicks": {"timeout": "soon"}}`, []string{`chicks.timeout: must be a duration such as "90s" or "30m", not "soon"`}},
		{"duration number", `{"events": {"oneShotGrace": 600}}`, []string{"events.oneShotGrace: must be a duration string"}},
		{"negative duration", `{"chicks": {"keepFor": "-1m"}}`, []string{"chicks.keepFor: must not be negative"}},
		{"default tier missing", `{"chicks": {"defaultTier": "big"}}`, []string{`chicks.defaultTier: "big" is not in chicks.tiers`}},
		{"tier without model", `{"chicks": {"tiers": {"local": {"provider": "ollama"}}}}`, []string{"chicks.tiers.local.model: missing"}},
		{"negative price", `{"chicks": {"tiers": {"local": {"model": "m", "price": {"inputPerMTok": -1}}}}}`, []string{"chicks.tiers.local.price: must not be negative"}},
		{"network", `{"chicks": {"network": "overlay"}}`, []string{"chicks.network: must be"}},
		{"results", `{"chicks": {"results": "forward"}}`, []string{"chicks.results: must be \"answer\" or \"relay\""}},
		{"plain tcp docker", `{"chicks": {"hosts": [{"address": "tcp://10.0.0.2:2375"}]}}`, []string{"chicks.hosts[0].address: tcp:// Docker hosts need TLS client certificates"}},
		{"docker scheme", `{"chicks": {"hosts": [{"address": "http://x"}]}}`, []string{"chicks.hosts[0].address: scheme must be"}},
		{"host tier", `{"chicks": {"hosts": [{"tiers": ["gpu"]}]}}`, []string{`chicks.hosts[0].tiers[0]: unknown tier "gpu"`}},
		{"ssh options on a unix host", `{"chicks": {"hosts": [{"address": "unix:///var/run/docker.sock", "sshIdentityFile": "/k"}]}}`, []string{"chicks.hosts[0].sshIdentityFile: sshIdentityFile and sshKnownHostsFile apply to ssh:// addresses only"}},
		{"duplicate host", `{"chicks": {"hosts": [{"name": "a"}, {"name": "a"}]}}`, []string{"chicks.hosts[1].name: duplicate host name"}},
		{"host kind", `{"chicks": {"hosts": [{"kind": "nomad"}]}}`, []string{`chicks.hosts[0].kind: must be "docker" or "kubernetes", got "nomad"`}},
		{"kubernetes field on a docker host", `{"chicks": {"hosts": [{"namespace": "chicks"}]}}`, []string{`chicks.hosts[0].namespace: applies to hosts of kind "kubernetes" only`}},
		{"docker field on a kubernetes host", `{"chicks": {"hosts": [{"kind": "kubernetes", "address": "unix:///x"}]}}`, []string{"chicks.hosts[0].address: not used by a kubernetes host"}},
		{"kubernetes namespace", `{"chicks": {"hosts": [{"kind": "kubernetes", "namespace": "Chicks_1"}]}}`, []string{"chicks.hosts[0].namespace: must be a Kubernetes namespace name"}},
		{"kubernetes pull policy", `{"chicks": {"hosts": [{"kind": "kubernetes", "imagePullPolicy": "Sometimes"}]}}`, []string{`chicks.hosts[0].imagePullPolicy: must be "IfNotPresent", "Always" or "Never", got "Sometimes"`}},
		{"kubernetes workspace", `{"chicks": {"hosts": [{"kind": "kubernetes", "workspaceSize": "big"}]}}`, []string{"chicks.hosts[0].workspaceSize: must be a size"}},
		{"kubernetes requests", `{"chicks": {"hosts": [{"kind": "kubernetes", "requests": {"memory": "x", "cpus": -1}}]}}`, []string{"chicks.hosts[0].requests.memory:", "chicks.hosts[0].requests.cpus: must not be negative"}},
		{"kubernetes host network", `{"chicks": {"network": "host", "hosts": [{"kind": "kubernetes"}]}}`, []string{`chicks.hosts[0].kind: chicks.network "host" is refused on a kubernetes host`}},
		{"kubernetes user name", `{"chicks": {"hardening": {"user": "nobody"}, "hosts": [{"kind": "kubernetes"}]}}`, []string{"chicks.hardening.user: a kubernetes host needs a numeric uid[:gid]"}},
		{"kubernetes placement tier", `{"chicks": {"hosts": [{"kind": "kubernetes", "placement": {"gpu": {}}}]}}`, []string{`chicks.hosts[0].placement.gpu: unknown tier "gpu"`}},
		{"kubernetes toleration", `{"chicks": {"hosts": [{"kind": "kubernetes", "placement": {"*": {"tolerations": [{"key": "k", "operator": "Maybe", "effect": "Never"}, {"operator": "Exists", "value": "v", "tolerationSeconds": 5}]}}}]}}`, []string{`chicks.hosts[0].placement.*.tolerations[0].operator: must be "Equal" or "Exists"`, "chicks.hosts[0].placement.*.tolerations[0].effect: must be", "chicks.hosts[0].placement.*.tolerations[1].value: must be empty", `chicks.hosts[0].placement.*.tolerations[1].tolerationSeconds: applies to effect "NoExecute" only`}},
		{"kubernetes extended resource", `{"chicks": {"hosts": [{"kind": "kubernetes", "placement": {"*": {"extendedResources": {"gpu": 1, "nvidia.com/gpu": 0}}}}]}}`, []string{"chicks.hosts[0].placement.*.extendedResources.gpu: an extended resource is domain-qualified", "chicks.hosts[0].placement.*.extendedResources.nvidia.com/gpu: must be positive"}},
		{"memory size", `{"chicks": {"resources": {"memory": "lots"}}}`, []string{"chicks.resources.memory: must be a size"}},
		{"workspace size", `{"chicks": {"resources": {"workspaceBytes": "0"}}}`, []string{"chicks.resources.workspaceBytes: must be a size"}},
		{"workspace size unit", `{"chicks": {"resources": {"workspaceBytes": "2 gigs"}}}`, []string{"chicks.resources.workspaceBytes: must be a size"}},
		{"root user", `{"chicks": {"hardening": {"user": "0:0"}}}`, []string{"chicks.hardening.user: chicks must not run as root"}},
		{"host tools", `{"chicks": {"hostTools": ["notes"]}}`, []string{"chicks.hostTools[0]: must be \"server.tool\""}},
		{"grpc listen", `{"grpc": {"listen": "7777"}}`, []string{"grpc.listen: must be host:port"}},
		{"budget tier", `{"budgets": {"tierDailyTokens": {"gpu": 5}}}`, []string{"budgets.tierDailyTokens.gpu: unknown tier"}},
		{"negative budget", `{"budgets": {"chickTokens": -5}}`, []string{"budgets.chickTokens: must not be negative"}},
		{"negative user budget", `{"budgets": {"userDailyTokens": -1}}`, []string{"budgets.userDailyTokens: must not be negative"}},
		{"negative per-user cap", `{"chicks": {"maxPerUser": -1}}`, []string{"chicks.maxPerUser: must not be negative"}},
		{"gate limits", `{"chicks": {"gate": {"maxNestConnsPerChick": -1, "maxPending": 100000, "prefaceTimeout": "1h"}}}`, []string{"chicks.gate.maxNestConnsPerChick: must be between 1 and 65536, got -1", "chicks.gate.maxPending: must be between 1 and 65536, got 100000", "chicks.gate.prefaceTimeout: must be a positive duration up to 1m"}},
		{"gate total under one chick's", `{"chicks": {"gate": {"maxConns": 10}}}`, []string{"chicks.gate.maxConns: 10 is less than one chick's maxNestConnsPerChick + maxProxyConnsPerChick (36)"}},
		{"channel quota over what a chick receives", `{"chicks": {"files": {"quota": "2g"}}}`, []string{"chicks.files.quota: must be between 1m and 1g (what a chick can receive at start), got 2147483648 bytes"}},
		{"channel quota size", `{"chicks": {"files": {"quota": "lots"}}}`, []string{"chicks.files.quota: must be a size"}},
		{"skills caps", `{"chicks": {"files": {"quota": "16m"}, "skills": {"maxCount": -1, "maxBytes": "32m"}}}`, []string{"chicks.skills.maxCount: must be a positive number of skills, got -1", "chicks.skills.maxBytes: must be at most chicks.files.quota (16777216 bytes)"}},
		{"skills bytes under one skill", `{"chicks": {"skills": {"maxBytes": "100k"}}}`, []string{"chicks.skills.maxBytes: must be at least 1m"}},
		{"mcp neither", `{"mcpServers": {"notes": {}}}`, []string{"mcpServers.notes: needs \"command\""}},
		{"mcp both", `{"mcpServers": {"notes": {"command": "x", "url": "http://127.0.0.1:1"}}}`, []string{"mcpServers.notes: has both"}},
		{"log format", `{"log": {"format": "xml"}}`, []string{"log.format: must be"}},
		{"log level", `{"log": {"level": "loud"}}`, []string{"log.level: must be"}},
		{"metrics not loopback", `{"metrics": {"listen": "0.0.0.0:9464"}}`, []string{`metrics.listen: "0.0.0.0:9464" is not a loopback address`, "set metrics.token"}},
		{"metrics token short", `{"metrics": {"listen": "127.0.0.1:9464", "token": "short"}}`, []string{"metrics.token: must be at least 16 characters"}},
		{"several at once", `{"chicks": {"timeout": "x", "network": "y"}, "log": {"level": "z"}}`, []string{"chicks.timeout:", "chicks.network:", "log.level:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, tt.body, nil)
			if err == nil {
				t.Fatalf("Load(%s) = nil error, want one naming %q", tt.body, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Load(%s) error:\n%v\nwant it to contain %q", tt.body, err, w)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error contains the token: %v", err)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := load(t, "", nil)
	if err != nil {
		t.Fatalf("Load without config.json: %v", err)
	}
	if cfg.Model.Provider != "ollama" || cfg.Model.ID != DefaultModelID || cfg.Providers.Ollama.URL != DefaultOllamaURL {
		t.Errorf("model defaults = %+v %+v", cfg.Model, cfg.Providers.Ollama)
	}
	if cfg.Chicks.Image != DefaultChickImage || cfg.Chicks.MaxConcurrent != 6 || cfg.Chicks.Timeout.Duration != 30*time.Minute {
		t.Errorf("chick defaults = %+v", cfg.Chicks)
	}
	if tier := cfg.Chicks.Tiers[DefaultTier]; tier.Model != DefaultChickModel || tier.Provider != "ollama" {
		t.Errorf("default tier = %+v", tier)
	}
	if len(cfg.Chicks.Hosts) != 1 || cfg.Chicks.Hosts[0].Capacity != 6 {
		t.Errorf("default hosts = %+v", cfg.Chicks.Hosts)
	}
	if !filepath.IsAbs(cfg.Admin.Socket) || filepath.Base(cfg.Admin.Socket) != "mother.sock" {
		t.Errorf("admin socket = %q, want an absolute path to mother.sock", cfg.Admin.Socket)
	}
	if cfg.Dispatch.QueueSize != 5 || cfg.Events.MaxQueuedPerChannel != 5 || cfg.Events.OneShotGrace.Duration != 10*time.Minute {
		t.Errorf("queue defaults = %+v %+v", cfg.Dispatch, cfg.Events)
	}
	if cfg.Adapters["x"].DM.Allows("anyone") {
		t.Error("default dm policy allows DMs; want none")
	}
}

func TestSecretsNeverPrint(t *testing.T) {
	t.Parallel()
	s := Secret("xoxb-secret")
	for _, got := range []string{s.String(), s.GoString()} {
		if strings.Contains(got, "xoxb") {
			t.Errorf("secret printed as %q", got)
		}
	}
	b, _ := s.MarshalJSON()
	if strings.Contains(string(b), "xoxb") {
		t.Errorf("secret marshalled as %s", b)
	}
}

func TestDMPolicy(t *testing.T) {
	t.Parallel()
	cfg, err := load(t, `{"adapters": {
		"a": {"type": "cli", "dm": "everyone"},
		"b": {"type": "cli", "dm": "none"},
		"c": {"type": "cli", "dm": ["U1", "U2"]}}}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		adapter, user string
		want          bool
	}{{"a", "U9", true}, {"b", "U1", false}, {"c", "U2", true}, {"c", "U3", false}}
	for _, c := range cases {
		if got := cfg.Adapters[c.adapter].DM.Allows(c.user); got != c.want {
			t.Errorf("adapter %s Allows(%s) = %v, want %v", c.adapter, c.user, got, c.want)
		}
	}
}

func TestKubernetesHost(t *testing.T) {
	t.Parallel()
	body := `{"chicks": {"tiers": {"local": {"model": "m"}, "gpu": {"model": "g"}},
		"hosts": [{"name": "box"}, {"name": "cluster", "kind": "kubernetes", "kubeconfig": "/etc/mother/kubeconfig", "namespace": "chicks",
		"placement": {"gpu": {"nodeSelector": {"gpu": "true"}, "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}], "extendedResources": {"nvidia.com/gpu": 1}},
		"*": {"nodeSelector": {"pool": "chicks"}}}}]}}`
	cfg, err := load(t, body, nil)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	box, cl := cfg.Chicks.Hosts[0], cfg.Chicks.Hosts[1]
	if box.Kind != HostDocker || box.IsKubernetes() || box.ImagePullPolicy != "" || box.WorkspaceSize != "" {
		t.Errorf("docker host = %+v, want kind docker and no kubernetes defaults", box)
	}
	if !cl.IsKubernetes() || cl.ImagePullPolicy != "IfNotPresent" || cl.WorkspaceSize != "" || cfg.Chicks.Resources.WorkspaceBytes != DefaultWorkspaceBytes || cl.Capacity != DefaultMaxConcurrent {
		t.Errorf("kubernetes host = %+v, want its defaults", cl)
	}
	if got := cl.PlacementFor("gpu"); got.ExtendedResources["nvidia.com/gpu"] != 1 || got.NodeSelector["gpu"] != "true" || len(got.Tolerations) != 1 {
		t.Errorf("PlacementFor(gpu) = %+v", got)
	}
	if got := cl.PlacementFor("local"); got.NodeSelector["pool"] != "chicks" || len(got.ExtendedResources) != 0 {
		t.Errorf("PlacementFor(local) = %+v, want the * entry", got)
	}
	if got := box.PlacementFor("gpu"); len(got.NodeSelector) != 0 {
		t.Errorf("docker PlacementFor(gpu) = %+v, want none", got)
	}
}

func TestNumericUser(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want [2]int64
		ok   bool
	}{
		{"65534:65534", [2]int64{65534, 65534}, true},
		{"1000", [2]int64{1000, -1}, true},
		{"nobody", [2]int64{}, false},
		{"1000:staff", [2]int64{}, false},
		{"-1", [2]int64{}, false},
	} {
		got, err := NumericUser(tt.in)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("NumericUser(%q) = %v, %v; want %v ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// TestBudgetsTakeSetupsNotation: token counts may be written as mother
// setup shows them ("2m", "500k", "1.5m"), or as numbers.
func TestBudgetsTakeSetupsNotation(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, File), []byte(`{"budgets": {"chickTokens": "2m", "channelDailyTokens": 20000000, "userDailyTokens": "1.5m", "tierDailyTokens": {"local": "500k"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(dir, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.Budgets
	if b.ChickTokens != 2_000_000 || b.ChannelDailyTokens != 20_000_000 || b.UserDailyTokens != 1_500_000 || b.TierDailyTokens["local"] != 500_000 {
		t.Errorf("budgets = %+v", b)
	}
}
