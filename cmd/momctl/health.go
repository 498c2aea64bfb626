package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// health asks Mother whether she is up, as her configuration in DATA says
// where: /healthz on metrics.listen, or her admin socket when that is off.
// With --wait it keeps asking, once a second, until she answers or the time
// is up. The mother package's postinst runs it after restarting her on an
// upgrade, and goes back to the previous binary when it fails
// (/usr/lib/mother/upgrade-check, deploy/debian).
//
// Up means /healthz answers "ok" or "degraded": degraded is Mother running
// and waiting for something outside her (a model server, a Docker host, a
// disk), which the previous binary would not fix either.
func (c *cli) health(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	wait := fs.Duration("wait", 0, "keep asking, once a second, for this long (0: ask once)")
	envFile := fs.String("env-file", "", "read Mother's environment from `FILE` first, as the unit's EnvironmentFile= gives it to her (/etc/mother/mother.env)")
	if err := c.parse(fs, args); err != nil || fs.NArg() != 1 {
		return usageError{"health [--wait D] [--env-file FILE] DATA"}
	}
	data := fs.Arg(0)
	getenv := os.Getenv
	if *envFile != "" {
		env, err := readEnvFile(*envFile)
		if err != nil {
			return err
		}
		getenv = func(k string) string {
			if v, ok := env[k]; ok {
				return v
			}
			return os.Getenv(k)
		}
	}
	cfg, err := healthConfig(data, getenv)
	if err != nil {
		return err
	}
	probe := func(ctx context.Context) (string, error) { return c.probeSocket(ctx, cfg.Admin.Socket) }
	if cfg.Metrics.Listen != "" {
		probe = func(ctx context.Context) (string, error) {
			return probeHealthz(ctx, cfg.Metrics.Listen, cfg.Metrics.Token.Value())
		}
	}
	deadline := c.clock.Now().Add(*wait)
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		said, err := probe(pctx)
		cancel()
		if err == nil {
			fmt.Fprintln(c.stdout, said)
			return nil
		}
		left := deadline.Sub(c.clock.Now())
		if left <= 0 {
			if *wait > 0 {
				return fmt.Errorf("mother is not healthy after %s: %v", *wait, err)
			}
			return fmt.Errorf("mother is not healthy: %v", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("mother is not healthy (stopped waiting): %v", err)
		case <-clock.After(c.clock, min(time.Second, left)):
		}
	}
}

// healthConfig reads where Mother listens from DATA/config.json and the
// environment, as she does, without validating the rest: momctl has no
// adapter types registered, and a configuration Mother refuses shows as
// her not answering.
func healthConfig(data string, getenv func(string) string) (*config.Config, error) {
	var cfg config.Config
	b, err := os.ReadFile(filepath.Join(data, config.File))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("mother's configuration: %w", err)
	default:
		if err := json.Unmarshal(b, &cfg); err != nil {
			return nil, fmt.Errorf("mother cannot be healthy: %s is not JSON she reads (%v)", filepath.Join(data, config.File), err)
		}
	}
	cfg.ApplyEnv(getenv)
	cfg.SetDefaults(data)
	return &cfg, nil
}

// probeHealthz asks /healthz on the listener at addr once.
func probeHealthz(ctx context.Context, addr, token string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("metrics.listen %q is not host:port", addr)
	}
	// A listener on every address answers on loopback too.
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	url := "http://" + net.JoinHostPort(host, port) + "/healthz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			return "", fmt.Errorf("%s does not answer (%v)", url, op.Err)
		}
		return "", fmt.Errorf("%s does not answer (%v)", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var h struct {
		Status  string `json:"status"`
		Version string `json:"version"`
		Reason  string `json:"reason"`
		Error   string `json:"error"`
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return "", fmt.Errorf("%s answered %s, not Mother's health", url, resp.Status)
	}
	switch {
	case resp.StatusCode == http.StatusOK && h.Status == "ok":
		return fmt.Sprintf("mother %s is healthy (%s).", h.Version, url), nil
	case resp.StatusCode == http.StatusServiceUnavailable && h.Status == "degraded":
		return fmt.Sprintf("mother %s is up but degraded: %s (%s).", h.Version, h.Reason, url), nil
	case h.Error != "":
		return "", fmt.Errorf("%s says %s: %s", url, h.Status, h.Error)
	default:
		return "", fmt.Errorf("%s answered %s", url, resp.Status)
	}
}

// probeSocket asks for Mother's status on her admin socket once: she
// answers it once she has started.
func (c *cli) probeSocket(ctx context.Context, socket string) (string, error) {
	c.socket = socket
	var st *pb.GetStatusResponse
	err := c.do(ctx, 0, func(ctx context.Context, api pb.AdminServiceClient) (err error) {
		st, err = api.GetStatus(ctx, &pb.GetStatusRequest{})
		return err
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("mother %s is up: she answers on %s (metrics.listen is off, so there is no /healthz to ask).", st.GetVersion(), socket), nil
}

// readEnvFile reads KEY=VALUE lines as systemd's EnvironmentFile= does:
// blank lines and lines starting with # or ; are skipped, a value in
// single or double quotes loses them.
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("environment file: %w", err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		env[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("environment file %s: %w", path, err)
	}
	return env, nil
}
