package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mother-chat/mother/internal/testenv"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// stalledEngine is a Docker engine that takes every connection and reads
// the request, but answers nothing until released: an engine across the
// network that hangs (issue 34, item 11).
type stalledEngine struct {
	lis      net.Listener
	release  chan struct{}
	mu       sync.Mutex
	requests []string
	answered int
}

func newStalledEngine(t *testing.T) (*stalledEngine, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "engine.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	e := &stalledEngine{lis: lis, release: make(chan struct{})}
	go e.serve()
	t.Cleanup(func() {
		e.releaseAll()
		lis.Close()
	})
	return e, "unix://" + sock
}

func (e *stalledEngine) serve() {
	for {
		c, err := e.lis.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				return
			}
			e.mu.Lock()
			e.requests = append(e.requests, strings.TrimSpace(line))
			e.mu.Unlock()
			<-e.release
			// Then it answers as an engine that fails: Mother takes it
			// as a host that is down, and goes on.
			e.mu.Lock()
			e.answered++
			e.mu.Unlock()
			io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		}()
	}
}

func (e *stalledEngine) releaseAll() {
	select {
	case <-e.release:
	default:
		close(e.release)
	}
}

func (e *stalledEngine) seen() (requests []string, answered int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.requests...), e.answered
}

// Mother is ready for chat without waiting for any Docker host: with her
// only engine hanging, she tells systemd READY=1, says her ready line and
// answers in the terminal while the engine has answered nothing; she
// stops cleanly on SIGTERM with the engine still hanging (issue 34, item
// 11: the gate was created, and the chicks reconciled, before READY).
func TestReadyWithoutWaitingForDocker(t *testing.T) {
	t.Parallel()
	engine, addr := newStalledEngine(t)
	fake := ollamatest.New(ollamatest.Turn{Text: "Here, while the engine sleeps."})
	defer fake.Close()
	data := t.TempDir()
	cfg := fmt.Sprintf(`{"adapters": {"cli": {"type": "cli"}}, "chicks": {"hosts": [{"name": "gpu", "address": %q}]}}`, addr)
	if err := os.WriteFile(filepath.Join(data, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(data, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cmd := exec.Command(motherBin, data)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "NOTIFY_SOCKET=" + sock, "MOTHER_GRPC_LISTEN=127.0.0.1:0", "MOTHER_OLLAMA_URL=" + fake.URL, "USER=mario"}
	stdin, _ := cmd.StdinPipe()
	defer stdin.Close()
	stdout, _ := cmd.StdoutPipe()
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	noRaceAtEnd(t, "mother", stderr.String)
	defer cmd.Process.Kill()

	buf := make([]byte, 512)
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := conn.Read(buf)
	if err != nil || !strings.HasPrefix(string(buf[:n]), "READY=1") {
		reqs, _ := engine.seen()
		t.Fatalf("no READY=1 while the engine hangs (%q, %v); the engine was asked %q\nstderr:\n%s", buf[:n], err, reqs, stderr.String())
	}
	if _, answered := engine.seen(); answered != 0 {
		t.Fatalf("the engine answered %d requests before READY; the test's engine must hang", answered)
	}
	// She answers a message with the engine still hanging.
	io.WriteString(stdin, "hello\n")
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "Here, while the engine sleeps." {
		t.Fatalf("answer = %q, %v\nstderr:\n%s", line, err, stderr.String())
	}
	reqs, answered := engine.seen()
	if answered != 0 {
		t.Fatalf("the engine answered before the chat did")
	}
	if len(reqs) == 0 {
		t.Errorf("Mother never asked the engine: the test proves nothing")
	}
	if !strings.Contains(stderr.String(), "mother ready: ") {
		t.Errorf("no ready line:\n%s", stderr.String())
	}
	// She stops on SIGTERM with the engine still hanging.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("did not exit cleanly on SIGTERM with the engine hanging: %v\nstderr:\n%s", err, stderr.String())
	}
	if s := stderr.String(); strings.Contains(s, "level=ERROR") {
		t.Errorf("errors logged:\n%s", s)
	}
}

// TestMakeRunAsANewcomer runs the README's first command, make run, in a
// terminal as a newcomer does on a machine where no Docker engine answers
// (issue 34): it says what it builds, says in one line that chicks are
// off and why, shows the ready line and the prompt, answers, and Ctrl-C
// ends it with no make error and no ERROR. The go command is stood in for
// by a copy of the binary under test (its build is the test binary's);
// the recipe, the chick step and Mother are the real ones.
func TestMakeRunAsANewcomer(t *testing.T) {
	t.Parallel()
	makeCmd, err := exec.LookPath("make")
	if err != nil {
		testenv.Unavailable(t, "make not installed (Debian package make)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fake := ollamatest.New(ollamatest.Turn{Text: "Hello, newcomer."})
	defer fake.Close()
	dir := t.TempDir()
	goStandIn := filepath.Join(dir, "go")
	script := "#!/bin/sh\n# make run's `go build -o PATH ./cmd/mother`, by a copy of the binary under test\n[ \"$1\" = build ] && [ \"$2\" = -o ] || exit 2\nexec cp \"$MOTHER_TEST_BIN\" \"$3\"\n"
	if err := os.WriteFile(goStandIn, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	cmd := exec.Command(makeCmd, "--no-print-directory", "-C", root, "run", "DATA="+data, "GO="+goStandIn, "RUN_BIN="+filepath.Join(dir, "mother"))
	s := startPtyCmd(t, cmd, []string{"MOTHER_TEST_BIN=" + motherBin, "DOCKER_HOST=unix://" + filepath.Join(dir, "no-engine.sock"),
		"MOTHER_OLLAMA_URL=" + fake.URL, "MOTHER_GRPC_LISTEN=127.0.0.1:0", "USER=mario"})
	s.expect("make run: building Mother into ")
	s.expect("so chicks are off")
	s.expect("make run: starting Mother in this terminal")
	s.expect("mother ready: terminal, model ollama/")
	s.answer("> ", "hello")
	s.expect("Hello, newcomer.\n> ")
	if _, err := io.WriteString(s.pty, "\x03"); err != nil {
		t.Fatal(err)
	}
	code := s.exit()
	if ps := cmd.ProcessState; code != 0 && !(code == -1 && ps != nil && ps.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT) {
		t.Errorf("make run ended with %v after Ctrl-C, want exit 0 or the interrupt itself", ps)
	}
	out := s.text()
	for _, bad := range []string{"make: ***", "level=ERROR", "panic"} {
		if strings.Contains(out, bad) {
			t.Errorf("the terminal shows %q:\n%s", bad, out)
		}
	}
}

// TestChickRefusedWhileImageMissing: with the chick image not on the
// engine (a fresh machine before make image), Mother warns once that
// chicks are off and how to fix it, logs no ERROR (not for the gate
// either), and a chick asked for is refused with that reason instead of
// "hatched… starting now" followed by a silent failure (issue 34, items 2
// and 3).
func TestChickRefusedWhileImageMissing(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	data, _ := chickData(t, api, nil)
	path := filepath.Join(data, "config.json")
	cfg := readJSON(t, path)
	absent := fmt.Sprintf("mother-chick:absent-%d", time.Now().UnixNano())
	cfg["chicks"].(map[string]any)["image"] = absent
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if !hasToolResult(r) {
			return motherTurn("count the files")
		}
		return ollamatest.Turn{Text: "Told: " + strings.Join(toolResults(r), " | ")}
	})
	defer fake.Close()
	p := startChickMother(t, data, chickEnv(fake))
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(p.errs(), "chicks are off on this Docker host") {
		if time.Now().After(deadline) {
			t.Fatalf("no warning that chicks are off; stderr:\n%s", p.errs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	io.WriteString(p.stdin, "please count the files\n")
	p.waitOut(t, "Told: ", time.Minute)
	out := p.out()
	for _, want := range []string{"Not started", absent, "Docker host local", "make image"} {
		if !strings.Contains(out, want) {
			t.Errorf("the spawn's result does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hatched") {
		t.Errorf("a chick that could not start was accepted:\n%s", out)
	}
	p.stdin.Close()
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.errs())
	}
	if n, _ := recordedChicks(t, data); n != 0 {
		t.Errorf("%d chick records written, want none", n)
	}
	errs := p.errs()
	if strings.Contains(errs, "level=ERROR") {
		t.Errorf("errors logged for a missing image:\n%s", errs)
	}
	if n := strings.Count(errs, "chicks are off on this Docker host"); n != 1 {
		t.Errorf("the warning was said %d times, want once:\n%s", n, errs)
	}
}

// recordedChicks counts the lines of DATA/chicks/chicks.jsonl (a chick spawned writes one at least).
func recordedChicks(t *testing.T, data string) (int, error) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "chicks", "chicks.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n"), nil
}
