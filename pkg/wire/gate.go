package wire

// The isolated chick's way out (docs/isolation.md): the gate's unix sockets
// in a volume both see, and the proxy preface that names the chick.
const (
	// GateDir is where the gate volume is mounted, in the gate (read-write)
	// and in isolated chicks (read-only).
	GateDir = "/run/mother-gate"
	// GateNestSocket, in GateDir, forwards bytes to Mother's nest.
	GateNestSocket = "nest.sock"
	// GateProxySocket, in GateDir, is the HTTP/HTTPS proxy. Each connection
	// starts with the line GatePreface + " <chick id> <gate key>\n".
	GateProxySocket = "proxy.sock"
	// GateHostsDir is where the gate mounts the volume of the isolated
	// chicks' hosts file, GateHostsFile (ChickHosts), put there by Mother:
	// a chick whose networking the engine disables gets no hosts file from
	// the engine. Chicks mount the file alone, at /etc/hosts.
	GateHostsDir  = "/run/mother-hosts"
	GateHostsFile = "hosts"
	// ChickHosts is what GateHostsFile holds: localhost, as the engine
	// writes it for a container of its own.
	ChickHosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	// GatePreface opens the first line of a proxy connection.
	GatePreface = "MOTHER-GATE/1"
	// ChickProxyAddr is where an isolated chick's own forwarder listens,
	// inside the chick's network namespace (HTTP_PROXY points at it).
	ChickProxyAddr = "127.0.0.1:3128"
)

// Environment variables of the gate and of isolated chicks.
const (
	// EnvGateProxy (chick): the gate's proxy socket; set means isolated.
	EnvGateProxy = "MOTHER_GATE_PROXY"
	// EnvGateKey (chick): the chick's gate key.
	EnvGateKey = "MOTHER_GATE_KEY"
	// EnvGateHost (gate): the Docker host's name in config.
	EnvGateHost = "MOTHER_GATE_HOST"
	// EnvGateToken (gate): the gate's GateService token.
	EnvGateToken = "MOTHER_GATE_TOKEN"
	// EnvGateDir (gate): where it makes its sockets (GateDir).
	EnvGateDir = "MOTHER_GATE_DIR"
)
