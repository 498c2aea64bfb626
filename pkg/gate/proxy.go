package gate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

const (
	// maxPreface bounds the preface line, maxHead the preface and the
	// request head together.
	maxPreface = 512
	maxHead    = 64 << 10
)

// longAgo is a deadline in the past: it fails pending reads at once.
var longAgo = time.Unix(1, 0)

// proxyConn is one proxy.sock connection: who asked, for what.
type proxyConn struct {
	g       *Gate
	c       net.Conn
	br      *bufio.Reader
	chickID string
	key     string
	host    string
	port    uint16
	log     *slog.Logger
}

// dest is host:port as the chick asked for it.
func (p *proxyConn) dest() string { return net.JoinHostPort(p.host, strconv.Itoa(int(p.port))) }

func (g *Gate) serveProxy(ctx context.Context, c net.Conn, pc *pendingConn) {
	head := &headLimit{r: c, n: maxHead}
	br := bufio.NewReaderSize(head, 4096)

	// The preface and the request head must arrive in time.
	stop := g.armPreface(c)
	id, key, ok := g.named(br, pc, sockProxy)
	if !ok {
		stop()
		return
	}
	release, why := g.lim.acquire(id, sockProxy)
	if why != "" {
		stop()
		g.refused(id, key, sockProxy, why)
		answer(c, http.StatusTooManyRequests, fmt.Sprintf("blocked: %s (%s)", sockProxy, why))
		return
	}
	defer release()
	req, rerr := http.ReadRequest(br)
	if stop() {
		g.log.Info("proxy connection closed: no request in time", "chick", id, "timeout", g.opts.PrefaceTimeout)
		return
	}
	head.n = -1
	p := &proxyConn{g: g, c: c, br: br, chickID: id, key: key, log: g.log.With("chick", id)}
	if rerr != nil {
		p.log.Info("refused: not an HTTP proxy request", "err", rerr)
		p.answer(http.StatusBadRequest, "blocked: not an HTTP proxy request")
		return
	}
	host, port, err := target(req)
	if err != nil {
		p.log.Info("refused: bad proxy request", "method", req.Method, "target", req.RequestURI, "err", err)
		p.answer(http.StatusBadRequest, "blocked: "+err.Error())
		return
	}
	p.host, p.port = host, port
	p.log = p.log.With("destination", p.dest())
	p.serve(ctx, req)
}

// serve decides about one request and carries it out.
func (p *proxyConn) serve(ctx context.Context, req *http.Request) {
	g := p.g
	actx, cancel := context.WithTimeout(wire.Credentials(ctx, g.opts.HostName, g.opts.Token), g.opts.CallTimeout)
	auth, err := g.client.Authorize(actx, &pb.AuthorizeRequest{ChickId: p.chickID, Key: p.key, Host: p.host, Port: uint32(p.port)})
	cancel()
	if err != nil {
		msg := err.Error()
		if st, ok := status.FromError(err); ok {
			msg = st.Message()
		}
		p.log.Info("refused: cannot ask Mother", "err", err)
		p.answer(http.StatusServiceUnavailable, fmt.Sprintf("blocked: %s (the gate cannot ask Mother: %s)", p.dest(), msg))
		return
	}
	if !auth.GetAllow() {
		reason := auth.GetReason()
		if reason == "" {
			reason = "not allowed for this chick"
		}
		// Mother recorded this refusal as she decided it: no report.
		p.log.Debug("refused", "outcome", pb.EgressOutcome_EGRESS_OUTCOME_REFUSED.String(), "reason", reason)
		p.answer(http.StatusForbidden, fmt.Sprintf("blocked: %s (%s)", p.dest(), reason))
		return
	}
	cc := g.caps.open(p.chickID, auth.GetBytesRemaining())
	defer g.caps.close(cc)
	if g.caps.spent(cc) {
		p.refuse(http.StatusForbidden, pb.EgressOutcome_EGRESS_OUTCOME_CAPPED, "byte cap reached")
		return
	}
	addrs, reason := p.resolve(ctx, auth)
	if len(addrs) == 0 {
		p.refuse(http.StatusForbidden, pb.EgressOutcome_EGRESS_OUTCOME_BLOCKED_ADDRESS, reason)
		return
	}
	dest, addr, err := p.dial(ctx, addrs)
	if err != nil {
		p.refuse(http.StatusBadGateway, pb.EgressOutcome_EGRESS_OUTCOME_FAILED, "unreachable: "+dialError(err))
		return
	}
	if !g.track(dest) {
		dest.Close()
		return
	}
	defer g.untrack(dest)
	start := g.clock.Now()
	var out, in int64
	var capped bool
	var failed error
	if req.Method == http.MethodConnect {
		if _, err := io.WriteString(p.c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			dest.Close()
			failed = err
		} else {
			out, in, capped = splice(p.br, p.c, dest, g.caps.taker(cc))
		}
	} else {
		out, in, capped, failed = p.forward(req, dest, g.caps.taker(cc))
	}
	rep := &pb.ReportRequest{
		Outcome: pb.EgressOutcome_EGRESS_OUTCOME_ALLOWED, Address: addr.String(),
		BytesOut: out, BytesIn: in, Duration: wire.DurationToProto(g.clock.Now().Sub(start)),
	}
	switch {
	case capped:
		rep.Outcome, rep.Reason = pb.EgressOutcome_EGRESS_OUTCOME_CAPPED, "byte cap reached"
		p.log.Info("cut: byte cap reached", "address", addr, "bytes_out", out, "bytes_in", in)
	case failed != nil:
		rep.Outcome, rep.Reason = pb.EgressOutcome_EGRESS_OUTCOME_FAILED, failed.Error()
		p.log.Info("failed", "address", addr, "err", failed)
	default:
		p.log.Debug("closed", "address", addr, "bytes_out", out, "bytes_in", in)
	}
	p.report(rep)
}

// refuse answers status with the blocked line, logs and reports it.
func (p *proxyConn) refuse(code int, outcome pb.EgressOutcome, reason string) {
	p.log.Info("refused", "outcome", outcome.String(), "reason", reason)
	p.answer(code, fmt.Sprintf("blocked: %s (%s)", p.dest(), reason))
	p.report(&pb.ReportRequest{Outcome: outcome, Reason: reason})
}

func (p *proxyConn) report(r *pb.ReportRequest) {
	r.ChickId, r.Key, r.Host, r.Port = p.chickID, p.key, p.host, uint32(p.port)
	p.g.report(r)
}

// answer writes a whole response with a one-line text body and closes
// nothing: the caller's return does.
func (p *proxyConn) answer(code int, text string) { answer(p.c, code, text) }

// answer writes a whole response with a one-line text body to c.
func answer(c io.Writer, code int, text string) {
	body := text + "\n"
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
}

// resolve returns the addresses the gate may dial for the destination,
// checked, or why there are none.
func (p *proxyConn) resolve(ctx context.Context, auth *pb.AuthorizeResponse) ([]netip.Addr, string) {
	g := p.g
	var cands []netip.Addr
	literal := false
	if ops := auth.GetAddresses(); len(ops) > 0 {
		for _, s := range ops {
			a, err := parseAddr(s)
			if err != nil {
				p.log.Warn("Mother's address for the destination is not an address", "address", s)
				continue
			}
			cands = append(cands, a)
		}
	} else if a, err := parseAddr(p.host); err == nil {
		cands, literal = []netip.Addr{a}, true
	} else {
		lctx, cancel := context.WithTimeout(ctx, g.opts.CallTimeout)
		found, err := g.opts.Resolver(lctx, p.host)
		cancel()
		if err != nil {
			p.log.Debug("lookup failed", "err", err)
		}
		for _, a := range found {
			cands = append(cands, a.Unmap().WithZone(""))
		}
	}
	if len(cands) == 0 {
		return nil, "does not resolve"
	}
	local := map[netip.Addr]bool{}
	own, err := g.opts.LocalAddrs()
	if err != nil {
		p.log.Warn("cannot list the host's addresses", "err", err)
		return nil, "the gate cannot list its host's addresses"
	}
	for _, a := range own {
		local[a.Unmap().WithZone("")] = true
	}
	trusted := newTrustSet(auth.GetTrusted())
	var ok []netip.Addr
	first := ""
	for _, a := range cands {
		if trusted.has(a, p.port) {
			ok = append(ok, a)
			continue
		}
		kind := blockedKind(a, local)
		if kind == "" {
			ok = append(ok, a)
			continue
		}
		if first == "" {
			switch {
			case literal && strings.HasSuffix(kind, " in"):
				// "carries a loopback address 127.0.0.1"
				first = "carries " + strings.TrimSuffix(kind, " in")
			case literal:
				first = "is " + kind
			default:
				first = "resolves to " + kind + " " + a.String()
			}
		}
	}
	return ok, first
}

// dial connects to the first of addrs that answers (never to the name:
// no second lookup).
func (p *proxyConn) dial(ctx context.Context, addrs []netip.Addr) (net.Conn, netip.Addr, error) {
	d := net.Dialer{Timeout: p.g.opts.DialTimeout, KeepAlive: 30 * time.Second}
	var last error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, p.port).String())
		if err == nil {
			return c, a, nil
		}
		last = err
	}
	return nil, netip.Addr{}, last
}

// dialError is the part of a dial error worth telling the chick.
func dialError(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

// forward sends one plain-HTTP request to dest in origin form, with
// Connection: close, and copies the answer back.
func (p *proxyConn) forward(req *http.Request, dest net.Conn, take takeFunc) (out, in int64, capped bool, err error) {
	defer dest.Close()
	removeHopHeaders(req.Header)
	req.RequestURI = ""
	req.Close = true
	bw := bufio.NewWriter(capWriter{w: dest, take: take, n: &out})
	werr := req.Write(bw)
	if werr == nil {
		werr = bw.Flush()
	}
	if errors.Is(werr, errCapped) {
		return out, 0, true, nil
	}
	if werr != nil {
		p.answer(http.StatusBadGateway, fmt.Sprintf("blocked: %s (sending the request failed: %v)", p.dest(), werr))
		return out, 0, false, fmt.Errorf("send request: %w", werr)
	}
	dr := bufio.NewReader(countReader{dest, &in})
	var resp *http.Response
	for {
		resp, err = http.ReadResponse(dr, req)
		if err != nil {
			p.answer(http.StatusBadGateway, fmt.Sprintf("blocked: %s (no HTTP answer: %v)", p.dest(), err))
			return out, in, false, fmt.Errorf("read answer: %w", err)
		}
		// The body went without waiting for 100 Continue: skip interim
		// answers. (Upgrade was removed: no 101 is expected.)
		if resp.StatusCode >= 200 {
			break
		}
	}
	defer resp.Body.Close()
	removeHopHeaders(resp.Header)
	resp.Close = true
	if err := resp.Write(p.c); err != nil {
		return out, in, false, fmt.Errorf("copy answer: %w", err)
	}
	return out, in, false, nil
}

// removeHopHeaders drops the headers that concern only one hop.
func removeHopHeaders(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authorization", "Proxy-Authenticate", "Te", "Trailer", "Upgrade"} {
		h.Del(k)
	}
}

// readPreface reads "MOTHER-GATE/1 <chick id> <gate key>\n".
func readPreface(br *bufio.Reader) (id, key string, err error) {
	line, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) || len(line) > maxPreface {
		return "", "", errors.New("preface line too long")
	}
	if err != nil {
		return "", "", fmt.Errorf("preface: %w", err)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(line), "\n"), "\r")
	parts := strings.Split(s, " ")
	if len(parts) != 3 || parts[0] != wire.GatePreface {
		return "", "", fmt.Errorf("preface %.40q is not %q", s, wire.GatePreface+" <chick id> <gate key>")
	}
	for _, f := range parts[1:] {
		if f == "" || !printable(f) {
			return "", "", errors.New("preface: empty or unprintable chick id or key")
		}
	}
	return parts[1], parts[2], nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// target is the destination of a proxy request: CONNECT host:port, or an
// absolute http:// URL (port 80 by default).
func target(req *http.Request) (host string, port uint16, err error) {
	var p string
	switch {
	case req.Method == http.MethodConnect:
		h, ps, serr := net.SplitHostPort(req.RequestURI)
		if serr != nil {
			return "", 0, fmt.Errorf("CONNECT needs host:port, not %.80q", req.RequestURI)
		}
		host, p = h, ps
	case req.URL == nil || !req.URL.IsAbs() || req.URL.Host == "":
		return "", 0, fmt.Errorf("%s %.80q: a proxy request needs an absolute http:// URL (or CONNECT host:port)", req.Method, req.RequestURI)
	case !strings.EqualFold(req.URL.Scheme, "http"):
		return "", 0, fmt.Errorf("%s URLs go through CONNECT, not as a plain proxy request", req.URL.Scheme)
	default:
		host, p = req.URL.Hostname(), req.URL.Port()
		if p == "" {
			p = "80"
		}
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" || len(host) > 253 || !validHost(host) {
		return "", 0, fmt.Errorf("%.80q is not a host name or address", host)
	}
	n, perr := strconv.ParseUint(p, 10, 16)
	if perr != nil || n == 0 {
		return "", 0, fmt.Errorf("%.20q is not a port", p)
	}
	return host, uint16(n), nil
}

// validHost accepts names (letters, digits, '-', '_', '.') and addresses
// (hex digits, '.', ':'); no zones, no spaces, no control bytes.
func validHost(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}

// headLimit reads at most n bytes from r (n < 0: no limit), so that a
// preface and head never grow without bound.
type headLimit struct {
	r io.Reader
	n int64
}

func (h *headLimit) Read(p []byte) (int, error) {
	if h.n < 0 {
		return h.r.Read(p)
	}
	if h.n == 0 {
		return 0, errors.New("request head too large")
	}
	if int64(len(p)) > h.n {
		p = p[:h.n]
	}
	n, err := h.r.Read(p)
	h.n -= int64(n)
	return n, err
}
