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
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"
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
	// Budgets are hard token and time caps.
	Budgets Budgets `json:"budgets"`
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
}

// Providers holds provider endpoints and keys.
type Providers struct {
	Ollama    Ollama    `json:"ollama"`
	Anthropic Anthropic `json:"anthropic"`
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

// Chicks configures the workers.
type Chicks struct {
	// Image is the chick container image.
	Image string `json:"image"`
	// DefaultTier is the tier used when spawn_chick names none.
	DefaultTier string `json:"defaultTier"`
	// Tiers maps a tier name to the model that serves it.
	Tiers map[string]Tier `json:"tiers"`
	// MaxConcurrent caps running chicks across all channels.
	MaxConcurrent int `json:"maxConcurrent"`
	// MaxPerChannel caps running chicks per channel.
	MaxPerChannel int `json:"maxPerChannel"`
	// MaxPerUser caps the chicks one requester has running or queued,
	// across channels (0: no cap). A requester is an adapter's user;
	// chicks spawned by events have none and count against no one.
	MaxPerUser int `json:"maxPerUser"`
	// QueueSize caps chicks waiting for a free slot.
	QueueSize int `json:"queueSize"`
	// Timeout is a chick's wall-clock limit.
	Timeout Duration `json:"timeout"`
	// MaxTurns caps a chick's model turns.
	MaxTurns int `json:"maxTurns"`
	// KeepFor keeps an ended chick's container for inspection this long.
	KeepFor Duration `json:"keepFor"`
	// HeartbeatInterval is how often a chick reports; three missed means
	// hung.
	HeartbeatInterval Duration `json:"heartbeatInterval"`
	// KillGrace is the time between cancel and kill.
	KillGrace Duration `json:"killGrace"`
	// Hosts are the engines chicks run on: Docker hosts and Kubernetes
	// clusters.
	Hosts []DockerHost `json:"hosts"`
	// Resources are per-container limits.
	Resources Resources `json:"resources"`
	// Hardening switches; all on by default.
	Hardening Hardening `json:"hardening"`
	// Network is how chicks are networked: "isolated" (default: a chick has
	// no network interface but its own loopback and reaches Mother and the
	// allowed destinations only through the gate of its Docker host),
	// "host" (unsafe: the host's whole network; logged at start), "bridge"
	// or "none" (Docker's own modes; with "none" a chick cannot reach
	// Mother).
	Network string `json:"network"`
	// Egress is what isolated chicks may reach through the gate.
	Egress Egress `json:"egress"`
	// HostTools lists the MCP tools chicks may ask Mother to run
	// ("server.tool" or "server.*"). Default: none.
	HostTools []string `json:"hostTools"`
	// Results is what Mother does with a chick's result when it ends:
	// "answer" (default: she reads it in a run of her own and answers the
	// channel in her own words) or "relay" (the result is posted as is).
	Results string `json:"results"`
}

// Tier is one model a chick can use.
type Tier struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// Description tells Mother's model when to pick this tier.
	Description string `json:"description"`
	// Price, if set, is what the model costs; the metrics then count the
	// tier's cost (mother_chick_model_cost_usd_total).
	Price *Price `json:"price"`
	// Egress adds destinations the chicks of this tier may reach.
	Egress TierEgress `json:"egress"`
}

// TierEgress is a tier's addition to chicks.egress.
type TierEgress struct {
	// Allow adds to chicks.egress.allow for chicks of this tier.
	Allow []string `json:"allow"`
}

// Egress is what isolated chicks may reach through their host's gate
// (HTTP and HTTPS through its proxy). Nothing by default: a chick reaches
// Mother and nothing else.
type Egress struct {
	// Allow lists destinations every chick may reach: a host name
	// ("pypi.org"), a wildcard for its subdomains ("*.githubusercontent.com"),
	// or an exact address ("192.0.2.7"), each with an optional ":port"
	// (any port without). A name that resolves to a private, loopback or
	// link-local address is refused unless that exact address is listed
	// too.
	Allow []string `json:"allow"`
	// Channels adds destinations per qualified channel id
	// ("slack-acme/C123").
	Channels map[string][]string `json:"channels"`
	// Hosts resolves names for the gate without DNS, like /etc/hosts
	// ("mirror.lan": "192.0.2.7"): for a mirror on the LAN. Listing a name
	// here does not allow it.
	Hosts map[string]string `json:"hosts"`
	// MaxBytes caps the bytes a chick sends out through the gate ("100m");
	// 0 or empty: the default. "unlimited": no cap.
	MaxBytes string `json:"maxBytes"`
	// RequestTimeout is how long a chick's request_access waits for an
	// admin's answer.
	RequestTimeout Duration `json:"requestTimeout"`
}

// Price is a model's price in US dollars per million tokens.
type Price struct {
	InputPerMTok  float64 `json:"inputPerMTok"`
	OutputPerMTok float64 `json:"outputPerMTok"`
}

// DockerHost is one Docker engine.
type DockerHost struct {
	// Name identifies the host in logs and momctl.
	Name string `json:"name"`
	// Address is "unix:///var/run/docker.sock", "tcp://host:2376" (TLS
	// required) or "ssh://user@host". Empty: DOCKER_HOST or the local socket.
	Address string `json:"address"`
	// TLS client certificate files for tcp:// hosts.
	TLSCA   string `json:"tlsCA"`
	TLSCert string `json:"tlsCert"`
	TLSKey  string `json:"tlsKey"`
	// Capacity is how many chicks the host runs at once.
	Capacity int `json:"capacity"`
	// Tiers the host can serve; empty: all.
	Tiers []string `json:"tiers"`
	// MotherAddress is the gRPC address chicks on this host dial; empty:
	// grpc.advertise.
	MotherAddress string `json:"motherAddress"`
	// SSHIdentityFile and SSHKnownHostsFile, for ssh:// hosts: the private
	// key to log in with and the known_hosts file that must hold the host's
	// key (checked strictly). Empty: ssh's defaults for Mother's user.
	SSHIdentityFile   string `json:"sshIdentityFile"`
	SSHKnownHostsFile string `json:"sshKnownHostsFile"`

	// Kind is the host's engine: "docker" (default) or "kubernetes" (a
	// cluster: chicks are Pods its scheduler places; docs/kubernetes.md).
	// The fields below are for kind "kubernetes" only.
	Kind string `json:"kind"`
	// Kubeconfig is the path of the kubeconfig file to reach the cluster
	// with (its current context); empty: the in-cluster configuration
	// (Mother runs in the cluster, with a service account).
	Kubeconfig string `json:"kubeconfig"`
	// Namespace is where chick Pods go; empty: the kubeconfig context's
	// namespace (in the cluster: Mother's own), else "default".
	Namespace string `json:"namespace"`
	// ImagePullPolicy is the chick Pods' "IfNotPresent" (default),
	// "Always" or "Never".
	ImagePullPolicy string `json:"imagePullPolicy"`
	// WorkspaceSize caps a chick's /workspace (an emptyDir), such as "1g".
	WorkspaceSize string `json:"workspaceSize"`
	// Requests are what the scheduler reserves for each chick Pod; empty:
	// the limits (chicks.resources).
	Requests Requests `json:"requests"`
	// Placement says where the chicks of a tier go on the cluster, by
	// tier name; "*" applies to the tiers not listed.
	Placement map[string]Placement `json:"placement"`
}

// Requests are a chick Pod's resource requests on a Kubernetes host.
type Requests struct {
	// Memory is a byte size such as "512m".
	Memory string `json:"memory"`
	// CPUs is a fraction of CPUs, such as 0.5.
	CPUs float64 `json:"cpus"`
}

// Host kinds (chicks.hosts[].kind).
const (
	HostDocker     = "docker"
	HostKubernetes = "kubernetes"
)

// IsKubernetes reports whether h is a Kubernetes cluster.
func (h DockerHost) IsKubernetes() bool { return h.Kind == HostKubernetes }

// PlacementFor is the placement of tier's chicks on h: its own entry, or
// the "*" one.
func (h DockerHost) PlacementFor(tier string) Placement {
	if p, ok := h.Placement[tier]; ok {
		return p
	}
	return h.Placement["*"]
}

// Placement puts a tier's chick Pods on the right nodes of a Kubernetes
// host: GPU chicks on GPU nodes.
type Placement struct {
	// NodeSelector are node labels the Pod's node must have.
	NodeSelector map[string]string `json:"nodeSelector"`
	// Tolerations let the Pod onto nodes with these taints.
	Tolerations []Toleration `json:"tolerations"`
	// ExtendedResources are requested (and limited) per Pod, such as
	// {"nvidia.com/gpu": 1}.
	ExtendedResources map[string]int64 `json:"extendedResources"`
}

// Toleration is a Kubernetes toleration (core/v1 Toleration).
type Toleration struct {
	Key string `json:"key"`
	// Operator is "Equal" (default) or "Exists".
	Operator string `json:"operator"`
	Value    string `json:"value"`
	// Effect is "NoSchedule", "PreferNoSchedule", "NoExecute" or empty
	// (all).
	Effect string `json:"effect"`
	// TolerationSeconds bounds a NoExecute toleration; 0: for ever.
	TolerationSeconds int64 `json:"tolerationSeconds"`
}

// Resources are container limits.
type Resources struct {
	// Memory is a byte size such as "2g" or "512m".
	Memory string `json:"memory"`
	// CPUs is a fraction of CPUs, such as 2 or 0.5.
	CPUs float64 `json:"cpus"`
	// Pids caps processes in the container.
	Pids int64 `json:"pids"`
	// Tmpfs is the size of /tmp.
	Tmpfs string `json:"tmpfs"`
}

// Hardening switches for chick containers. Nil means on.
type Hardening struct {
	DropCapabilities *bool  `json:"dropCapabilities"`
	NoNewPrivileges  *bool  `json:"noNewPrivileges"`
	ReadOnlyRoot     *bool  `json:"readOnlyRoot"`
	User             string `json:"user"`
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

// Budgets are hard caps. Zero means unlimited.
type Budgets struct {
	// ChickTokens caps the tokens of one chick.
	ChickTokens int64 `json:"chickTokens"`
	// ChannelDailyTokens caps chick tokens per channel per day.
	ChannelDailyTokens int64 `json:"channelDailyTokens"`
	// TierDailyTokens caps tokens per tier per day across all channels.
	TierDailyTokens map[string]int64 `json:"tierDailyTokens"`
	// UserDailyTokens caps chick tokens per requester per day across
	// channels (0: no cap); chicks of events count against no user.
	UserDailyTokens int64 `json:"userDailyTokens"`
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

// Duration is a time.Duration written as "30m", "1h30m".
type Duration struct {
	time.Duration
	invalid string
}

// Dur makes a Duration.
func Dur(d time.Duration) Duration { return Duration{Duration: d} }

// UnmarshalJSON accepts a Go duration string. A bad value is kept and
// reported by Validate with the field's name.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		*d = Duration{invalid: fmt.Sprintf("must be a duration string such as \"90s\" or \"30m\", not %s", b)}
		return nil
	}
	v, err := time.ParseDuration(s)
	switch {
	case err != nil:
		*d = Duration{invalid: fmt.Sprintf("must be a duration such as \"90s\" or \"30m\", not %q", s)}
	case v < 0:
		*d = Duration{invalid: fmt.Sprintf("must not be negative, got %q", s)}
	default:
		*d = Duration{Duration: v}
	}
	return nil
}

func (d Duration) decodeProblem() string { return d.invalid }

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.Duration.String()) }

// decodeProblems walks v (a struct) and reports values that decoded with a
// problem, by their JSON path.
func decodeProblems(v reflect.Value, path string, out *Errors) {
	type problem interface{ decodeProblem() string }
	if v.CanInterface() {
		if p, ok := v.Interface().(problem); ok {
			if msg := p.decodeProblem(); msg != "" {
				*out = append(*out, FieldError{Field: path, Msg: msg})
			}
			return
		}
	}
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			decodeProblems(v.Elem(), path, out)
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if f.Tag.Get("config") == "inline" {
				decodeProblems(v.Field(i), path, out)
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				name = f.Name
			}
			decodeProblems(v.Field(i), join(name), out)
		}
	case reflect.Map:
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, k := range keys {
			decodeProblems(v.MapIndex(k), join(k.String()), out)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			decodeProblems(v.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}

// FieldError is a problem with one field.
type FieldError struct {
	Field string
	Msg   string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Msg }

// Errors is every problem found in a config.
type Errors []FieldError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// File is the config file name inside the data directory.
const File = "config.json"

// Load reads <dataDir>/config.json (absent: defaults), applies environment
// overrides from getenv (nil: os.Getenv), fills defaults and validates.
// The error, if any, lists every problem by field.
func Load(dataDir string, getenv func(string) string) (*Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var cfg Config
	path := filepath.Join(dataDir, File)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", path, err)
	default:
		if err := Parse(b, &cfg); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	// Values that decoded with a problem are reported together with what
	// Validate finds, so one run shows every problem.
	var problems Errors
	decodeProblems(reflect.ValueOf(&cfg), "", &problems)
	cfg.ApplyEnv(getenv)
	cfg.SetDefaults(dataDir)
	if err := cfg.Validate(); err != nil {
		problems = append(problems, err.(Errors)...)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s: %w", path, problems)
	}
	return &cfg, nil
}

// Parse decodes config JSON strictly: unknown fields and wrong types are
// errors naming the field by its full JSON path ("adapters.d.admins"), all
// of them at once; syntax errors give line and column. Values of the right
// JSON type but a bad form (a duration, a dm policy) are reported by Load.
func Parse(b []byte, cfg *Config) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return Errors{{Field: "(file)", Msg: "empty file; write {} for all defaults"}}
	}
	var probe any
	if err := json.Unmarshal(b, &probe); err != nil {
		return Errors{syntaxError(b, err)}
	}
	if _, ok := probe.(map[string]any); !ok {
		return Errors{{Field: "(file)", Msg: "must be a JSON object ({...})"}}
	}
	var es Errors
	checkShape(b, reflect.TypeOf(cfg).Elem(), "", &es)
	if len(es) > 0 {
		return es
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		return Errors{{Field: "(file)", Msg: err.Error()}}
	}
	return nil
}

func syntaxError(b []byte, err error) FieldError {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := position(b, se.Offset)
		return FieldError{Field: "(file)", Msg: fmt.Sprintf("JSON syntax error at line %d, column %d: %v", line, col, se)}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return FieldError{Field: "(file)", Msg: "unexpected end of file (unclosed object or string)"}
	}
	return FieldError{Field: "(file)", Msg: err.Error()}
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// checkShape walks raw JSON alongside the Go type t and reports unknown
// fields and values of the wrong JSON type, with their full paths.
func checkShape(raw []byte, t reflect.Type, path string, out *Errors) {
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	leaf := func() {
		if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
			var te *json.UnmarshalTypeError
			msg := err.Error()
			if errors.As(err, &te) {
				msg = fmt.Sprintf("must be %s, not JSON %s", kindName(te.Type), te.Value)
			}
			*out = append(*out, FieldError{Field: path, Msg: msg})
		}
	}
	if t == adapterType {
		checkAdapterShape(raw, path, out)
		return
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		leaf()
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		checkShape(raw, t.Elem(), path, out)
	case reflect.Struct:
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			*out = append(*out, FieldError{Field: path, Msg: "must be an object, not JSON " + jsonKindOf(raw)})
			return
		}
		for _, k := range sortedKeys(m) {
			f, ok := fieldByJSONName(t, k)
			if !ok {
				*out = append(*out, FieldError{Field: join(k), Msg: "unknown field (check the spelling; the README lists every field)"})
				continue
			}
			checkShape(m[k], f.Type, join(k), out)
		}
	case reflect.Map:
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			*out = append(*out, FieldError{Field: path, Msg: "must be an object, not JSON " + jsonKindOf(raw)})
			return
		}
		for _, k := range sortedKeys(m) {
			checkShape(m[k], t.Elem(), join(k), out)
		}
	case reflect.Slice:
		var a []json.RawMessage
		if json.Unmarshal(raw, &a) != nil {
			if string(bytes.TrimSpace(raw)) != "null" {
				*out = append(*out, FieldError{Field: path, Msg: "must be a list, not JSON " + jsonKindOf(raw)})
			}
			return
		}
		for i, v := range a {
			checkShape(v, t.Elem(), fmt.Sprintf("%s[%d]", path, i), out)
		}
	default:
		leaf()
	}
}

func jsonKindOf(raw []byte) string {
	var v any
	_ = json.Unmarshal(raw, &v)
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "null"
}

// fieldByJSONName finds a struct field the way encoding/json does: exact
// tag name first, then case-insensitively.
func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	var fold *reflect.StructField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag == name {
			return f, true
		}
		if fold == nil && strings.EqualFold(tag, name) {
			fold = &f
		}
	}
	if fold != nil {
		return *fold, true
	}
	return reflect.StructField{}, false
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

func position(b []byte, off int64) (line, col int) {
	line, col = 1, 1
	for i := int64(0); i < off-1 && i < int64(len(b)); i++ {
		if b[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

// SortedAdapterNames returns the adapter names in order.
func (c *Config) SortedAdapterNames() []string {
	return sortedKeys(c.Adapters)
}
