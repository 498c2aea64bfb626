package daemon

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// syncBuffer is a bytes.Buffer safe for the log's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// env is a Getenv over a map, with the gRPC listener on a free loopback
// port.
func env(kv map[string]string) func(string) string {
	return func(k string) string {
		if k == "MOTHER_GRPC_LISTEN" && kv[k] == "" {
			return "127.0.0.1:0"
		}
		return kv[k]
	}
}

func writeConfig(t *testing.T, data, cfg string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(data, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestRunRefusesBadStarts(t *testing.T) {
	tests := []struct {
		name     string
		config   string
		env      map[string]string
		cli      bool
		logLevel string
		want     error
		stderr   string
	}{
		{name: "invalid config", config: `{"adapters": {"a": {"type": "slack", "botToken": "xoxb-x"}}}`, want: ErrConfig,
			stderr: "mother: invalid configuration:\n  "},
		{name: "bad log level", config: `{}`, cli: true, logLevel: "loud", want: ErrUsage,
			stderr: `mother: log level "loud": want debug, info, warn or error`},
		// This package's tests link no Discord adapter.
		{name: "adapter type not in this build", config: `{"adapters": {"d": {"type": "discord", "botToken": "t"}}}`, want: ErrConfig,
			stderr: "config.json: adapters.d.type: unknown adapter type \"discord\" (\"cli\")\n"},
		// Only the terminal is linked, so no variable can make an adapter.
		{name: "no adapters outside the terminal", config: `{}`, want: ErrUsage,
			stderr: "config.json; use --cli for the terminal\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			writeConfig(t, data, tc.config)
			var stderr syncBuffer
			err := Run(t.Context(), Options{DataDir: data, CLI: tc.cli, LogLevel: tc.logLevel, Version: "test",
				Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr, Getenv: env(tc.env)})
			if !errors.Is(err, tc.want) {
				t.Errorf("Run = %v, want %v", err, tc.want)
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tc.stderr)
			}
			if err != nil && strings.Count(stderr.String(), err.Error()) != 1 {
				t.Errorf("stderr = %q, want the error %q reported once", stderr.String(), err)
			}
		})
	}
}

func TestCheckConfig(t *testing.T) {
	data := t.TempDir()
	writeConfig(t, data, `{}`)
	// This package's tests link no Discord adapter.
	writeConfig(t, data, `{"adapters": {"discord": {"type": "discord", "botToken": "t"}}}`)
	if _, err := CheckConfig(data, env(nil)); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "config.json: adapters.discord.type: unknown adapter type \"discord\" (\"cli\")") {
		t.Errorf("CheckConfig(discord) = %v, want ErrConfig naming adapters.discord.type", err)
	}
	writeConfig(t, data, `{}`)
	got, err := CheckConfig(data, env(nil))
	if err != nil || !strings.HasPrefix(got, "configuration OK: 0 adapter(s)") {
		t.Errorf("CheckConfig({}) = %q, %v, want configuration OK", got, err)
	}
}

// TestRunTerminal drives the whole daemon in terminal mode without a
// process: a line in, the model's answer out, a clean stop when stdin
// ends. Its one Docker host does not exist: Mother says so and goes on.
func TestRunTerminal(t *testing.T) {
	fake := ollamatest.New(ollamatest.Turn{Text: "Hello Mario."})
	defer fake.Close()
	data := t.TempDir()
	writeConfig(t, data, `{"chicks": {"hosts": [{"name": "gone", "address": "unix://`+filepath.Join(data, "no-docker.sock")+`"}]}}`)
	var stdout, stderr syncBuffer
	err := Run(t.Context(), Options{DataDir: data, CLI: true, Version: "test",
		Stdin: strings.NewReader("hello\n"), Stdout: &stdout, Stderr: &stderr,
		Getenv: env(map[string]string{"MOTHER_OLLAMA_URL": fake.URL + "/v1", "MOTHER_MODEL_ID": "tiny", "USER": "mario"})})
	if err != nil {
		t.Fatalf("Run = %v, stderr:\n%s", err, stderr.String())
	}
	if got := strings.TrimSpace(stdout.String()); got != "Hello Mario." {
		t.Errorf("stdout = %q, want the model's answer", got)
	}
	if !strings.Contains(stderr.String(), "chicks unavailable until the Docker host answers") {
		t.Errorf("stderr = %q, want the unreachable Docker host reported as a warning", stderr.String())
	}
	if strings.Contains(stderr.String(), "reconcile chicks") {
		t.Errorf("stderr = %q: an unreachable host logged as a reconcile error", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(data, "mother.sock")); !os.IsNotExist(err) {
		t.Errorf("admin socket after Run: %v, want it removed", err)
	}
}

// TestRunStopsWithContext: ending Run's context stops Mother as SIGTERM
// would, with a nil error.
func TestRunStopsWithContext(t *testing.T) {
	fake := ollamatest.New()
	defer fake.Close()
	data := t.TempDir()
	writeConfig(t, data, `{"chicks": {"hosts": [{"name": "gone", "address": "unix://`+filepath.Join(data, "no-docker.sock")+`"}]}}`)
	stdin, w := io.Pipe()
	defer w.Close()
	ctx, cancel := context.WithCancel(t.Context())
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{DataDir: data, CLI: true, Version: "test", Stdin: stdin, Stdout: io.Discard, Stderr: &stderr,
			Getenv: env(map[string]string{"MOTHER_OLLAMA_URL": fake.URL + "/v1", "MOTHER_MODEL_ID": "tiny"})})
	}()
	// Once the admin socket is there, Mother is up.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(data, "mother.sock")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no admin socket after 30s; stderr:\n%s", stderr.String())
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after cancel = %v, want nil; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
