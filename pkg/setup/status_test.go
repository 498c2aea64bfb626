package setup

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// statusRun is a run at the status page step over the configuration
// text cfg ("" for none), answering from in.
func statusRun(t *testing.T, cfg, in string, interactive bool, flag string) (*run, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	r := &run{ctx: t.Context(), o: Options{Interactive: interactive}, f: Flags{StatusPage: flag}, out: &out,
		p: &prompter{in: strings.NewReader(in), out: &out}, cfg: newObject()}
	if cfg != "" {
		var err error
		if r.cfg, err = parseObject([]byte(cfg)); err != nil {
			t.Fatal(err)
		}
		r.exists = true
	}
	return r, &out
}

// listenAt is what the configuration says of metrics.listen: its value,
// and whether it is there at all.
func listenAt(r *run) (string, bool) {
	return r.cfg.str("metrics", "listen"), r.cfg.at("metrics", "listen") != nil
}

// defaultListen is where setup offers the status page on this machine now:
// DefaultStatusListen, or the next free port if a program holds it.
func defaultListen(t *testing.T) string {
	t.Helper()
	addr, _ := freeListen(DefaultStatusListen, statusTries)
	return addr
}

func TestStatusPageStep(t *testing.T) {
	const mine = `{"metrics": {"listen": "127.0.0.1:9999", "token": "a-token-of-at-least-16"}}`
	const declined = `{"metrics": {"listen": ""}}`
	tests := []struct {
		name        string
		cfg, in     string
		interactive bool
		flag        string
		// want is metrics.listen afterwards; "default" is where setup
		// offers it; "absent" is no metrics.listen at all.
		want    string
		prompts []string
		err     error
	}{
		{name: "new, non-interactive: on, on loopback", want: "default"},
		{name: "new, enter", in: "\n", interactive: true, want: "default", prompts: []string{"Serve the status page on http://127.0.0.1:", "/status? [Y/n]: "}},
		{name: "new, yes", in: "yes\n", interactive: true, want: "default"},
		{name: "new, no", in: "n\n", interactive: true, want: ""},
		{name: "new, another port", in: "9470\n", interactive: true, want: "127.0.0.1:9470"},
		{name: "new, another address", in: "[::1]:9471\n", interactive: true, want: "[::1]:9471"},
		{name: "new, a LAN address without a token is asked again", in: "0.0.0.0:9464\nmaybe\nn\n", interactive: true, want: "",
			prompts: []string{"0.0.0.0:9464 is not a loopback address", "want y, n, on, off, a port or host:port"}},
		{name: "declined before, enter keeps no", cfg: declined, in: "\n", interactive: true, want: "", prompts: []string{"/status? [y/N]: "}},
		{name: "declined before, yes", cfg: declined, in: "y\n", interactive: true, want: "default"},
		{name: "existing without metrics, non-interactive: kept off", cfg: `{}`, want: "absent", prompts: []string{"--status-page on serves it"}},
		{name: "existing without metrics, enter: offered", cfg: `{}`, in: "\n", interactive: true, want: "default"},
		{name: "configured, non-interactive: kept", cfg: mine, want: "127.0.0.1:9999", prompts: []string{"Served on http://127.0.0.1:9999/status"}},
		{name: "configured, enter keeps", cfg: mine, in: "\n", interactive: true, want: "127.0.0.1:9999", prompts: []string{"Keep serving the status page there? [Y/n]"}},
		{name: "configured, no", cfg: mine, in: "n\n", interactive: true, want: ""},
		{name: "configured, a LAN address with its token", cfg: mine, flag: "0.0.0.0:9464", want: "0.0.0.0:9464"},
		{name: "flag on keeps what is configured", cfg: mine, flag: "on", want: "127.0.0.1:9999"},
		{name: "flag on", cfg: `{}`, flag: "on", want: "default"},
		{name: "flag off", flag: "off", want: ""},
		{name: "flag port", flag: "9472", want: "127.0.0.1:9472"},
		{name: "flag in a terminal answers the question", flag: "off", interactive: true, want: ""},
		{name: "flag LAN without a token", flag: "0.0.0.0:9464", want: "absent", err: ErrNotVerified},
		{name: "flag bad port", flag: "127.0.0.1:99999", want: "absent", err: ErrNotVerified},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, out := statusRun(t, tt.cfg, tt.in, tt.interactive, tt.flag)
			err := r.statusPage()
			if !errors.Is(err, tt.err) {
				t.Fatalf("statusPage = %v, want %v\n%s", err, tt.err, out)
			}
			got, present := listenAt(r)
			switch want := tt.want; want {
			case "absent":
				if present {
					t.Errorf("metrics.listen = %q, want none", got)
				}
			default:
				if want == "default" {
					want = defaultListen(t)
				}
				if !present || got != want {
					t.Errorf("metrics.listen = %q (there: %v), want %q\n%s", got, present, want, out)
				}
			}
			for _, p := range tt.prompts {
				if !strings.Contains(out.String(), p) {
					t.Errorf("the step did not say %q:\n%s", p, out)
				}
			}
			if _, err := r.p.line(); !errors.Is(err, ErrInputEnded) {
				t.Errorf("answers left unread: %v\n%s", err, out)
			}
		})
	}
}

// TestStatusPageNextFreePort: with the default port taken, setup offers
// the next free one and says why; with all of them taken, the default,
// with a warning.
func TestStatusPageNextFreePort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held := l.Addr().String()
	got, taken := freeListen(held, 50)
	_, hp, _ := net.SplitHostPort(held)
	_, gp, _ := net.SplitHostPort(got)
	h, _ := strconv.Atoi(hp)
	g, _ := strconv.Atoi(gp)
	if !taken || g <= h || g > h+50 || canListen(got) != nil {
		t.Errorf("freeListen(%s) = %s, %v; want a free port after it", held, got, taken)
	}
	if got, taken := freeListen(held, 0); got != held || !taken {
		t.Errorf("freeListen(%s, 0) = %s, %v; want it back, taken", held, got, taken)
	}
	free, _ := freeListen("127.0.0.1:0", 0)
	if free != "127.0.0.1:0" {
		t.Errorf("a free address came back as %s", free)
	}
	if err := canListen(held); err == nil {
		t.Errorf("canListen(%s) = nil while it is held", held)
	}
}

func TestStatusURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:9464": "http://127.0.0.1:9464/status",
		"0.0.0.0:9464":   "http://127.0.0.1:9464/status",
		":9464":          "http://127.0.0.1:9464/status",
		"[::]:9464":      "http://127.0.0.1:9464/status",
		"[::1]:9464":     "http://[::1]:9464/status",
		"localhost:80":   "http://localhost:80/status",
		"pi.lan:9464":    "http://pi.lan:9464/status",
	} {
		if got := statusURL(in); got != want {
			t.Errorf("statusURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestNewConfigServesTheStatusPage: the whole non-interactive setup of a
// new configuration turns the status page on, on loopback, in a file the
// daemon's own loading accepts, and its next steps give the page's
// address; a rerun keeps it and says so.
func TestNewConfigServesTheStatusPage(t *testing.T) {
	model := ollamatest.New()
	defer model.Close()
	model.SetModels("qwen3:30b-a3b", "qwen3:14b")
	data := t.TempDir()
	noEnv := func(string) string { return "" }
	var out bytes.Buffer
	if err := Run(t.Context(), Options{DataDir: data, In: strings.NewReader(""), Out: &out, Getenv: noEnv,
		Flags: Flags{Platforms: "none", OllamaURL: model.URL}}); err != nil {
		t.Fatalf("Run = %v\n%s", err, out.String())
	}
	cfg, err := config.Load(data, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	host, _, err := net.SplitHostPort(cfg.Metrics.Listen)
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("metrics.listen = %q, want 127.0.0.1:PORT", cfg.Metrics.Listen)
	}
	url := "http://" + cfg.Metrics.Listen + "/status"
	if !strings.Contains(out.String(), "Then open "+url+": the status page") {
		t.Errorf("the next steps do not give %s:\n%s", url, out.String())
	}

	b, _ := os.ReadFile(filepath.Join(data, config.File))
	out.Reset()
	if err := Run(t.Context(), Options{DataDir: data, In: strings.NewReader(""), Out: &out, Getenv: noEnv, Flags: Flags{OllamaURL: model.URL}}); err != nil {
		t.Fatalf("rerun = %v\n%s", err, out.String())
	}
	for _, want := range []string{"status page: " + url + " (metrics.listen)", "Served on " + url, "Nothing changed", "Then open " + url} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the rerun does not say %q:\n%s", want, out.String())
		}
	}
	if again, _ := os.ReadFile(filepath.Join(data, config.File)); !bytes.Equal(again, b) {
		t.Errorf("the rerun changed config.json:\n%s\nwas\n%s", again, b)
	}
}
