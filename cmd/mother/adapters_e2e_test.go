package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// End-to-end tests of the Discord and Slack adapters: the real mother
// binary, configured by config.json with apiURL pointing at a wire-level
// fake platform (discordtest, slacktest) and the model at ollamatest.

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// daemon is a running mother process.
type daemon struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan error
}

// startDaemon writes config.json into data and runs `mother data`.
func startDaemon(t *testing.T, data string, cfg map[string]any) *daemon {
	t.Helper()
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	d := &daemon{stderr: &lockedBuffer{}, done: make(chan error, 1)}
	d.cmd = exec.Command(motherBin, "--log-level", "debug", data)
	d.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "MOTHER_GRPC_LISTEN=127.0.0.1:0"}
	d.cmd.Stdout, d.cmd.Stderr = d.stderr, d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	noRaceAtEnd(t, "mother", d.stderr.String)
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		d.stop(t)
		if t.Failed() {
			t.Logf("mother's log:\n%s", d.stderr.String())
		}
	})
	return d
}

// stop sends SIGTERM and waits for a clean exit.
func (d *daemon) stop(t *testing.T) {
	t.Helper()
	if d.cmd.ProcessState != nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		if err != nil {
			t.Errorf("mother exited with %v", err)
		}
	case <-time.After(30 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
		t.Errorf("mother did not stop within 30s of SIGTERM")
	}
}

// scriptedModel answers like a small model would, keyed on the last user
// message: a tool call first for "files", a long answer for "long", else
// a greeting naming the asker. After the tool call of "files again" (the
// rate-limit subtests) it answers only after half a second, so the working
// message that the tool call posts is surely up and the answer replaces it
// with an edit, the call those subtests refuse with a 429: an answer that
// came before the view got to post would go out whole, in one post.
func scriptedModel() *ollamatest.Server {
	return ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		last := r.Messages[len(r.Messages)-1]
		user := r.LastUser()
		switch {
		case last.Role == "tool" && strings.Contains(user, "files again"):
			return ollamatest.Turn{Text: "There are **two** files, @mario.", Delay: 500 * time.Millisecond}
		case last.Role == "tool":
			return ollamatest.Turn{Text: "There are **two** files, @mario."}
		case strings.Contains(user, "files"):
			return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "bash", Args: map[string]any{"command": "ls", "label": "listing files"}}}}
		case strings.Contains(user, "slow"):
			return ollamatest.Turn{Text: "far too late", Delay: 30 * time.Second}
		case strings.Contains(user, "long"):
			var b strings.Builder
			b.WriteString("Here is the program:\n\n```go\n")
			for i := range 150 {
				fmt.Fprintf(&b, "fmt.Println(%d) // one line of a long program\n", i)
			}
			b.WriteString("```\n\nThat is all.")
			return ollamatest.Turn{Text: b.String(), ChunkSize: 500}
		}
		return ollamatest.Turn{Text: "Hello, @mario!"}
	})
}

func readChannelLog(t *testing.T, data, adapter, channel string) []chat.ChannelMessage {
	t.Helper()
	var out []chat.ChannelMessage
	path := filepath.Join(data, "workspace/channels", adapter, channel, "log.jsonl")
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	for _, line := range readLines(t, path) {
		var m chat.ChannelMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log.jsonl line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// waitFor polls cond (for state the fakes do not signal, such as files).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
