package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/hatchery/kubernetes/kubetest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/store"
)

var motherBin string

// goBuild is `go build` with raceFlags.
func goBuild(args ...string) *exec.Cmd {
	return exec.Command("go", append(append([]string{"build"}, raceFlags()...), args...)...)
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mother-bin-")
	if err != nil {
		panic(err)
	}
	motherBin = filepath.Join(dir, "mother")
	build := goBuild("-o", motherBin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic("build mother: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	// The Kubernetes test cluster goes when its last user is done.
	if err := kubetest.Release(); err != nil {
		fmt.Fprintf(os.Stderr, "kubetest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

// runMother runs the real binary with stdin and the given environment.
func runMother(t *testing.T, stdin string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), motherBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "USER=mario", "MOTHER_GRPC_LISTEN=127.0.0.1:0"}, env...)
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run mother: %v", err)
	}
	noRace(t, "mother", errb.String())
	return result{out.String(), errb.String(), code}
}

func readLog(t *testing.T, data string) []chat.ChannelMessage {
	t.Helper()
	var out []chat.ChannelMessage
	for _, line := range readLines(t, filepath.Join(data, "workspace/channels/cli/local/log.jsonl")) {
		var m chat.ChannelMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log.jsonl line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func readContext(t *testing.T, data string) []store.ContextRecord {
	t.Helper()
	var out []store.ContextRecord
	for _, line := range readLines(t, filepath.Join(data, "workspace/channels/cli/local/context.jsonl")) {
		var r store.ContextRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("context.jsonl line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

func TestTerminalAnswersThroughOllama(t *testing.T) {
	t.Parallel()
	fake := ollamatest.New(ollamatest.Turn{Text: "Hello Mario, how can I help?"})
	defer fake.Close()
	data := t.TempDir()

	r := runMother(t, "hello\n", []string{"MOTHER_OLLAMA_URL=" + fake.URL + "/v1", "MOTHER_MODEL_ID=tiny"}, "--cli", data)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if strings.TrimSpace(r.stdout) != "Hello Mario, how can I help?" {
		t.Errorf("stdout = %q, want the model's answer", r.stdout)
	}
	// Once she listens she says so, and on what.
	if !strings.Contains(r.stderr, "mother ready: terminal, model ollama/tiny at "+fake.URL+"/v1, chicks on local (image ") {
		t.Errorf("no ready line on stderr:\n%s", r.stderr)
	}

	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("model got %d requests, want 1", len(reqs))
	}
	if reqs[0].Model != "tiny" {
		t.Errorf("model = %q, want tiny (MOTHER_MODEL_ID)", reqs[0].Model)
	}
	userLine := regexp.MustCompile(`^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[+-]\d\d:\d\d\] \[mario\]: hello$`)
	if !userLine.MatchString(reqs[0].LastUser()) {
		t.Errorf("user message = %q, want [timestamp] [mario]: hello", reqs[0].LastUser())
	}
	if !strings.Contains(reqs[0].System(), "cli/local") {
		t.Errorf("system prompt does not name the channel:\n%s", reqs[0].System())
	}

	msgs := readLog(t, data)
	if len(msgs) != 2 {
		t.Fatalf("log.jsonl has %d messages, want 2: %+v", len(msgs), msgs)
	}
	if msgs[0].Text != "hello" || msgs[0].Sender.Username != "mario" || !msgs[0].IsMention || msgs[0].Sender.IsBot {
		t.Errorf("first logged message = %+v", msgs[0])
	}
	if msgs[1].Text != "Hello Mario, how can I help?" || !msgs[1].Sender.IsBot || msgs[1].ReplyTo != msgs[0].ID {
		t.Errorf("reply logged as %+v, want one whole bot message replying to %s", msgs[1], msgs[0].ID)
	}

	var roles []string
	for _, rec := range readContext(t, data) {
		if rec.Type == store.RecordMessage {
			roles = append(roles, string(rec.Message.Role))
		}
	}
	if strings.Join(roles, ",") != "user,assistant" {
		t.Errorf("context.jsonl message roles = %v, want user,assistant", roles)
	}
	if _, err := os.Stat(filepath.Join(data, "workspace/channels/cli/local/daily", time.Now().Format("2006-01-02")+".md")); err != nil {
		t.Errorf("daily log: %v", err)
	}
}

func TestTerminalContextSurvivesRestart(t *testing.T) {
	t.Parallel()
	fake := ollamatest.New(
		ollamatest.Turn{Text: "Noted: your cat is called Miso."},
		ollamatest.Turn{Text: "Miso."},
		ollamatest.Turn{Text: "Yes."},
		ollamatest.Turn{Text: "Yes again."},
	)
	defer fake.Close()
	data := t.TempDir()
	env := []string{"MOTHER_OLLAMA_URL=" + fake.URL}

	if r := runMother(t, "my cat is called Miso\n", env, "--cli", data); r.code != 0 {
		t.Fatalf("first run: exit %d: %s", r.code, r.stderr)
	}
	// A new process: the context comes back from context.jsonl. Two
	// identical lines are two messages (keyed by id, not by text).
	r := runMother(t, "what is my cat called?\nyes\nyes\n", env, "--cli", data)
	if r.code != 0 {
		t.Fatalf("second run: exit %d: %s", r.code, r.stderr)
	}
	if got, want := r.stdout, "Miso.\nYes.\nYes again.\n"; got != want {
		t.Errorf("stdout = %q, want %q (one answer per line, in order)", got, want)
	}
	reqs := fake.Requests()
	if len(reqs) != 4 {
		t.Fatalf("model got %d requests, want 4", len(reqs))
	}
	var contents []string
	for _, m := range reqs[3].Messages {
		if m.Role != "system" {
			contents = append(contents, m.Role+":"+lastField(m.Content))
		}
	}
	want := "user:Miso,assistant:Miso.,user:called?,assistant:Miso.,user:yes,assistant:Yes.,user:yes"
	if strings.Join(contents, ",") != want {
		t.Errorf("last request history = %v\nwant %s", contents, want)
	}
}

func lastField(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}

func TestTerminalModelUnreachable(t *testing.T) {
	t.Parallel()
	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	data := t.TempDir()

	r := runMother(t, "hello\nstill there?\n", []string{"MOTHER_OLLAMA_URL=http://" + addr}, "--cli", data)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("stdout has %d lines, want one error line per message:\n%s", len(lines), r.stdout)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "I cannot reach my model server") || !strings.Contains(l, addr) {
			t.Errorf("stdout line = %q, want a clear unreachable error naming %s", l, addr)
		}
	}
	// Each message has its error logged as Mother's reply to it. Where a
	// reply falls relative to the second message depends on when the
	// second line was read: the first run fails at once.
	msgs := readLog(t, data)
	asked := map[string]string{}
	answered := map[string]bool{}
	for _, m := range msgs {
		switch {
		case m.Sender.ID == "mother" && strings.HasPrefix(m.Text, "I cannot reach"):
			answered[m.ReplyTo] = true
		case m.Sender.ID != "mother":
			asked[m.ID] = m.Text
		}
	}
	if len(msgs) != 4 || len(asked) != 2 {
		t.Fatalf("log.jsonl = %+v, want the two messages and an error reply to each", msgs)
	}
	for id, text := range asked {
		if !answered[id] {
			t.Errorf("%q has no error logged as Mother's reply: %+v", text, msgs)
		}
	}
}

func TestTerminalUnknownModel(t *testing.T) {
	t.Parallel()
	fake := ollamatest.New()
	defer fake.Close()
	fake.SetModels("qwen3:14b")
	data := t.TempDir()

	r := runMother(t, "hello\n", []string{"MOTHER_OLLAMA_URL=" + fake.URL, "MOTHER_MODEL_ID=nosuch:1b"}, "--cli", data)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "is not available") || !strings.Contains(r.stdout, "nosuch:1b") || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("stdout = %q, want one line naming the missing model", r.stdout)
	}
}

func TestCheckConfig(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	token := "xoxb-very-secret-token-value"
	cfg := `{"adapters": {"slack-acme": {"type": "slack", "botToken": "` + token + `", "dm": "sometimes"}}}`
	if err := os.WriteFile(filepath.Join(data, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runMother(t, "", nil, "--check-config", data)
	if r.code != 2 {
		t.Errorf("exit %d, want 2", r.code)
	}
	if !strings.Contains(r.stderr, "adapters.slack-acme.dm: must be") || !strings.Contains(r.stderr, "adapters.slack-acme.appToken") || strings.Contains(r.stderr, token) {
		t.Errorf("stderr = %q, want the dm field named and no token", r.stderr)
	}

	cfg = `{"adapters": {"slack-acme": {"type": "slack", "botToken": "` + token + `", "dm": "none"}}}`
	if err := os.WriteFile(filepath.Join(data, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runMother(t, "", nil, "--check-config", data)
	if r.code != 2 || !strings.Contains(r.stderr, "adapters.slack-acme.appToken") || strings.Contains(r.stderr, token) {
		t.Errorf("exit %d, stderr %q: want exit 2 naming adapters.slack-acme.appToken without the token", r.code, r.stderr)
	}

	// Starting with an invalid config is the same clear error, not a panic.
	r = runMother(t, "", nil, data)
	if r.code != 2 || strings.Contains(r.stderr, "panic") || !strings.Contains(r.stderr, "appToken") {
		t.Errorf("start with bad config: exit %d, stderr %q", r.code, r.stderr)
	}

	if err := os.WriteFile(filepath.Join(data, "config.json"), []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runMother(t, "", nil, "--check-config", data)
	if r.code != 0 || !strings.Contains(r.stdout, "configuration OK") {
		t.Errorf("empty config: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	r := runMother(t, "", nil, "--version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "mother ") {
		t.Errorf("--version: exit %d, stdout %q", r.code, r.stdout)
	}
}

// stopGently stops a mother process at the end of a test the way systemd
// stops the service: SIGTERM, and SIGKILL only if it has not exited 30 s
// later. A clean stop lets Mother take her idle gate container with her
// (a killed Mother leaves it for her next start to reuse), so the tests do
// not leave gates behind on the engine. exited is closed once the process
// has been waited for. Tests that kill Mother on purpose do that
// themselves.
func stopGently(p *os.Process, exited <-chan struct{}) {
	select {
	case <-exited:
		return
	default:
	}
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = p.Kill()
		<-exited
	}
}

// TestHelpIsConventional: help asked for the usual ways prints the usage
// on stdout and exits 0, for mother and each subcommand; "help" is never
// taken for a data directory; a bad flag says what was wrong first, on
// stderr, and exits 2.
func TestHelpIsConventional(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}, {"setup", "--help"}, {"migrate", "--help"}, {"completion", "-h"}, {"link", "--help"}} {
		cmd := exec.Command(motherBin, args...)
		cmd.Dir = dir
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if err != nil || !strings.Contains(out.String(), "usage: mother") || errb.Len() != 0 {
			t.Errorf("mother %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out.String(), errb.String())
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("help made %v in the working directory", entries)
	}
	r := runMother(t, "", nil, "--bogus")
	if r.code != 2 || !strings.HasPrefix(r.stderr, "mother: flag provided but not defined: -bogus\n") || r.stdout != "" {
		t.Errorf("a bad flag: exit %d\nstdout %q\nstderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestTerminalSessionInATerminal: run in a terminal, as a newcomer does,
// Mother says she is ready and shows a prompt; after each answer the
// prompt comes back; Ctrl-D ends her with status 0. (A pipe gets no
// prompt: TestTerminalAnswersThroughOllama reads stdout exactly.)
func TestTerminalSessionInATerminal(t *testing.T) {
	t.Parallel()
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		return ollamatest.Turn{Text: "Hello from the model."}
	})
	defer fake.Close()
	s := startPty(t, []string{"MOTHER_OLLAMA_URL=" + fake.URL, "MOTHER_GRPC_LISTEN=127.0.0.1:0", "USER=mario"}, "--cli", t.TempDir())
	s.expect("mother ready: terminal, model ollama/")
	s.answer("> ", "hello")
	s.expect("Hello from the model.\n> ")
	if _, err := io.WriteString(s.pty, "\x04"); err != nil {
		t.Fatal(err)
	}
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
