package setup

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

func TestObjectKeepsOrderAndUnknownFields(t *testing.T) {
	in := `{"zeta": 1, "adapters": {"d": {"type": "discord", "future": {"x": [1, 2]}}}, "alpha": "a", "n": 12345678901234567890}`
	o, err := parseObject([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	o.setAt([]string{"1"}, "adapters", "d", "admins")
	o.setAt("new", "budgets", "x")
	o.removeAt("alpha")
	b, err := o.encode()
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "zeta": 1,
  "adapters": {
    "d": {
      "type": "discord",
      "future": {
        "x": [
          1,
          2
        ]
      },
      "admins": [
        "1"
      ]
    }
  },
  "n": 12345678901234567890,
  "budgets": {
    "x": "new"
  }
}
`
	if string(b) != want {
		t.Errorf("encode =\n%s\nwant\n%s", b, want)
	}
	if got := o.str("adapters", "d", "type"); got != "discord" {
		t.Errorf(`str(adapters.d.type) = %q, want "discord"`, got)
	}
	for _, bad := range []string{"[]", "{", `{"a":}`, "12"} {
		if _, err := parseObject([]byte(bad)); err == nil {
			t.Errorf("parseObject(%q) = nil error, want one", bad)
		}
	}
}

func TestParseTokens(t *testing.T) {
	for in, want := range map[string]int64{"2m": 2_000_000, "500k": 500_000, "2_000_000": 2_000_000, "0": 0, " 7 ": 7, "2g": 2_000_000_000, "1.5m": 1_500_000} {
		if got, err := parseTokens(in); err != nil || got != want {
			t.Errorf("parseTokens(%q) = %d, %v, want %d", in, got, err, want)
		}
		if n := want; n > 0 {
			if back, _ := parseTokens(tokens(n)); back != n {
				t.Errorf("parseTokens(tokens(%d)) = %d", n, back)
			}
		}
	}
	for _, bad := range []string{"", "-1", "2x", "lots", "m"} {
		if _, err := parseTokens(bad); err == nil {
			t.Errorf("parseTokens(%q) = nil error, want one", bad)
		}
	}
}

// A non-interactive run on a configuration holding fields this version
// does not know keeps them (and says the result does not load, as
// --check-config would).
func TestNonInteractiveKeepsWhatItDoesNotAsk(t *testing.T) {
	model := ollamatest.New()
	defer model.Close()
	model.SetModels("qwen3:30b-a3b", "qwen3:14b")
	data := t.TempDir()
	orig := `{
  "fromTheFuture": {"keep": ["me", 1]},
  "providers": {"ollama": {"url": "` + model.URL + `"}},
  "chicks": {"resources": {"memory": "3g"}, "hosts": [{"name": "far", "address": "ssh://nobody@127.0.0.1:1", "capacity": 2}]},
  "log": {"level": "debug"}
}`
	path := filepath.Join(data, config.File)
	if err := os.WriteFile(path, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := Run(t.Context(), Options{DataDir: data, In: strings.NewReader(""), Out: &out,
		Flags: Flags{ChickTokens: "3m", ChannelDailyTokens: "0", UserDailyTokens: "0"}, Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), "fromTheFuture") {
		t.Errorf("Run = %v, want the unknown field reported by the daemon's validation", err)
	}
	b, _ := os.ReadFile(path)
	var got, want map[string]any
	json.Unmarshal(b, &got)
	json.Unmarshal([]byte(orig), &want)
	want["budgets"] = map[string]any{"chickTokens": float64(3_000_000)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("config.json after setup:\n%s\nwant the original plus budgets.chickTokens", b)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if !strings.Contains(out.String(), "✗ far:") {
		t.Errorf("the unreachable host is not reported:\n%s", out.String())
	}
}

func TestInputEndingWritesNothing(t *testing.T) {
	data := t.TempDir()
	err := Run(t.Context(), Options{DataDir: data, In: strings.NewReader("discord\n"), Out: io.Discard, Interactive: true})
	if !errors.Is(err, ErrInputEnded) {
		t.Errorf("Run = %v, want ErrInputEnded", err)
	}
	if _, err := os.Stat(filepath.Join(data, config.File)); err == nil {
		t.Error("config.json written")
	}
}

// The generated material works for real: Docker's client with the
// client files reaches the local engine through a TLS front that holds
// the server files and demands a client certificate from the same CA,
// as dockerd with tlsverify does.
func TestGeneratedDockerTLSReachesTheEngine(t *testing.T) {
	hatcherytest.Docker(t)
	dir := filepath.Join(t.TempDir(), "tls")
	m, err := GenerateDockerTLS(dir, "localhost", []net.IP{net.ParseIP("127.0.0.1")}, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for f, perm := range map[string]os.FileMode{m.CA: 0o444, m.Cert: 0o444, m.ServerCert: 0o444, m.Key: 0o400, m.ServerKey: 0o400, m.CAKey: 0o400} {
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm() != perm {
			t.Errorf("%s: %v, mode %v, want %v", f, err, fi.Mode().Perm(), perm)
		}
	}
	if _, err := GenerateDockerTLS(dir, "localhost", nil, 0, time.Now()); err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Errorf("a second run into the same directory = %v, want a refusal", err)
	}

	srv, err := tls.LoadX509KeyPair(m.ServerCert, m.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(m.CA)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{srv}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				if err := c.(*tls.Conn).Handshake(); err != nil {
					return
				}
				e, err := net.Dial("unix", "/var/run/docker.sock")
				if err != nil {
					return
				}
				defer e.Close()
				done := make(chan struct{}, 2)
				go func() { io.Copy(e, c); done <- struct{}{} }()
				go func() { io.Copy(c, e); done <- struct{}{} }()
				<-done // either side closing ends both
				c.Close()
				e.Close()
				<-done
			}()
		}
	}()
	h := config.DockerHost{Name: "tls", Address: "tcp://" + ln.Addr().String(), TLSCA: m.CA, TLSCert: m.Cert, TLSKey: m.Key}
	rep, err := checkDocker(context.Background(), h, "mother-chick:surely-not-here", nil)
	if err != nil {
		t.Fatalf("checkDocker over TLS: %v", err)
	}
	if rep.APIVersion == "" || rep.Image {
		t.Errorf("checkDocker = %+v, want an API version and no such image", rep)
	}
	// Without the client certificate the front refuses, as dockerd would.
	h.TLSCert, h.TLSKey = m.ServerCert, m.ServerKey
	if _, err := checkDocker(context.Background(), h, "x", nil); err == nil {
		t.Error("checkDocker with the server's certificate as a client one succeeded")
	}
}
