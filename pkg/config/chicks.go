package config

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
	// MaxModelCallsPerChick caps the model calls one chick has in flight
	// at once; a further call is refused at once (the chick retries it),
	// before anything is reserved or sent.
	MaxModelCallsPerChick int `json:"maxModelCallsPerChick"`
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
	// Events bounds the events one chick streams to Mother: past a bound
	// the chick is stopped ("flooding: ...").
	Events ChickEvents `json:"events"`
	// Calls bounds one chick's model calls: a call's bytes and its
	// images, and the bytes of calls Mother holds for all chicks at once.
	Calls ChickCalls `json:"calls"`
	// Gate bounds what one chick may hold of its host's gate (isolated
	// and none), so that no chick can knock it over for the others.
	Gate GateLimits `json:"gate"`
	// HostTools lists the MCP tools chicks may ask Mother to run
	// ("server.tool" or "server.*"). Default: none.
	HostTools []string `json:"hostTools"`
	// Results is what Mother does with a chick's result when it ends:
	// "answer" (default: she reads it in a run of her own and answers the
	// channel in her own words) or "relay" (the result is posted as is).
	Results string `json:"results"`
	// Files bounds what chicks leave in a channel's directory.
	Files ChickFiles `json:"files"`
	// Skills caps the skills chicks leave in one skills/ directory (a
	// channel's, or the workspace's).
	Skills ChickSkills `json:"skills"`
	// Posts paces what one chick makes Mother post in its channel.
	Posts ChickPosts `json:"posts"`
}

// ChickFiles bounds the files chicks leave in a channel: a quota with
// eviction, never a wall (docs/chicks.md, "What a chick leaves").
type ChickFiles struct {
	// Quota caps a channel's kept files, all that a chick of the channel
	// receives at start ("256m", at most "1g"): when a chick's file would
	// pass it, the oldest chick outputs (scratch/chicks/) are removed
	// first, and the channel is told once. Empty: the default.
	Quota string `json:"quota"`
}

// ChickSkills caps the skills chicks leave in one skills/ directory. A
// skill past a cap is refused, with the reason; the skills already there
// stay, and one of them may still be updated within the bytes.
type ChickSkills struct {
	// MaxCount caps the skills of one skills/ directory; 0: the default.
	MaxCount int `json:"maxCount"`
	// MaxBytes caps the bytes of one skills/ directory's files ("32m");
	// empty: the default.
	MaxBytes string `json:"maxBytes"`
}

// ChickPosts paces the notices one chick causes in its channel (files it
// attaches, memory updates, skill notices) and its progress lines: past
// the pace they are folded into one post that names what it holds.
type ChickPosts struct {
	// PerMinute is the notices a chick may post a minute, sustained.
	PerMinute int `json:"perMinute"`
	// Burst is the notices a chick may post at once before the pace
	// applies (a token bucket of this size, refilled at PerMinute).
	Burst int `json:"burst"`
	// ProgressPerMinute is the tool calls a minute a chick's progress
	// shows, sustained (a line each in the terminal, a detail each in a
	// thread); ProgressBurst is how many may show at once before it
	// applies.
	ProgressPerMinute int `json:"progressPerMinute"`
	ProgressBurst     int `json:"progressBurst"`
}

// Tier is one model a chick can use.
type Tier struct {
	// Provider is "ollama", "anthropic" or "openai:<name>" (an endpoint
	// of providers.openai; "openai" when there is one).
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// Description tells Mother's model when to pick this tier.
	Description string `json:"description"`
	// Price, if set, is what the model costs; the metrics then count the
	// tier's cost (mother_chick_model_cost_usd_total).
	Price *Price `json:"price"`
	// Egress adds destinations the chicks of this tier may reach.
	Egress TierEgress `json:"egress"`
	// MaxOutputTokens caps one answer of this tier's model: it is the
	// output limit sent to the provider (Ollama's num_predict, Anthropic's
	// max_tokens) and what the broker reserves for the answer. A chick's
	// own max_output_tokens can only lower it.
	MaxOutputTokens int `json:"maxOutputTokens"`
	// Think is whether this tier's model thinks before it answers:
	// "auto" (default: the model's own default, which for a thinking
	// model is to think), "on" or "off". Thinking tokens count in the
	// budgets like any other output.
	Think string `json:"think"`
	// Fallbacks answer in turn when the tier's provider is down,
	// overloaded or silent; the budgets count them the same.
	Fallbacks []Fallback `json:"fallbacks"`
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
	// LogMaxBytes caps a chick's connection log (its egress.jsonl, "1m");
	// empty: the default. Past it the connections are counted, not
	// logged one by one: a summary line keeps the counts.
	LogMaxBytes string `json:"logMaxBytes"`
	// MaxPendingPerChick caps the request_access calls of one chick that
	// wait for an admin at once; 0: the default. A call past it is
	// refused at once, and nobody is asked.
	MaxPendingPerChick int `json:"maxPendingPerChick"`
	// MaxPendingPerChannel caps the request_access calls waiting for an
	// admin in one channel, all its chicks together; 0: the default.
	MaxPendingPerChannel int `json:"maxPendingPerChannel"`
}

// ChickEvents bounds what one chick may stream to Mother over its
// session: the size of one event, their rate and the bytes stored for
// them (its events.jsonl). A chick past any of them is stopped with a
// reason that starts "flooding: ", its stored events kept.
type ChickEvents struct {
	// MaxEventBytes caps one event as the chick sends it ("1m"); empty:
	// the default.
	MaxEventBytes string `json:"maxEventBytes"`
	// PerSecond is how many events a second a chick may send, sustained;
	// 0: the default.
	PerSecond int `json:"perSecond"`
	// Burst is how many events a chick may send at once above PerSecond
	// (a token bucket of this size); 0: the default.
	Burst int `json:"burst"`
	// MaxBytes caps the bytes stored for one chick's events ("64m");
	// empty: the default.
	MaxBytes string `json:"maxBytes"`
}

// ChickCalls bounds the model calls chicks send Mother (Generate). A
// call is refused before Mother reads it when it is larger than
// MaxRequestBytes, and after it is read (before it is sent to a
// provider) when its images pass MaxImages or MaxImageBytes. The bodies
// of calls being read or in flight are held to MaxHeldBytes across all
// chicks: a further call waits, unread, for room.
type ChickCalls struct {
	// MaxRequestBytes caps one model call as the chick sends it ("3m"),
	// history and images together; empty: the default.
	MaxRequestBytes string `json:"maxRequestBytes"`
	// MaxImages caps the images one call carries; 0: the default.
	MaxImages int `json:"maxImages"`
	// MaxImageBytes caps the bytes of one call's images together ("2m");
	// empty: the default.
	MaxImageBytes string `json:"maxImageBytes"`
	// MaxHeldBytes caps the bytes of the calls of all chicks that Mother
	// reads or holds at once ("4m"); empty: the default. It is at least
	// maxRequestBytes.
	MaxHeldBytes string `json:"maxHeldBytes"`
}

// GateLimits bound the connections of a Docker host's gate
// (docs/isolation.md). A chick over a limit has its connection closed,
// and Mother is told (at most once a minute per chick and socket).
type GateLimits struct {
	// MaxNestConnsPerChick caps one chick's open connections to Mother
	// through the gate's nest.sock (gRPC keeps one; a reconnect may
	// briefly hold two).
	MaxNestConnsPerChick int `json:"maxNestConnsPerChick"`
	// MaxProxyConnsPerChick caps one chick's open connections through the
	// gate's HTTP proxy (pip and git open several at once).
	MaxProxyConnsPerChick int `json:"maxProxyConnsPerChick"`
	// MaxPending caps the connections, of all chicks together, that have
	// not yet named their chick; past it the oldest of them is closed.
	MaxPending int `json:"maxPending"`
	// MaxConns caps the gate's open connections of all chicks together.
	// A proxy connection costs the gate about 60 KiB, a nest.sock one
	// about 10 KiB (BenchmarkConnMemory in pkg/gate); its memory limit is
	// 64 MiB.
	MaxConns int `json:"maxConns"`
	// PrefaceTimeout is how long a connection may take to name its chick
	// (and, on the proxy, to send its request head).
	PrefaceTimeout Duration `json:"prefaceTimeout"`
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
	// WorkspaceSize caps a chick's /workspace (an emptyDir), such as "1g";
	// empty: chicks.resources.workspaceBytes.
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
	// WorkspaceBytes caps a chick's /workspace, such as "2g": on Docker a
	// tmpfs of that size (writes past it fail with ENOSPC; the container's
	// memory limit grows by it), on Kubernetes the emptyDir's sizeLimit
	// unless the host sets its own workspaceSize.
	WorkspaceBytes string `json:"workspaceBytes"`
}

// Hardening switches for chick containers. Nil means on.
type Hardening struct {
	DropCapabilities *bool  `json:"dropCapabilities"`
	NoNewPrivileges  *bool  `json:"noNewPrivileges"`
	ReadOnlyRoot     *bool  `json:"readOnlyRoot"`
	User             string `json:"user"`
}
