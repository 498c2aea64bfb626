package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/mother-chat/mother/internal/testenv"
	"github.com/mother-chat/mother/pkg/adapters/discord/discordtest"
	"github.com/mother-chat/mother/pkg/adapters/slack/slacktest"
	"github.com/mother-chat/mother/pkg/adapters/telegram/telegramtest"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/anthropic/anthropictest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/model/openai/openaitest"
)

// End-to-end tests of `mother setup`: the real binary in a real
// pseudo-terminal, answering its questions as an operator would, against
// the wire-level fakes of Discord, Slack, Telegram and Ollama and the real
// Docker engine.

// ptySession is `mother setup` running in a pseudo-terminal.
type ptySession struct {
	t    *testing.T
	cmd  *exec.Cmd
	pty  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	seen int // bytes of out already matched by expect
	wake chan struct{}
	done chan error
}

func startSetup(t *testing.T, env []string, args ...string) *ptySession {
	t.Helper()
	return startPty(t, env, append([]string{"setup"}, args...)...)
}

// startPty runs mother with args in a pseudo-terminal, as a person does.
func startPty(t *testing.T, env []string, args ...string) *ptySession {
	t.Helper()
	return startPtyCmd(t, exec.Command(motherBin, args...), env)
}

// startPtyCmd is startPty for any command (make run, say).
func startPtyCmd(t *testing.T, cmd *exec.Cmd, env []string) *ptySession {
	t.Helper()
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TERM=dumb"}, env...)
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 200})
	if err != nil {
		t.Fatalf("start %s in a pty: %v", strings.Join(cmd.Args, " "), err)
	}
	s := &ptySession{t: t, cmd: cmd, pty: f, wake: make(chan struct{}, 1), done: make(chan error, 1)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			if n > 0 {
				s.mu.Lock()
				// The terminal ends lines with \r\n; the tests match \n.
				s.out.Write(bytes.ReplaceAll(buf[:n], []byte("\r"), nil))
				s.mu.Unlock()
				select {
				case s.wake <- struct{}{}:
				default:
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-s.done
		}
		f.Close()
		if t.Failed() {
			t.Logf("terminal:\n%s", s.text())
		}
	})
	return s
}

func (s *ptySession) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// expect waits for want to appear after what earlier expects matched.
func (s *ptySession) expect(want string) {
	s.t.Helper()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		i := strings.Index(s.out.String()[s.seen:], want)
		if i >= 0 {
			s.seen += i + len(want)
		}
		s.mu.Unlock()
		if i >= 0 {
			return
		}
		select {
		case <-s.wake:
		case <-deadline.C:
			s.t.Fatalf("mother setup: no %q on the terminal within 60s", want)
		}
	}
}

// answer waits for a prompt and types a line.
func (s *ptySession) answer(prompt, line string) {
	s.t.Helper()
	s.expect(prompt)
	if _, err := io.WriteString(s.pty, line+"\r"); err != nil {
		s.t.Fatalf("type %q: %v", line, err)
	}
}

// exit waits for the process and returns its exit status.
func (s *ptySession) exit() int {
	s.t.Helper()
	select {
	case err := <-s.done:
		s.done <- err
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			s.t.Fatalf("mother setup: %v", err)
		}
		return 0
	case <-time.After(60 * time.Second):
		s.t.Fatalf("mother setup did not exit within 60s")
		return -1
	}
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// get follows a path of keys.
func get(m map[string]any, path ...string) any {
	var cur any = m
	for _, k := range path {
		o, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = o[k]
	}
	return cur
}

// jsonKeys lists an object's keys in file order.
func jsonKeys(t *testing.T, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	var keys []string
	depth := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return keys
		}
		if err != nil {
			t.Fatal(err)
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				depth++
			} else {
				depth--
			}
		case string:
			if depth == 1 {
				keys = append(keys, v)
				// skip the value
				var raw json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

const setupDiscordToken = "MTE5.fake-discord-token-for-setup-0123456789"

func TestSetupInteractiveThenDaemonThenRerun(t *testing.T) {
	api := hatcherytest.Docker(t)
	image := hatcherytest.BuildImage(t)
	mario := discordtest.User{ID: "100000000000000011", Username: "mario"}
	luigi := discordtest.User{ID: "100000000000000012", Username: "luigi"}
	dc := discordtest.New(discordtest.Options{Token: setupDiscordToken, Members: []discordtest.User{mario, luigi},
		Channels: []discordtest.Channel{{ID: "700000000000000001", Name: "general", Type: discordtest.TypeText}}})
	defer dc.Close()
	sl := slacktest.New(slacktest.Options{Users: []slacktest.User{{ID: "UADMIN1", Name: "peach", RealName: "Princess Peach"}}})
	defer sl.Close()
	model := ollamatest.New()
	defer model.Close()
	model.SetModels("qwen3:30b-a3b", "qwen3:14b", "gemma:2b")
	model.SetModelCapabilities("gemma:2b", "completion")
	const routerKey = "sk-or-ROUTERKEY-0123456789"
	router := openaitest.New()
	defer router.Close()
	router.SetKey(routerKey)
	router.SetModels(openaitest.Model{ID: "deepseek/deepseek-r1"}, openaitest.Model{ID: "qwen/qwen3-coder"})

	data := t.TempDir()
	hatcherytest.RemoveOnCleanup(t, api, func() string { return hatcherytest.InstanceFile(filepath.Join(data, "chicks")) })
	s := startSetup(t, nil, "--discord-api-url", dc.URL, "--slack-api-url", sl.APIURL(), data)
	s.expect("No configuration yet")
	s.answer("Chat platforms", "discord,slack")
	// A wrong token is caught and asked again.
	s.answer("Discord bot token: ", "not-the-token-at-all-xxxxxxxx")
	s.expect("token refused by Discord")
	s.answer("Discord bot token: ", setupDiscordToken)
	s.expect("✓ bot mother (900000000000000001), in 1 guild(s): Test Guild")
	s.expect("1) mario (" + mario.ID + ")")
	s.answer("Admins", "mario")
	s.expect("✓ admins: mario (" + mario.ID + ")")
	s.answer("Everyone else is (member or guest)", "guest")
	s.expect("✓ everyone else: guest")
	s.answer("Slack bot token (xoxb-...): ", "xoxb-wrong-token")
	s.expect("bot token refused by Slack")
	s.answer("Slack bot token (xoxb-...): ", slacktest.BotToken)
	s.expect("✓ bot mother (UBOT) in workspace Fake")
	s.answer("Slack app-level token (xapp-...): ", "xapp-wrong")
	s.expect("app-level token refused by Slack")
	s.answer("Slack app-level token (xapp-...): ", slacktest.AppToken)
	s.expect("✓ Socket Mode connection opened")
	s.expect("Princess Peach (peach) (UADMIN1)")
	s.answer("Admins", "1")
	s.expect("✓ admins: Princess Peach (peach) (UADMIN1)")
	s.answer("Everyone else is (member or guest)", "")
	s.expect("✓ everyone else: member")

	s.answer("Ollama URL", model.URL)
	s.expect("gemma:2b  ! no tool support")
	s.answer("Mother's model (number or name)", "gemma:2b")
	s.expect("does not support tools")
	s.answer("Use it anyway?", "n")
	s.answer("Mother's model (number or name)", "qwen3:30b-a3b")
	s.answer("Chicks' model (tier local) (number or name) [qwen3:14b]", "")

	// A tier on an OpenAI-compatible server: a wrong key is refused and
	// asked again, then the models are listed live.
	s.answer("Add a chick tier on another model server", "y")
	s.answer("Which: openai (any OpenAI-compatible server) or anthropic", "")
	s.answer("Base URL, with its /v1", router.BaseURL())
	s.answer("A name for this server", "router")
	s.answer("API key (enter for none", "sk-wrong-key")
	s.expect("the key was refused by router")
	s.answer("Type the key again?", "y")
	s.answer("API key", routerKey)
	s.expect("✓ router at " + router.BaseURL() + ", 2 model(s): deepseek/deepseek-r1, qwen/qwen3-coder")
	s.answer("Model for the tier (number or name)", "2")
	s.answer("Tier name [router]", "coder")
	s.answer("When should Mother pick it", "coding goals that need a bigger model")
	s.expect("✓ tier coder: openai:router/qwen/qwen3-coder")
	s.answer("Add a speech server", "")

	s.answer("Chick image [mother-chick:dev]", image)
	s.answer("Docker engine for chicks", "")
	s.answer("Name for this host [local]", "")
	s.expect("✓ Docker ")
	s.expect("✓ image " + image + " present")
	s.answer("Add another Docker host", "")
	s.answer("Tokens one chick may use [2m]", "")
	s.answer("Chick tokens per channel per day (0: no cap) [20m]", "")
	s.answer("Chick tokens per user per day (0: no cap) [10m]", "5m")
	// The status page, on loopback: offered on 9464 (or the next free
	// port); another port is an answer too (this one is picked free, so
	// the daemon below can surely listen on it).
	statusListen := freePort(t)
	s.expect("The status page shows what Mother is doing")
	s.answer("Serve the status page on http://127.0.0.1:", statusListen)
	s.expect("✓ status page on http://" + statusListen + "/status")
	s.answer("Write ", "")
	s.expect("Mother accepts it")
	s.expect("mother --check-config " + data)
	s.expect("Then open http://" + statusListen + "/status: the status page")
	if code := s.exit(); code != 0 {
		t.Fatalf("mother setup exited %d", code)
	}
	for _, tok := range []string{setupDiscordToken, slacktest.BotToken, slacktest.AppToken, "not-the-token-at-all", routerKey, "sk-wrong-key"} {
		if strings.Contains(s.text(), tok) {
			t.Errorf("the terminal shows the token %q", tok)
		}
	}

	path := filepath.Join(data, "config.json")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("config.json mode %v, want 0600", fi.Mode().Perm())
	}
	cfg := readJSON(t, path)
	for _, c := range []struct {
		path []string
		want any
	}{
		{[]string{"adapters", "discord", "type"}, "discord"},
		{[]string{"adapters", "discord", "botToken"}, setupDiscordToken},
		{[]string{"adapters", "discord", "apiURL"}, dc.URL},
		{[]string{"adapters", "discord", "admins"}, []any{mario.ID}},
		{[]string{"roles", "adapters", "discord", "default"}, "guest"},
		{[]string{"adapters", "slack", "botToken"}, slacktest.BotToken},
		{[]string{"adapters", "slack", "appToken"}, slacktest.AppToken},
		{[]string{"adapters", "slack", "admins"}, []any{"UADMIN1"}},
		{[]string{"providers", "ollama", "url"}, model.URL},
		{[]string{"model", "id"}, "qwen3:30b-a3b"},
		{[]string{"chicks", "tiers", "local", "model"}, "qwen3:14b"},
		{[]string{"providers", "openai", "router", "baseURL"}, router.BaseURL()},
		{[]string{"providers", "openai", "router", "apiKey"}, routerKey},
		{[]string{"chicks", "tiers", "coder", "provider"}, "openai:router"},
		{[]string{"chicks", "tiers", "coder", "model"}, "qwen/qwen3-coder"},
		{[]string{"chicks", "tiers", "coder", "description"}, "coding goals that need a bigger model"},
		{[]string{"chicks", "image"}, image},
		{[]string{"budgets", "channelDailyTokens"}, float64(20_000_000)},
		{[]string{"budgets", "userDailyTokens"}, float64(5_000_000)},
		{[]string{"metrics", "listen"}, statusListen},
	} {
		if got := get(cfg, c.path...); !reflect.DeepEqual(got, c.want) {
			t.Errorf("config %s = %#v, want %#v", strings.Join(c.path, "."), got, c.want)
		}
	}
	if r := runMother(t, "", nil, "--check-config", data); r.code != 0 {
		t.Fatalf("mother --check-config = %d:\n%s%s", r.code, r.stdout, r.stderr)
	}

	// The daemon starts with it and connects to both platforms.
	d := &daemon{stderr: &lockedBuffer{}, done: make(chan error, 1)}
	d.cmd = exec.Command(motherBin, data)
	d.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "MOTHER_GRPC_LISTEN=127.0.0.1:0"}
	d.cmd.Stdout, d.cmd.Stderr = d.stderr, d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	dc.Wait(t, 60*time.Second, "Mother's gateway session", func() bool { return dc.ConnectedLocked() > 0 })
	sl.Wait(t, 60*time.Second, "Mother's Socket Mode connection", func() bool { return sl.OpensLocked() > 1 })
	// And serves the status page where setup said, showing both adapters.
	waitHTTP(t, "http://"+statusListen+"/healthz", 30*time.Second)
	if resp, err := http.Get("http://" + statusListen + "/status"); err != nil {
		t.Errorf("the status page: %v", err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `data-adapter="discord"`) || !strings.Contains(string(body), `data-adapter="slack"`) {
			t.Errorf("the status page: %s\n%s", resp.Status, body)
		}
	}
	d.stop(t)
	if t.Failed() {
		t.Logf("mother's log:\n%s", d.stderr.String())
		return
	}

	// A rerun that changes one answer changes that field only; fields
	// setup does not ask about stay as they were, in their place.
	before, _ := os.ReadFile(path)
	edited := bytes.Replace(before, []byte(`"model": {`), []byte(`"log": {"level": "debug"},
  "model": {`), 1)
	edited = bytes.Replace(edited, []byte(`"type": "discord"`), []byte(`"type": "discord", "quietChannels": ["700000000000000001"]`), 1)
	if err := os.WriteFile(path, edited, 0o600); err != nil {
		t.Fatal(err)
	}
	keysBefore := jsonKeys(t, edited)
	s = startSetup(t, nil, data)
	s.expect("Current configuration:")
	s.expect("adapter discord: discord, botToken ****")
	s.answer("Chat platforms (discord, slack, telegram; comma-separated, 'none' for none) [discord,slack]", "")
	s.answer("Discord bot token [enter keeps ****", "")
	s.expect("✓ bot mother")
	s.expect("[admin]")
	s.answer("Admins (numbers, names or ids, comma-separated; 'none' for none) ["+mario.ID+"]", "")
	s.answer("Everyone else is (member or guest) [guest]", "")
	s.answer("Slack bot token (xoxb-...) [enter keeps ****]", "")
	s.answer("Slack app-level token (xapp-...) [enter keeps ****]", "")
	s.expect("✓ Socket Mode connection opened")
	s.answer("Admins (numbers, names or ids, comma-separated; 'none' for none) [UADMIN1]", "")
	s.answer("Everyone else is (member or guest) [member]", "")
	s.answer("Ollama URL ["+model.URL+"]", "")
	s.answer("Mother's model (number or name) [qwen3:30b-a3b]", "")
	s.answer("Chicks' model (tier local) (number or name) [qwen3:14b]", "")
	s.answer("Add a chick tier on another model server", "")
	s.answer("Add a speech server", "")
	s.answer("Chick image ["+image+"]", "")
	s.expect("Host local: unix:///var/run/docker.sock")
	s.answer("Keep host local?", "")
	s.answer("Add another Docker host", "")
	s.answer("Tokens one chick may use [2m]", "")
	s.answer("Chick tokens per channel per day (0: no cap) [20m]", "8m")
	s.answer("Chick tokens per user per day (0: no cap) [5m]", "")
	s.expect("Served on http://" + statusListen + "/status (metrics.listen " + statusListen + ")")
	s.answer("Keep serving the status page there?", "")
	s.expect("Changes:\n  budgets.channelDailyTokens\n")
	s.answer("Write ", "y")
	s.expect("Mother accepts it")
	if code := s.exit(); code != 0 {
		t.Fatalf("mother setup (rerun) exited %d", code)
	}
	after, _ := os.ReadFile(path)
	if got := jsonKeys(t, after); !reflect.DeepEqual(got, keysBefore) {
		t.Errorf("top-level keys after the rerun %v, want %v (same order)", got, keysBefore)
	}
	var want, got map[string]any
	json.Unmarshal(edited, &want)
	json.Unmarshal(after, &got)
	want["budgets"].(map[string]any)["channelDailyTokens"] = float64(8_000_000)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after the rerun config.json is\n%s\nwant only budgets.channelDailyTokens changed from\n%s", after, edited)
	}

	// A rerun that changes nothing leaves the file as it is.
	s = startSetup(t, nil, data)
	for _, a := range []string{"Chat platforms", "Discord bot token", "Admins", "Everyone else", "Slack bot token", "Slack app-level token", "Admins",
		"Everyone else", "Ollama URL", "Mother's model", "Chicks' model", "Add a chick tier", "Add a speech server", "Chick image", "Keep host local?", "Add another Docker host",
		"Tokens one chick", "per channel per day", "per user per day", "Keep serving the status page there?"} {
		s.answer(a, "")
	}
	s.expect("Nothing changed")
	if code := s.exit(); code != 0 {
		t.Fatalf("mother setup (no change) exited %d", code)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, after) {
		t.Errorf("a rerun without changes rewrote config.json")
	}
}

// Ctrl-C while a token is typed ends setup, writes nothing and leaves the
// terminal echoing again.
func TestSetupInterruptRestoresTheTerminal(t *testing.T) {
	data := t.TempDir()
	s := startSetup(t, nil, data)
	s.answer("Chat platforms", "discord")
	s.expect("Discord bot token: ")
	if _, err := s.pty.Write([]byte("half-a-tok\x03")); err != nil {
		t.Fatal(err)
	}
	if code := s.exit(); code != 130 {
		t.Errorf("exit status %d, want 130", code)
	}
	s.expect("interrupted; nothing written")
	if _, err := os.Stat(filepath.Join(data, "config.json")); err == nil {
		t.Error("config.json written")
	}
	tio, err := unix.IoctlGetTermios(int(s.pty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if tio.Lflag&unix.ECHO == 0 {
		t.Error("the terminal was left without echo")
	}
	if strings.Contains(s.text(), "half-a-tok") {
		t.Error("the token being typed was echoed")
	}
}

func TestSetupNonInteractiveTelegram(t *testing.T) {
	tg := telegramtest.New()
	defer tg.Close()
	tg.AddChat(telegramtest.Chat{ID: 555, Type: "private"})
	tg.AddUser(telegramtest.User{ID: 555, FirstName: "Mario", Username: "mario"})
	tg.Post(555, 555, "hello")
	model := ollamatest.New()
	defer model.Close()
	model.SetModels("qwen3:30b-a3b", "qwen3:14b")

	data := t.TempDir()
	args := func(token string) []string {
		return []string{"setup", "--non-interactive", "--platforms", "telegram", "--telegram-token", token,
			"--telegram-api-url", tg.APIURL(), "--telegram-admins", "mario", "--ollama-url", model.URL,
			"--chick-tokens", "1m", data}
	}
	r := runMother(t, "", nil, args("123456789:WRONG-token")...)
	if r.code != 2 || !strings.Contains(r.stdout, "token refused by Telegram") {
		t.Fatalf("a wrong token: exit %d, want 2 with the refusal shown:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(data, "config.json")); err == nil {
		t.Fatal("config.json written although the token was refused")
	}
	r = runMother(t, "", nil, args(telegramtest.BotToken)...)
	if r.code != 0 {
		t.Fatalf("mother setup = %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"✓ bot @mother_bot (123456789)", "✓ admins: Mario (@mario) (555)", "✓ Mother accepts it", "mother " + data} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout+r.stderr, telegramtest.BotToken) {
		t.Errorf("the output shows the token")
	}
	cfg := readJSON(t, filepath.Join(data, "config.json"))
	if got := get(cfg, "adapters", "telegram", "admins"); !reflect.DeepEqual(got, []any{"555"}) {
		t.Errorf("admins = %v, want [555]", got)
	}
	if got := get(cfg, "budgets", "chickTokens"); got != float64(1_000_000) {
		t.Errorf("budgets.chickTokens = %v, want 1000000", got)
	}
	if r := runMother(t, "", nil, "--check-config", data); r.code != 0 {
		t.Fatalf("mother --check-config = %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The adapter still receives the message setup looked at.
	if tg.Confirmed() != 0 {
		t.Errorf("setup confirmed Telegram updates (offset %d): the adapter would miss them", tg.Confirmed())
	}
}

// A tcp:// Docker host gets TLS material generated on request; the host
// not answering yet is a warning, and the next steps say what to install
// where.
func TestSetupNonInteractiveRemoteDockerHost(t *testing.T) {
	model := ollamatest.New()
	defer model.Close()
	model.SetModels("qwen3:30b-a3b", "qwen3:14b")
	data := t.TempDir()
	r := runMother(t, "", nil, "setup", "--non-interactive", "--platforms", "none", "--ollama-url", model.URL,
		"--docker-host", "gpu=tcp://127.0.0.1:1", "--docker-tls-generate", "gpu.lan,127.0.0.1",
		"--mother-address", "10.0.0.5:7777", data)
	if r.code != 0 {
		t.Fatalf("mother setup = %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	tlsDir := filepath.Join(data, "docker-tls", "gpu")
	for _, want := range []string{"✓ TLS material in " + tlsDir, "✗ gpu:", "on the Docker host gpu: sudo install -d -m 0700 /etc/docker/tls",
		"keep " + filepath.Join(tlsDir, "ca-key.pem") + " offline", "grpc.listen set to 0.0.0.0:7777", "✓ Mother accepts it"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	cfg := readJSON(t, filepath.Join(data, "config.json"))
	hosts, _ := get(cfg, "chicks", "hosts").([]any)
	if len(hosts) != 1 {
		t.Fatalf("chicks.hosts = %v, want one", get(cfg, "chicks", "hosts"))
	}
	want := map[string]any{"name": "gpu", "address": "tcp://127.0.0.1:1", "motherAddress": "10.0.0.5:7777",
		"tlsCA": filepath.Join(tlsDir, "ca.pem"), "tlsCert": filepath.Join(tlsDir, "cert.pem"), "tlsKey": filepath.Join(tlsDir, "key.pem")}
	if !reflect.DeepEqual(hosts[0], want) {
		t.Errorf("chicks.hosts[0] = %v, want %v", hosts[0], want)
	}
	if got := get(cfg, "grpc", "listen"); got != "0.0.0.0:7777" {
		t.Errorf("grpc.listen = %v, want 0.0.0.0:7777", got)
	}
	for _, f := range []string{"ca.pem", "cert.pem", "key.pem", "server-cert.pem", "server-key.pem", "ca-key.pem"} {
		if _, err := os.Stat(filepath.Join(tlsDir, f)); err != nil {
			t.Errorf("TLS file: %v", err)
		}
	}
	if r := runMother(t, "", nil, "--check-config", data); r.code != 0 {
		t.Fatalf("mother --check-config = %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestSetupAddsTiersOnOtherProviders: mother setup --non-interactive adds
// a chick tier on an OpenAI-compatible server (its key checked and its
// models listed live; a refused key fails) and a Claude tier for hard
// goals; the result passes --check-config, and a new config without
// these flags has no paid tier.
func TestSetupAddsTiersOnOtherProviders(t *testing.T) {
	t.Parallel()
	ol := ollamatest.New()
	defer ol.Close()
	ol.SetModels("qwen3:30b-a3b", "qwen3:14b")
	vllm := openaitest.New()
	defer vllm.Close()
	vllm.SetKey("sk-router-GOODKEY-123456")
	vllm.SetModels(openaitest.Model{ID: "qwen/qwen3-coder"}, openaitest.Model{ID: "deepseek/deepseek-r1"})
	claude := anthropictest.New()
	defer claude.Close()
	claude.SetAPIKey("sk-ant-GOODKEY-654321")
	claude.SetModels("claude-haiku-4-5", "claude-sonnet-4-5")

	base := []string{"setup", "--non-interactive", "--platforms", "none", "--ollama-url", ol.URL}
	// A key the server refuses: setup fails and writes nothing.
	data := t.TempDir()
	r := runMother(t, "", nil, append(base, "--tier-provider", "openai", "--tier-url", vllm.BaseURL(), "--tier-endpoint", "router",
		"--tier-key", "sk-wrong", "--tier-model", "qwen/qwen3-coder", data)...)
	if r.code == 0 || !strings.Contains(r.stdout, "the key was refused") {
		t.Errorf("a refused key: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(data, "config.json")); err == nil {
		t.Error("config.json written despite the refused key")
	}
	// The right key, from the environment.
	r = runMother(t, "", []string{"ROUTER_KEY=sk-router-GOODKEY-123456"}, append(base, "--tier-provider", "openai", "--tier-url", vllm.BaseURL(), "--tier-endpoint", "router",
		"--tier-key-env", "ROUTER_KEY", "--tier-model", "qwen/qwen3-coder", "--tier-name", "coder", data)...)
	if r.code != 0 || !strings.Contains(r.stdout, "✓ router at "+vllm.BaseURL()+", 2 model(s): deepseek/deepseek-r1, qwen/qwen3-coder") || !strings.Contains(r.stdout, "✓ tier coder: openai:router/qwen/qwen3-coder") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	cfg := readJSON(t, filepath.Join(data, "config.json"))
	if get(cfg, "providers", "openai", "router", "baseURL") != vllm.BaseURL() || get(cfg, "providers", "openai", "router", "apiKeyEnv") != "ROUTER_KEY" ||
		get(cfg, "providers", "openai", "router", "apiKey") != nil || get(cfg, "chicks", "tiers", "coder", "provider") != "openai:router" {
		t.Errorf("config: %v", cfg)
	}
	// A Claude tier, added to the same config.
	r = runMother(t, "", nil, "setup", "--non-interactive", "--tier-provider", "anthropic", "--tier-url", claude.URL, "--tier-key", "sk-ant-GOODKEY-654321", data)
	if r.code != 0 || !strings.Contains(r.stdout, "✓ tier hard: anthropic/claude-sonnet-4-5") || strings.Contains(r.stdout, "GOODKEY") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	cfg = readJSON(t, filepath.Join(data, "config.json"))
	if d, _ := get(cfg, "chicks", "tiers", "hard", "description").(string); !strings.Contains(d, "hard goals") || get(cfg, "chicks", "tiers", "coder", "model") != "qwen/qwen3-coder" {
		t.Errorf("config: %v", cfg)
	}
	if r := runMother(t, "", []string{"ROUTER_KEY=x"}, "--check-config", data); r.code != 0 {
		t.Fatalf("mother --check-config = %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Without those flags, a new config has no paid tier.
	plain := t.TempDir()
	if r := runMother(t, "", nil, append(base, plain)...); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stdout)
	}
	if tiers, _ := get(readJSON(t, filepath.Join(plain, "config.json")), "chicks", "tiers").(map[string]any); len(tiers) != 1 || tiers["local"] == nil {
		t.Errorf("a plain setup's tiers: %v", tiers)
	}
}

// TestSetupNextStepsWork: the steps setup prints at the end are commands
// that work as printed: with no chat platform the terminal (--cli), with
// this binary's own path; the models are numbered for the questions that
// take a number. The configuration it writes by default serves the status
// page on loopback, at the address the last step gives.
func TestSetupNextStepsWork(t *testing.T) {
	t.Parallel()
	ol := ollamatest.NewFunc(func(ollamatest.Request) ollamatest.Turn { return ollamatest.Turn{Text: "Hello from the terminal."} })
	defer ol.Close()
	ol.SetModels("qwen3:14b", "qwen3:30b-a3b")
	data := t.TempDir()
	r := runMother(t, "", nil, "setup", "--non-interactive", "--platforms", "none", "--ollama-url", ol.URL, "--model", "2", data)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"1. qwen3:14b  tools", "2. qwen3:30b-a3b  tools", "✓ Mother's model: qwen3:30b-a3b",
		motherBin + " --check-config " + data, motherBin + " --cli " + data + "    (no chat platform is configured"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	m := regexp.MustCompile(`\nThen open (http://(127\.0\.0\.1:\d+)/status): the status page`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("the next steps do not give the status page on loopback:\n%s", r.stdout)
	}
	page, listen := m[1], m[2]
	if got := get(readJSON(t, filepath.Join(data, "config.json")), "metrics", "listen"); got != listen {
		t.Errorf("metrics.listen = %v, want %s (the address the next steps give)", got, listen)
	}
	// The printed command runs, and serves the page there.
	p := startMotherBinary(t, motherBin, data, []string{"MOTHER_OLLAMA_URL=" + ol.URL, "MOTHER_GRPC_LISTEN=127.0.0.1:0"})
	io.WriteString(p.stdin, "hi\n")
	p.waitOut(t, "Hello from the terminal.", time.Minute)
	resp, err := http.Get(page)
	if err != nil {
		t.Fatalf("GET %s: %v", page, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `<section id="chicks">`) || !strings.Contains(string(body), `<section id="recent">`) {
		t.Errorf("GET %s: %s\n%s", page, resp.Status, body)
	}
	p.stdin.Close()
	if code := p.wait(t, time.Minute); code != 0 {
		t.Errorf("%s --cli %s: exit %d\n%s%s", motherBin, data, code, p.out(), p.errs())
	}
}

// TestSetupAsAUserWithoutDocker: mother setup run by a user who may not
// use the local Docker socket (as `sudo -u mother mother setup` often is)
// says how to fix it: the docker group, or a remote engine.
func TestSetupAsAUserWithoutDocker(t *testing.T) {
	t.Parallel()
	hatcherytest.Docker(t) // the engine is there; this user may not use it
	if os.Getuid() != 0 {
		testenv.Unavailable(t, "not root: cannot run mother setup as another user")
	}
	cred := otherUser(t)
	dir, err := os.MkdirTemp("", "setup-user-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "mother")
	b, err := os.ReadFile(motherBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	os.Mkdir(data, 0o700)
	if err := os.Chown(data, int(cred.Uid), int(cred.Gid)); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	ol := ollamatest.New()
	defer ol.Close()
	ol.SetModels("qwen3:30b-a3b", "qwen3:14b")
	cmd := exec.Command(bin, "setup", "--non-interactive", "--platforms", "none", "--ollama-url", ol.URL, data)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + data}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := cmd.CombinedOutput()
	noRace(t, "mother setup", string(out))
	u, _ := user.LookupId(strconv.Itoa(int(cred.Uid)))
	want := "may not use /var/run/docker.sock: add it to the group that owns the socket (sudo usermod -aG docker " + u.Username
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), "--docker-host") {
		t.Errorf("mother setup as %s: %v\n%s", u.Username, err, out)
	}
}
