package docker_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery/docker"
)

func TestDialRefusesPlainTCPAndOddAddresses(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	cases := []struct {
		name   string
		host   config.DockerHost
		getenv func(string) string
		want   string
	}{
		{"tcp without certificates", config.DockerHost{Name: "gpu", Address: "tcp://10.0.0.1:2375"}, env(), "plain tcp"},
		{"DOCKER_HOST tcp without TLS", config.DockerHost{Name: "gpu"}, env("DOCKER_HOST", "tcp://10.0.0.1:2375"), "plain tcp"},
		{"DOCKER_HOST tcp with certs but TLS verify off", config.DockerHost{Name: "gpu"}, env("DOCKER_HOST", "tcp://10.0.0.1:2376", "DOCKER_CERT_PATH", "/certs"), "plain tcp"},
		{"http scheme", config.DockerHost{Name: "gpu", Address: "http://10.0.0.1:2375"}, env(), "scheme"},
		{"ssh with a password", config.DockerHost{Name: "gpu", Address: "ssh://u:pw@10.0.0.1"}, env(), "password"},
		{"ssh with a path", config.DockerHost{Name: "gpu", Address: "ssh://u@10.0.0.1/x"}, env(), "path"},
		{"tcp with missing certificate files", config.DockerHost{Name: "gpu", Address: "tcp://10.0.0.1:2376", TLSCA: "/nope/ca.pem", TLSCert: "/nope/c.pem", TLSKey: "/nope/k.pem"}, env(), "gpu"},
	}
	for _, c := range cases {
		_, err := docker.Dial(c.host, c.getenv)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error mentioning %q", c.name, err, c.want)
		}
	}
	if _, err := docker.Dial(config.DockerHost{Name: "gpu", Address: "tcp://10.0.0.1:2375"}, env()); !errors.Is(err, docker.ErrPlainTCP) {
		t.Errorf("plain tcp: %v, want ErrPlainTCP", err)
	}
	for _, ok := range []config.DockerHost{
		{Name: "local", Address: "unix:///var/run/docker.sock"},
		{Name: "gpu", Address: "ssh://mother@127.0.0.1:2222"},
		{Name: "default"},
	} {
		c, err := docker.Dial(ok, env())
		if err != nil {
			t.Errorf("%+v: %v", ok, err)
			continue
		}
		c.Close()
	}
}

// TestDialTLSClientCertificates runs a TLS server that demands a client
// certificate signed by its CA and speaks enough of the Engine API for a
// list call: the real Docker client must present the configured
// certificate.
func TestDialTLSClientCertificates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, caKey := newCA(t)
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", ca.Raw)
	serverCert := leaf(t, ca, caKey, "server", true)
	clientCert := leaf(t, ca, caKey, "mother", false)
	writePEM(t, filepath.Join(dir, "cert.pem"), "CERTIFICATE", clientCert.Certificate[0])
	keyDER, _ := x509.MarshalECPrivateKey(clientCert.PrivateKey.(*ecdsa.PrivateKey))
	writePEM(t, filepath.Join(dir, "key.pem"), "EC PRIVATE KEY", keyDER)

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	var sawClient string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) > 0 {
			sawClient = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		w.Header().Set("Api-Version", "1.41")
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/_ping"):
			w.Write([]byte("OK"))
		case strings.HasSuffix(r.URL.Path, "/containers/json"):
			w.Write([]byte(`[{"Id":"abc","Labels":{"mother.chick.id":"c-1"},"State":"running"}]`))
		default:
			http.NotFound(w, r)
		}
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	defer srv.Close()
	addr := "tcp://" + srv.Listener.Addr().String()

	c, err := docker.Dial(config.DockerHost{Name: "gpu", Address: addr, TLSCA: filepath.Join(dir, "ca.pem"), TLSCert: filepath.Join(dir, "cert.pem"), TLSKey: filepath.Join(dir, "key.pem")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	list, err := c.ContainerList(t.Context(), container.ListOptions{All: true})
	if err != nil {
		t.Fatalf("list over TLS: %v", err)
	}
	if len(list) != 1 || list[0].Labels["mother.chick.id"] != "c-1" || sawClient != "mother" {
		t.Errorf("list %+v, client cert %q", list, sawClient)
	}
	if v := c.ClientVersion(); v != "1.41" {
		t.Errorf("negotiated API version %s, want 1.41", v)
	}
}

func newCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return ca, key
}

func leaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, server bool) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
