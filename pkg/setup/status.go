package setup

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// The status page step. Mother's read-only status page (/status, served
// with /metrics and /healthz on metrics.listen) is off unless configured;
// setup offers it on loopback, where only this machine can open it and
// no token is needed. A configuration that already has metrics.listen
// keeps it; one whose operator said no holds metrics.listen "", so that
// a rerun proposes no again (Enter keeps each current answer).

// DefaultStatusListen is where setup offers the status page: loopback, on
// the port the docs use.
const DefaultStatusListen = "127.0.0.1:9464"

// statusTries is how many ports after DefaultStatusListen's setup tries
// when that one is taken.
const statusTries = 20

func (r *run) statusPage() error {
	r.section("Status page")
	cur := r.cfg.str("metrics", "listen")
	declined := cur == "" && r.cfg.at("metrics", "listen") != nil
	if flag := strings.TrimSpace(r.f.StatusPage); flag != "" {
		addr, err := r.statusAnswer(flag, cur)
		if err != nil {
			r.say("  ✗ --status-page: %v", err)
			return fmt.Errorf("--status-page: %v: %w", err, ErrNotVerified)
		}
		if addr != "" && addr != cur {
			r.warnTaken(addr)
		}
		r.setStatus(addr)
		return nil
	}
	if cur != "" {
		r.say("Served on %s (metrics.listen %s).", statusURL(cur), cur)
		if !r.o.Interactive {
			return nil
		}
		keep, err := r.p.yes("Keep serving the status page there?", true)
		if err != nil || keep {
			return err
		}
		r.setStatus("")
		return nil
	}
	if !r.o.Interactive {
		if r.exists {
			r.say("Off (no metrics.listen); --status-page on serves it on %s.", statusURL(DefaultStatusListen))
			return nil
		}
		r.setStatus(r.freeStatusAddr())
		return nil
	}
	offer := r.freeStatusAddr()
	r.say("The status page shows what Mother is doing and what went wrong: adapters, chicks alive and")
	r.say("recently ended (and why), Docker hosts, budgets, model servers. On loopback only this machine")
	r.say("opens it (from another, through an SSH tunnel). Answer n for none, or give another address.")
	yn := "Y/n"
	if declined {
		yn = "y/N"
	}
	for {
		a, err := r.p.ask(fmt.Sprintf("Serve the status page on %s? [%s]", statusURL(offer), yn), "")
		if err != nil {
			return err
		}
		switch strings.ToLower(a) {
		case "":
			if a = offer; declined {
				a = "n"
			}
		case "y", "yes":
			a = offer
		}
		addr, err := r.statusAnswer(a, "")
		if err != nil {
			r.say("  ✗ %v", err)
			continue
		}
		if addr != "" && addr != offer {
			r.warnTaken(addr)
		}
		r.setStatus(addr)
		return nil
	}
}

// statusAnswer reads an answer to the status page question or
// --status-page: on (cur if set, else DefaultStatusListen or the next
// free port), off, a port, or a host:port. It returns the address to
// listen on, "" for off.
func (r *run) statusAnswer(a, cur string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(a)) {
	case "on", "y", "yes", "true":
		if cur != "" {
			return cur, nil
		}
		return r.freeStatusAddr(), nil
	case "off", "n", "no", "none", "false":
		return "", nil
	}
	a = strings.TrimSpace(a)
	if p, err := strconv.Atoi(a); err == nil {
		a = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return "", fmt.Errorf("%q: want y, n, on, off, a port or host:port", a)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "", fmt.Errorf("%q: the port must be 1 to 65535", a)
	}
	if !loopback(host) && r.cfg.str("metrics", "token") == "" {
		return "", fmt.Errorf("%s is not a loopback address: there the listener needs metrics.token (set it in config.json by hand, docs/operating.md#metrics), or use an SSH tunnel to 127.0.0.1", a)
	}
	return a, nil
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// setStatus writes metrics.listen: addr, or "" for off (which records the
// operator's no).
func (r *run) setStatus(addr string) {
	r.put(addr, "metrics", "listen")
	if addr == "" {
		r.say("  status page off")
		return
	}
	r.say("  ✓ status page on %s (metrics.listen %s)", statusURL(addr), addr)
}

// freeStatusAddr is DefaultStatusListen, or the next free port on the
// same address when another program (another Mother) holds it now.
func (r *run) freeStatusAddr() string {
	addr, taken := freeListen(DefaultStatusListen, statusTries)
	if taken {
		if addr == DefaultStatusListen {
			r.say("  ! %s and the %d ports after it are in use now: Mother cannot serve the status page there while they are", DefaultStatusListen, statusTries)
		} else {
			r.say("  ! %s is in use now (another Mother, or another program): %s is free", DefaultStatusListen, addr)
		}
	}
	return addr
}

// warnTaken says when addr cannot be listened on now.
func (r *run) warnTaken(addr string) {
	if err := canListen(addr); err != nil {
		r.say("  ! %s: %v: Mother cannot serve the status page there while it is", addr, err)
	}
}

// freeListen returns addr if it can be listened on, else the first of
// the tries ports after it that can (taken true); addr itself, taken,
// when none can.
func freeListen(addr string, tries int) (free string, taken bool) {
	if canListen(addr) == nil {
		return addr, false
	}
	host, port, err := net.SplitHostPort(addr)
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil {
		return addr, true
	}
	for i := 1; i <= tries && p+i <= 65535; i++ {
		a := net.JoinHostPort(host, strconv.Itoa(p+i))
		if canListen(a) == nil {
			return a, true
		}
	}
	return addr, true
}

// canListen reports whether a TCP listener can be opened on addr now.
func canListen(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			return op.Err
		}
		return err
	}
	return l.Close()
}

// statusURL is the status page's address for a listener on listen: one
// on every address (0.0.0.0, ::, none) is opened on loopback.
func statusURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen + "/status"
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/status"
}
