package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// syncBuf is a bytes.Buffer safe to read while a process writes to it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a running mother --cli whose stdin the test writes.
type proc struct {
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	stdout, stderr *syncBuf
	exited         chan struct{}
	err            error // cmd.Wait's, once exited is closed
}

// wait waits for the process to exit and returns how it did.
func (p *proc) wait() error {
	<-p.exited
	return p.err
}

func startMother(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(motherBin, args...)
	p := &proc{cmd: cmd, stdout: &syncBuf{}, stderr: &syncBuf{}, exited: make(chan struct{})}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "USER=mario", "MOTHER_GRPC_LISTEN=127.0.0.1:0"}, env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		stopGently(cmd.Process, p.exited)
		noRace(t, "mother", p.stderr.String())
	})
	return p
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTerminalStop(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if calls.Add(1) == 1 {
			return ollamatest.Turn{Text: "a very long answer", Delay: time.Minute}
		}
		return ollamatest.Turn{Text: "Second answer."}
	})
	defer fake.Close()
	data := t.TempDir()
	p := startMother(t, []string{"MOTHER_OLLAMA_URL=" + fake.URL}, "--cli", data)
	io.WriteString(p.stdin, "write me an essay\n")
	waitUntil(t, "the model call", func() bool { return len(fake.Requests()) == 1 })
	io.WriteString(p.stdin, "STOP\n")
	waitUntil(t, "Stopped.", func() bool { return strings.Contains(p.stdout.String(), "Stopped.") })
	io.WriteString(p.stdin, "stop\n")
	io.WriteString(p.stdin, "and now?\n")
	p.stdin.Close()
	if err := p.wait(); err != nil {
		t.Fatalf("mother: %v\n%s", err, p.stderr.String())
	}
	if got, want := p.stdout.String(), "Stopping…\nStopped.\nNothing is running here.\nSecond answer.\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
}

func TestTerminalEventRunsAgainAfterKill(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if calls.Add(1) == 1 {
			return ollamatest.Turn{Text: "never sent", Delay: time.Minute}
		}
		return ollamatest.Turn{Text: "Deploy noted."}
	})
	defer fake.Close()
	data := t.TempDir()
	env := []string{"MOTHER_OLLAMA_URL=" + fake.URL}

	p := startMother(t, env, "--cli", "--log-level", "info", data)
	waitUntil(t, "the events watcher", func() bool { return strings.Contains(p.stderr.String(), "events watcher started") })
	ev := filepath.Join(data, "workspace/events/deploy.json")
	tmp := filepath.Join(data, "workspace/events/.deploy.json.tmp")
	if err := os.WriteFile(tmp, []byte(`{"type":"immediate","channelId":"cli/local","text":"deploy finished"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, ev); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the event's model call", func() bool { return len(fake.Requests()) == 1 })
	if !strings.HasSuffix(fake.Requests()[0].LastUser(), "[event]: [EVENT:deploy.json:immediate] deploy finished") {
		t.Errorf("model saw %q", fake.Requests()[0].LastUser())
	}
	// A crash: no cleanup at all.
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.wait()
	if _, err := os.Stat(ev); err != nil {
		t.Fatalf("event file gone after a crash mid-run: %v", err)
	}

	r := runMother(t, "", env, "--cli", data)
	if r.code != 0 {
		t.Fatalf("restart: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		"I restarted (after a crash or an upgrade) while I had work in this channel.",
		"The event deploy.json was cut off; it runs again.",
		"[event deploy.json] (Late: Mother restarted before this event's run finished",
		"Deploy noted.",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if _, err := os.Stat(ev); !os.IsNotExist(err) {
		t.Errorf("event file still there after its run finished: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(data, "state/events/accepted/*")); len(m) != 0 {
		t.Errorf("accepted markers left: %v", m)
	}
}

func TestTerminalScheduleEventTool(t *testing.T) {
	t.Parallel()
	at := time.Now().Add(48 * time.Hour).Truncate(time.Second).Format(time.RFC3339)
	fake := ollamatest.New(
		ollamatest.Turn{Calls: []ollamatest.Call{{Name: "schedule_event", Args: map[string]any{"name": "dentist", "type": "one-shot", "text": "Remind Mario about the dentist", "at": at}}}},
		ollamatest.Turn{Text: "I will remind you."},
		ollamatest.Turn{Calls: []ollamatest.Call{{Name: "update_memory", Args: map[string]any{"scope": "channel", "mode": "append", "content": "Mario sees a dentist."}}}},
		ollamatest.Turn{Text: "Noted."},
	)
	defer fake.Close()
	data := t.TempDir()
	r := runMother(t, "remind me about the dentist in two days\nremember that\n", []string{"MOTHER_OLLAMA_URL=" + fake.URL}, "--cli", data)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if got, want := r.stdout, "→ schedule_event\nI will remind you.\n→ update_memory\nNoted.\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	b, err := os.ReadFile(filepath.Join(data, "workspace/events/dentist.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ev struct{ Type, ChannelID, Text, At string }
	if err := json.Unmarshal(b, &ev); err != nil || ev.Type != "one-shot" || ev.ChannelID != "cli/local" || ev.At != at {
		t.Errorf("dentist.json = %s (%v)", b, err)
	}
	if reqs := fake.Requests(); len(reqs) != 4 || !strings.Contains(reqs[1].Messages[len(reqs[1].Messages)-1].Content, "Scheduled dentist.json for") {
		t.Errorf("tool result not passed back to the model: %+v", reqs[1].Messages)
	}
	mem, err := os.ReadFile(filepath.Join(data, "workspace/channels/cli/local/MEMORY.md"))
	if err != nil || string(mem) != "Mario sees a dentist.\n" {
		t.Errorf("channel MEMORY.md = %q, %v", mem, err)
	}
}
