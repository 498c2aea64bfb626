package daemon

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/egress"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/nest"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// TestGateServiceWired: the daemon serves GateService on the nest's
// listener, with the gate secret kept beside the nest's CA: the gate of a
// configured host gets in with its token (and learns that the chick it
// names does not exist); a wrong token, or a host not configured, does
// not.
func TestGateServiceWired(t *testing.T) {
	fake := ollamatest.New()
	defer fake.Close()
	data := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	writeConfig(t, data, `{"chicks": {"hosts": [{"name": "gone", "address": "unix://`+filepath.Join(data, "no-docker.sock")+`"}]}}`)
	stdin, w := io.Pipe()
	defer w.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{DataDir: data, CLI: true, Version: "test", Stdin: stdin, Stdout: io.Discard, Stderr: &stderr,
			Getenv: env(map[string]string{"MOTHER_OLLAMA_URL": fake.URL + "/v1", "MOTHER_MODEL_ID": "tiny", "MOTHER_GRPC_LISTEN": addr})})
	}()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Error("Run did not return")
		}
	}()
	tlsDir := filepath.Join(data, "chicks", "tls")
	var caPEM []byte
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, serr := os.Stat(filepath.Join(data, "mother.sock"))
		caPEM, err = os.ReadFile(filepath.Join(tlsDir, nest.CAFile))
		if serr == nil && err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Mother not up after 30s; stderr:\n%s", stderr.String())
		}
	}
	secret, err := egress.LoadSecret(tlsDir) // made by Mother at start
	if err != nil {
		t.Fatal(err)
	}
	inst, err := os.ReadFile(filepath.Join(data, "chicks", "instance"))
	if err != nil {
		t.Fatal(err)
	}
	creds, err := wire.ClientTLS(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gate := pb.NewGateServiceClient(conn)
	instance := strings.TrimSpace(string(inst))
	req := &pb.AuthorizeRequest{ChickId: "c-00000000", Key: secret.ChickKey(instance, "gone", "c-00000000"), Host: "pypi.org", Port: 443}
	var got error
	// The nest opens once the (unreachable) host has been reconciled.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, got = gate.Authorize(wire.Credentials(ctx, "gone", secret.GateToken(instance, "gone")), req)
		if status.Code(got) != codes.Unavailable || time.Now().After(deadline) {
			break
		}
	}
	if status.Code(got) != codes.PermissionDenied || !strings.Contains(got.Error(), "no such chick") {
		t.Errorf("the configured host's gate: %v, want PermissionDenied (no such chick); stderr:\n%s", got, stderr.String())
	}
	for name, c := range map[string]context.Context{
		"wrong token":    wire.Credentials(ctx, "gone", strings.Repeat("0", 64)),
		"unknown host":   wire.Credentials(ctx, "other", secret.GateToken(instance, "other")),
		"other instance": wire.Credentials(ctx, "gone", secret.GateToken("m-0", "gone")),
	} {
		if _, err := gate.Authorize(c, req); status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: %v, want Unauthenticated", name, err)
		}
	}
}
