package wire

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

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
	// EnvGateLimits (gate): its connection limits, GateLimits.String.
	EnvGateLimits = "MOTHER_GATE_LIMITS"
)

// Chick gate keys. A chick names itself to its gate with the preface
// GatePreface + " <chick id> <key>\n" on both sockets; the gate checks the
// key itself, without asking Mother, so a connection that does not carry
// one costs it almost nothing. The keys derive from the gate's own token
// (EnvGateToken), which Mother derives from her gate secret for the host:
// so Mother can compute them, the gate can check them, and a key is worth
// nothing at another host's gate.
const (
	// keyScopeChick: the key of an isolated chick, good on both sockets.
	keyScopeChick = "chick"
	// keyScopeNest: the key of a chick under chicks.network "none", good
	// on nest.sock only (Mother's GateService refuses it for the proxy).
	keyScopeNest = "nest"
)

// ChickGateKey is the gate key of an isolated chick: hex(HMAC-SHA256(gate
// token, "chick\x00" + id)). It opens both of the gate's sockets.
func ChickGateKey(gateToken, id string) string { return gateKey(gateToken, keyScopeChick, id) }

// ChickNestKey is the gate key of a chick of network "none":
// hex(HMAC-SHA256(gate token, "nest\x00" + id)). It opens nest.sock only.
func ChickNestKey(gateToken, id string) string { return gateKey(gateToken, keyScopeNest, id) }

func gateKey(token, scope, id string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(scope))
	m.Write([]byte{0})
	m.Write([]byte(id))
	return hex.EncodeToString(m.Sum(nil))
}

// CheckChickKey reports whether key is chick id's key under gateToken,
// and whether it also opens the proxy (an isolated chick's key) or only
// nest.sock. It compares in constant time.
func CheckChickKey(gateToken, id, key string) (ok, proxy bool) {
	if id == "" || len(key) != sha256.Size*2 {
		return false, false
	}
	if hmac.Equal([]byte(key), []byte(ChickGateKey(gateToken, id))) {
		return true, true
	}
	return hmac.Equal([]byte(key), []byte(ChickNestKey(gateToken, id))), false
}

// GateLimits are a gate's connection limits (config chicks.gate), passed
// to it in EnvGateLimits. Zero fields take the gate's defaults.
type GateLimits struct {
	// NestConnsPerChick and ProxyConnsPerChick cap one chick's open
	// connections on each socket.
	NestConnsPerChick, ProxyConnsPerChick int
	// Pending caps the connections that have not yet named their chick.
	Pending int
	// Conns caps the open connections in all.
	Conns int
	// PrefaceTimeout bounds the wait for a connection's preface (and a
	// proxy connection's request head).
	PrefaceTimeout time.Duration
}

// String is the form EnvGateLimits holds:
// "nest=4 proxy=32 pending=64 conns=512 preface=5s".
func (l GateLimits) String() string {
	return fmt.Sprintf("nest=%d proxy=%d pending=%d conns=%d preface=%s", l.NestConnsPerChick, l.ProxyConnsPerChick, l.Pending, l.Conns, l.PrefaceTimeout)
}

// ParseGateLimits reads the form of GateLimits.String; fields left out
// stay zero.
func ParseGateLimits(s string) (GateLimits, error) {
	var l GateLimits
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return l, fmt.Errorf("gate limits: %q is not name=value", f)
		}
		if k == "preface" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return l, fmt.Errorf("gate limits: preface=%q is not a duration", v)
			}
			l.PrefaceTimeout = d
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return l, fmt.Errorf("gate limits: %s=%q is not a count", k, v)
		}
		switch k {
		case "nest":
			l.NestConnsPerChick = n
		case "proxy":
			l.ProxyConnsPerChick = n
		case "pending":
			l.Pending = n
		case "conns":
			l.Conns = n
		default:
			return l, fmt.Errorf("gate limits: unknown limit %q", k)
		}
	}
	return l, nil
}

// GatePrefaceLine is the line a chick writes first on each connection to
// its gate's sockets.
func GatePrefaceLine(id, key string) string { return GatePreface + " " + id + " " + key + "\n" }

// GateDialer dials the gate's nest socket at path for chick id and writes
// its preface, for grpc.WithContextDialer: the chick's TLS then runs end
// to end through the gate. The preface costs no round trip: the gate
// answers nothing to it, and the TLS handshake follows at once.
func GateDialer(path, id, key string) func(ctx context.Context, addr string) (net.Conn, error) {
	line := GatePrefaceLine(id, key)
	return func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", path)
		if err != nil {
			return nil, err
		}
		if dl, ok := ctx.Deadline(); ok {
			c.SetWriteDeadline(dl)
		}
		if _, err := io.WriteString(c, line); err != nil {
			c.Close()
			return nil, fmt.Errorf("gate preface: %w", err)
		}
		c.SetWriteDeadline(time.Time{})
		return c, nil
	}
}
