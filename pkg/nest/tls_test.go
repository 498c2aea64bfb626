package nest_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/nest"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// TestChickServiceSpeaksTLSOnly: the nest's ChickService answers only a
// client that speaks TLS and trusts Mother's CA. A plaintext client and
// one with another CA fail their handshake before any call is read; the
// client with the CA reaches the server (which then wants credentials).
func TestChickServiceSpeaksTLSOnly(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "tls")
	tl, err := nest.LoadTLS(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := nest.New(nest.Options{TLS: tl.Creds})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeChicks(lis)
	t.Cleanup(srv.Stop)
	addr := lis.Addr().String()

	join := func(creds credentials.TransportCredentials) error {
		t.Helper()
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_, err = pb.NewChickServiceClient(conn).Join(ctx, &pb.JoinRequest{})
		return err
	}

	// Plaintext: refused at the handshake, the call never reaches the
	// token check.
	err = join(insecure.NewCredentials())
	if status.Code(err) != codes.Unavailable {
		t.Errorf("plaintext client: %v, want Unavailable (no TLS, no service)", err)
	}

	// TLS, but trusting another Mother's CA: the nest's certificate is
	// refused by the client.
	other, err := nest.LoadTLS(filepath.Join(t.TempDir(), "other"), nil)
	if err != nil {
		t.Fatal(err)
	}
	wrongCA, err := wire.ClientTLS(other.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	err = join(wrongCA)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("client with another CA: %v, want Unavailable with a certificate error", err)
	}

	// The right CA: the handshake succeeds and the token is checked.
	right, err := wire.ClientTLS(tl.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	err = join(right)
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("client with Mother's CA and no token: %v, want Unauthenticated (it reached the nest)", err)
	}

	// A raw plaintext HTTP/2 preface gets no HTTP/2 answer.
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	if bytes.Contains(buf[:n], []byte("HTTP/2")) || (n >= 9 && buf[3] == 0x4 /* SETTINGS frame */) {
		t.Errorf("a plaintext HTTP/2 client got an HTTP/2 answer: %q", buf[:n])
	}
}

func TestServeChicksRefusesToRunWithoutTLS(t *testing.T) {
	t.Parallel()
	srv := nest.New(nest.Options{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.ServeChicks(lis); !errors.Is(err, nest.ErrNoTLS) {
		t.Fatalf("ServeChicks without TLS = %v, want ErrNoTLS", err)
	}
}

// TestLoadTLSKeepsItsCA: the CA and keys are created once, private (0600
// in a 0700 directory), and the same CA is loaded again after a restart,
// so running chicks keep trusting Mother.
func TestLoadTLSKeepsItsCA(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "tls")
	a, err := nest.LoadTLS(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := nest.LoadTLS(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.CAPEM, b.CAPEM) {
		t.Error("LoadTLS made a new CA on the second start")
	}
	if !a.NotAfter.Equal(b.NotAfter) {
		t.Error("LoadTLS issued a new server certificate though the old one is valid")
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("tls dir mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	for _, f := range []string{nest.CAFile, nest.CAKeyFile, nest.ServerFile, nest.ServerKeyFile} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", f, fi.Mode().Perm(), err)
		}
	}
	// A server certificate close to expiry is issued again by the same CA.
	soon := clock.NewFake(a.NotAfter.Add(-24 * time.Hour))
	c, err := nest.LoadTLS(dir, soon)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.CAPEM, c.CAPEM) || !c.NotAfter.After(a.NotAfter) {
		t.Errorf("renewal: same CA %v, new expiry %v after %v", bytes.Equal(a.CAPEM, c.CAPEM), c.NotAfter, a.NotAfter)
	}
	// A damaged CA is an error that says what to do, not a silent new CA.
	os.WriteFile(filepath.Join(dir, nest.CAKeyFile), []byte("garbage"), 0o600)
	if _, err := nest.LoadTLS(dir, nil); err == nil || !strings.Contains(err.Error(), "remove") {
		t.Errorf("damaged CA key: %v, want an error saying what to remove", err)
	}
}

// TestLoadTLSAfterACutBetweenTheCAKeyAndItsCertificate: a power cut during
// the first start can leave the CA's key without its certificate (the key
// is written first); the next start makes a new CA rather than refusing to
// start for good. A certificate without its key is still an error.
func TestLoadTLSAfterACutBetweenTheCAKeyAndItsCertificate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "tls")
	a, err := nest.LoadTLS(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{nest.CAFile, nest.ServerFile, nest.ServerKeyFile} {
		os.Remove(filepath.Join(dir, f))
	}
	b, err := nest.LoadTLS(dir, nil)
	if err != nil {
		t.Fatalf("the CA key without its certificate: %v, want a new CA", err)
	}
	if bytes.Equal(a.CAPEM, b.CAPEM) {
		t.Error("no new CA")
	}
	os.Remove(filepath.Join(dir, nest.CAKeyFile))
	if _, err := nest.LoadTLS(dir, nil); err == nil {
		t.Error("a CA certificate without its key was accepted")
	}
}
