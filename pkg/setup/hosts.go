package setup

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/mother-chat/mother/pkg/config"
)

func (r *run) hosts() error {
	r.section("Docker hosts for chicks")
	img := orDefault(r.f.ChickImage, orDefault(r.cfg.str("chicks", "image"), config.DefaultChickImage))
	if r.o.Interactive && r.f.ChickImage == "" {
		var err error
		if img, err = r.p.ask("Chick image", img); err != nil {
			return err
		}
	}
	if !r.exists || img != orDefault(r.cfg.str("chicks", "image"), config.DefaultChickImage) {
		r.put(img, "chicks", "image")
	}
	r.image = img
	raw := r.cfg.list("chicks", "hosts")
	var kept []json.RawMessage
	changed := false
	for _, h := range raw {
		var dh config.DockerHost
		_ = json.Unmarshal(h, &dh)
		r.say("Host %s: %s", dh.Name, orDefault(dh.Address, "the local engine"))
		r.checkHost(dh)
		keep := true
		if r.o.Interactive {
			var err error
			if keep, err = r.p.yes("Keep host "+dh.Name+"?", true); err != nil {
				return err
			}
		}
		if keep {
			kept = append(kept, h)
		} else {
			changed = true
		}
	}
	var added []map[string]any
	for _, spec := range r.f.DockerHosts {
		h, err := r.newHost(spec)
		if err != nil {
			return err
		}
		added = append(added, h)
	}
	if r.o.Interactive {
		first := len(kept) == 0 && len(added) == 0
		for {
			q, def := "Add another Docker host (unix://, tcp://host:2376 or ssh://user@host; enter for none)", ""
			if first {
				q, def = "Docker engine for chicks (unix://, tcp://host:2376 or ssh://user@host)", "unix:///var/run/docker.sock"
			}
			a, err := r.p.ask(q, def)
			if err != nil {
				return err
			}
			if a == "" {
				break
			}
			h, err := r.newHost(a)
			if err != nil {
				r.say("  ✗ %v", err)
				continue
			}
			added = append(added, h)
			first = false
		}
	}
	if len(raw) == 0 && len(added) == 0 {
		r.say("Host local: the local engine (default)")
		r.checkHost(config.DockerHost{Name: "local"})
		return nil
	}
	if changed || len(added) > 0 {
		list := make([]any, 0, len(kept)+len(added))
		for _, k := range kept {
			list = append(list, k)
		}
		for _, a := range added {
			list = append(list, a)
		}
		r.put(list, "chicks", "hosts")
	}
	return nil
}

// newHost makes a host from "[name=]address", with TLS material for
// tcp:// and the address its chicks dial for a remote one, and checks it.
func (r *run) newHost(spec string) (map[string]any, error) {
	name, addr, ok := strings.Cut(spec, "=")
	if !ok {
		name, addr = "", spec
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "unix" && u.Scheme != "tcp" && u.Scheme != "ssh") {
		return nil, fmt.Errorf("docker host %q: want unix:///path, tcp://host:port (TLS) or ssh://user@host", addr)
	}
	if name == "" {
		name = "local"
		if u.Scheme != "unix" {
			name = u.Hostname()
		}
		if r.o.Interactive {
			if name, err = r.p.ask("Name for this host", name); err != nil {
				return nil, err
			}
		}
	}
	h := config.DockerHost{Name: name, Address: addr}
	out := map[string]any{"name": name, "address": addr}
	if u.Scheme == "tcp" {
		if err := r.hostTLS(&h, u); err != nil {
			return nil, err
		}
		out["tlsCA"], out["tlsCert"], out["tlsKey"] = h.TLSCA, h.TLSCert, h.TLSKey
	}
	if u.Scheme != "unix" {
		ma, err := r.motherAddress(name)
		if err != nil {
			return nil, err
		}
		if ma != "" {
			out["motherAddress"] = ma
		}
	}
	r.say("Host %s: %s", name, addr)
	r.checkHost(h)
	return out, nil
}

// hostTLS finds or generates the client files for a tcp:// host.
func (r *run) hostTLS(h *config.DockerHost, u *url.URL) error {
	dir, gen := r.f.DockerTLSDir, r.f.DockerTLSGenerate
	if r.o.Interactive && dir == "" && gen == "" {
		a, err := r.p.ask("TLS client files for "+h.Name+": a directory with ca.pem, cert.pem and key.pem, or 'generate'", "generate")
		if err != nil {
			return err
		}
		if a == "generate" {
			if gen, err = r.p.ask("The server's DNS name, then its IP addresses (comma-separated)", u.Hostname()); err != nil {
				return err
			}
		} else {
			dir = a
		}
	}
	if dir != "" {
		h.TLSCA, h.TLSCert, h.TLSKey = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		for _, f := range []string{h.TLSCA, h.TLSCert, h.TLSKey} {
			if _, err := os.Stat(f); err != nil {
				return fmt.Errorf("docker host %s: %w", h.Name, err)
			}
		}
		return nil
	}
	if gen == "" {
		gen = u.Hostname()
	}
	parts := strings.FieldsFunc(gen, func(r rune) bool { return r == ',' || r == ' ' })
	var ips []net.IP
	dns := parts[0]
	for _, p := range parts[1:] {
		ip := net.ParseIP(p)
		if ip == nil {
			return fmt.Errorf("docker host %s: %q is not an IP address", h.Name, p)
		}
		ips = append(ips, ip)
	}
	if ip := net.ParseIP(dns); ip != nil {
		ips = append(ips, ip)
	}
	absData, _ := filepath.Abs(r.o.DataDir)
	t, err := GenerateDockerTLS(filepath.Join(absData, "docker-tls", h.Name), dns, ips, 0, r.o.Clock.Now())
	if err != nil {
		return err
	}
	h.TLSCA, h.TLSCert, h.TLSKey = t.CA, t.Cert, t.Key
	r.say("  ✓ TLS material in %s (certificate for %s)", t.Dir, gen)
	r.next = append(r.next,
		fmt.Sprintf("on the Docker host %s: sudo install -d -m 0700 /etc/docker/tls && sudo install -m 0400 %s %s %s /etc/docker/tls/ (copy them there first), then configure dockerd with deploy/inference/daemon.json and docker-override.conf and restart it (deploy/README.md, section 3)", h.Name, "ca.pem", "server-cert.pem", "server-key.pem"),
		fmt.Sprintf("keep %s offline (it signs certificates for this Docker host)", t.CAKey))
	return nil
}

// motherAddress asks what chicks on a remote host dial, and makes the
// nest listen beyond loopback if it does not.
func (r *run) motherAddress(host string) (string, error) {
	ma := r.f.MotherAddress
	if ma == "" {
		ma = r.cfg.str("grpc", "advertise")
		if ma == "" || isLoopback(ma) {
			ma = lanAddress() + ":7777"
		}
		if r.o.Interactive {
			var err error
			if ma, err = r.p.ask("Address chicks on "+host+" dial to reach Mother (this machine as "+host+" sees it, host:port)", ma); err != nil {
				return "", err
			}
		}
	}
	_, port, err := net.SplitHostPort(ma)
	if err != nil {
		return "", fmt.Errorf("mother address %q: want host:port", ma)
	}
	if l := r.cfg.str("grpc", "listen"); l == "" || isLoopback(l) {
		r.put("0.0.0.0:"+port, "grpc", "listen")
		r.say("  grpc.listen set to 0.0.0.0:%s so that chicks on %s reach Mother (TLS only)", port, host)
	}
	return ma, nil
}

func isLoopback(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(h)
	return h == "localhost" || (ip != nil && ip.IsLoopback())
}

// lanAddress is this machine's first non-loopback IPv4 address.
func lanAddress() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return "MOTHER-HOST"
}

func (r *run) checkHost(h config.DockerHost) {
	rep, err := checkDocker(r.ctx, h, r.image, r.o.Getenv)
	if err != nil {
		r.say("  ✗ %s: %v", h.Name, err)
		if fix := socketFix(h, err); fix != "" {
			r.say("  ! %s", fix)
			r.next = append(r.next, fix)
			return
		}
		r.next = append(r.next, fmt.Sprintf("make the Docker host %s answer (%v), then run mother setup again to check it", h.Name, err))
		return
	}
	r.say("  ✓ Docker %s (API %s) on %s/%s", rep.Version, rep.APIVersion, rep.OS, rep.Arch)
	if rep.Image {
		r.say("  ✓ image %s present", r.image)
		return
	}
	hint := loadHint(h, r.image)
	r.say("  ! image %s missing: %s", r.image, hint)
	r.next = append(r.next, fmt.Sprintf("load the chick image on %s: %s", h.Name, hint))
}

// socketFix says how to let this user reach a local engine whose socket
// refused it (the daemon runs as the user "mother", who is often not in
// the docker group), or "" for another error.
func socketFix(h config.DockerHost, err error) string {
	addr := h.Address
	if addr == "" {
		addr = "unix:///var/run/docker.sock" // the local engine
	}
	if !strings.Contains(strings.ToLower(err.Error()), "permission denied") || !strings.HasPrefix(addr, "unix://") {
		return ""
	}
	who := "the user that runs Mother"
	if u, uerr := user.Current(); uerr == nil {
		who = u.Username
	}
	return fmt.Sprintf("%s may not use %s: add it to the group that owns the socket (sudo usermod -aG docker %s, then start a new session), "+
		"or give a remote engine with --docker-host tcp://… or ssh://…, then run mother setup again", who, strings.TrimPrefix(addr, "unix://"), who)
}
