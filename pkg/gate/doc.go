// Package gate is the egress gate of an isolated chick network
// (docs/isolation.md): the one way out of the chicks of a Docker host. It
// runs inside the gate container as `chick gate` and listens on two unix
// sockets in its directory (wire.GateDir, a volume the chicks mount
// read-only), and on no TCP port at all:
//
//   - nest.sock: after its preface, every connection is piped, byte for
//     byte, to Mother's nest address. The chick's TLS runs end to end
//     through it: the gate never parses it and holds no key that could.
//   - proxy.sock: an HTTP proxy for one chick per connection: after its
//     preface, one proxy request: CONNECT host:port (a tunnel) or a
//     plain-HTTP request with an absolute URL (forwarded once, with
//     Connection: close).
//
// Every connection, on either socket, starts with the line
// "MOTHER-GATE/1 <chick id> <gate key>\n" (wire.GatePrefaceLine), which
// the gate checks itself against its token (wire.CheckChickKey): the key
// of a chick of network "none" opens nest.sock only. What one chick may
// hold is bounded (limits.go, docs/isolation.md "Limits"): connections
// not yet named share a small pool whose oldest is closed when it is
// full, and must name their chick within PrefaceTimeout; named ones count
// against their chick's limit on that socket and the gate's total. A
// connection over a limit is closed, logged and reported to Mother as
// REFUSED (host nest.sock or proxy.sock), at most once a minute per chick
// and socket.
//
// Running it: Mother starts it (one container per Docker host and Mother
// instance) with MOTHER_ADDR (her nest address, host:port),
// MOTHER_CA_PEM, MOTHER_GATE_HOST, MOTHER_GATE_TOKEN and MOTHER_GATE_DIR
// in its environment; by hand, the same variables and `chick gate`. It
// stops cleanly on SIGTERM, removing its sockets, and removes stale ones
// when it starts.
//
// What it refuses, for every proxy request, in this order:
//
//   - a connection without a well-formed preface and a good key (closed,
//     not answered), or whose preface and request head do not arrive in
//     time;
//   - a chick over its proxy connection limit, or a full gate (429);
//   - a request that is neither CONNECT host:port nor an absolute http://
//     URL (400);
//   - a destination Mother's GateService.Authorize does not allow for that
//     chick and key: 403 "blocked: host:port (reason)", not reported
//     (Mother recorded the refusal as she decided it: one call a refusal),
//     logged at debug;
//   - a chick whose byte cap is spent (403, reported CAPPED);
//   - a name that does not resolve, or whose every address is loopback,
//     private (RFC 1918, fc00::/7, 100.64.0.0/10), link-local (169.254/16,
//     fe80::/10: cloud metadata), unspecified, 0.0.0.0/8, multicast,
//     reserved (240.0.0.0/4), or one of the gate host's own addresses,
//     unless Mother lists that exact address as trusted (the operator's
//     config): 403 "blocked: host:port (resolves to a private address
//     10.0.0.5)", reported BLOCKED_ADDRESS. Names are resolved once, by
//     the operator's addresses from Authorize if there are any, else by
//     DNS, and only a checked address is dialled: no second lookup, so no
//     DNS rebinding.
//   - a destination that cannot be reached: 502, reported FAILED.
//
// An allowed connection is counted both ways; bytes sent out are charged
// to the chick's cap (shared by all its connections, from Authorize's
// bytes_remaining), and a connection that reaches it is cut and reported
// CAPPED. Every other connection's end is reported to Mother (best
// effort: a report that cannot be delivered is logged, never allowed to
// hold up the data). Every refusal of the gate's own is logged at info
// with the chick, the destination and the reason.
package gate
