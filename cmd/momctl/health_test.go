package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/metrics"
)

// healthRun runs momctl health with args and returns its exit status and
// what it printed.
func healthRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	c := &cli{stdout: &stdout, stderr: &stderr, clock: clock.Real{}, loc: time.UTC, version: "1.4.1"}
	code := run(t.Context(), append([]string{"health"}, args...), c, func(string) string { return "" })
	return code, stdout.String(), stderr.String()
}

// healthData writes a data directory whose config.json serves metrics on
// listen (with token, when set) and returns it.
func healthData(t *testing.T, config string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestHealth asks /healthz the way the package's upgrade check does: ok
// and degraded are up; Mother's real handler before her core is watched
// (unhealthy: starting), a closed port and a broken configuration are not,
// and --wait waits for them that long. The token comes from the
// environment file, as systemd gives it to her.
func TestHealth(t *testing.T) {
	const token = "0123456789abcdef0123"
	answer := func(code int, body string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/healthz" || r.Header.Get("Authorization") != "Bearer "+token {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			w.WriteHeader(code)
			w.Write([]byte(body))
		})
	}
	starting := metrics.New(metrics.Options{Version: "0.2.0"}).Handler()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	envFile := filepath.Join(t.TempDir(), "mother.env")
	if err := os.WriteFile(envFile, []byte("# tokens\nMOTHER_METRICS_TOKEN=\""+token+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		handler http.Handler // nil: nothing listens
		config  string       // %s: the listener's address
		wait    string
		code    int
		out     string
		took    time.Duration // at least
	}{
		{name: "ok", handler: answer(200, `{"status":"ok","version":"0.2.0","uptime_seconds":3}`),
			config: `{"adapters": {"term": {"type": "cli"}}, "metrics": {"listen": "%s"}}`,
			code:   0, out: "mother 0.2.0 is healthy (http://"},
		{name: "no metrics, no socket", config: `{"admin": {"socket": "m.sock"}}`,
			code: 1, out: "momctl: mother is not healthy: no admin socket at "},
		{name: "degraded", handler: answer(503, `{"status":"degraded","reason":"no Docker host answers: chicks cannot start","version":"0.2.0"}`),
			code: 0, out: "mother 0.2.0 is up but degraded: no Docker host answers: chicks cannot start"},
		{name: "starting", handler: starting, config: `{"metrics": {"listen": "%s"}}`, wait: "2s",
			code: 1, out: "momctl: mother is not healthy after 2s: http://%s/healthz says unhealthy: starting", took: 2 * time.Second},
		{name: "nothing listens", config: `{"metrics": {"listen": "` + closedAddr + `"}}`,
			code: 1, out: "momctl: mother is not healthy: http://" + closedAddr + "/healthz does not answer (connect: connection refused)"},
		{name: "broken config", config: `{"metrics": {"listen": "%s"}, `, handler: answer(200, `{"status":"ok"}`),
			code: 1, out: "momctl: mother cannot be healthy: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := closedAddr
			if tc.handler != nil {
				srv := httptest.NewServer(tc.handler)
				defer srv.Close()
				addr = strings.TrimPrefix(srv.URL, "http://")
			}
			config := tc.config
			if config == "" {
				config = `{"metrics": {"listen": "%s"}}`
			}
			data := healthData(t, strings.ReplaceAll(config, "%s", addr))
			args := []string{"--env-file", envFile}
			if tc.wait != "" {
				args = append(args, "--wait", tc.wait)
			}
			start := time.Now()
			code, stdout, stderr := healthRun(t, append(args, data)...)
			out := strings.ReplaceAll(tc.out, "%s", addr)
			if code != tc.code || !strings.Contains(stdout+stderr, out) {
				t.Errorf("momctl health = %d\nstdout: %s\nstderr: %s\nwant %d and %q", code, stdout, stderr, tc.code, out)
			}
			if took := time.Since(start); took < tc.took {
				t.Errorf("momctl health gave up after %s, want at least %s", took, tc.took)
			}
		})
	}
}

// TestHealthWaitsForMother: a /healthz that says ok only after a while
// passes within --wait.
func TestHealthWaitsForMother(t *testing.T) {
	ready := time.Now().Add(1500 * time.Millisecond)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if time.Now().Before(ready) {
			w.WriteHeader(503)
			w.Write([]byte(`{"status":"unhealthy","error":"starting"}`))
			return
		}
		w.Write([]byte(`{"status":"ok","version":"0.2.0"}`))
	}))
	defer srv.Close()
	data := healthData(t, `{"metrics": {"listen": "`+strings.TrimPrefix(srv.URL, "http://")+`"}}`)
	code, stdout, stderr := healthRun(t, "--wait", "10s", data)
	if code != 0 || !strings.Contains(stdout, "is healthy") {
		t.Errorf("momctl health --wait 10s = %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}
