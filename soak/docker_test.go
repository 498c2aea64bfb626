//go:build soak

package soak

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/internal/testenv"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// engine is a private Docker engine (its own dockerd, data root and
// socket) that a scenario may stop and restart without disturbing the
// machine's engine or anyone using it.
type engine struct {
	dir, sock string
	// bridge is the engine's own (never docker0; see hatcherytest.OwnBridge).
	bridge string
	cmd    *exec.Cmd
	done   chan error
}

// newEngine prepares a private engine's directories; start runs it.
func newEngine(t *testing.T) *engine {
	t.Helper()
	if os.Getuid() != 0 {
		testenv.Unavailable(t, "the engine scenarios run a private dockerd and need root")
	}
	if _, err := exec.LookPath("dockerd"); err != nil {
		testenv.Unavailable(t, "no dockerd binary")
	}
	dir, err := os.MkdirTemp("/tmp", "soak-dockerd-")
	if err != nil {
		t.Fatal(err)
	}
	e := &engine{dir: dir, sock: filepath.Join(dir, "docker.sock"), bridge: hatcherytest.OwnBridge(t, dir)}
	t.Cleanup(func() {
		e.stop(t)
		exec.Command("umount", filepath.Join(dir, "exec", "netns", "default")).Run()
		os.RemoveAll(dir)
	})
	return e
}

func (e *engine) host() string { return "unix://" + e.sock }

func (e *engine) client(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.NewClientWithOpts(client.WithHost(e.host()), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// start runs dockerd and waits until it answers.
func (e *engine) start(t *testing.T) time.Duration {
	t.Helper()
	begin := time.Now()
	e.cmd = exec.Command("dockerd", "--host", e.host(), "--data-root", filepath.Join(e.dir, "root"), "--exec-root", filepath.Join(e.dir, "exec"),
		"--pidfile", filepath.Join(e.dir, "docker.pid"), "--bridge", e.bridge, "--iptables=false", "--ip6tables=false", "--ip-masq=false")
	logf, err := os.OpenFile(filepath.Join(e.dir, "dockerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	e.cmd.Stdout, e.cmd.Stderr = logf, logf
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e.done = make(chan error, 1)
	go func() { e.done <- e.cmd.Wait(); logf.Close() }()
	c, err := client.NewClientWithOpts(client.WithHost(e.host()), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.ContainerList(ctx, container.ListOptions{Limit: 1})
		cancel()
		if err == nil {
			return time.Since(begin)
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(e.dir, "dockerd.log"))
			t.Fatalf("private dockerd did not come up: %v\n%s", err, tail(string(b), 20))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop shuts dockerd down as an operator or an upgrade would (SIGTERM:
// it stops its containers, then exits).
func (e *engine) stop(t *testing.T) time.Duration {
	t.Helper()
	if e.cmd == nil || e.cmd.ProcessState != nil {
		return 0
	}
	begin := time.Now()
	e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.done:
	case <-time.After(90 * time.Second):
		e.cmd.Process.Kill()
		<-e.done
	}
	return time.Since(begin)
}

// loadImage copies the chick image from the machine's engine.
func (e *engine) loadImage(t *testing.T, from *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rc, err := from.ImageSave(ctx, []string{hatcherytest.Image})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	c := e.client(t)
	resp, err := c.ImageLoad(ctx, rc)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body) // the load completes as its answer is read
	resp.Body.Close()
	if _, err := c.ImageInspect(ctx, hatcherytest.Image); err != nil {
		t.Fatalf("the image did not load into the private engine: %v", err)
	}
}

// TestSoakDockerEngine: the Docker host is down when Mother starts (she
// runs, says so in her log, and a chick asked for waits in the queue); the
// engine comes up and the waiting chick runs; the engine is restarted
// while a chick runs (the user is told how it ended, nothing is left
// behind once the engine is back), and chicks work again.
func TestSoakDockerEngine(t *testing.T) {
	local := docker(t)
	e := newEngine(t)
	// The image goes in once, before Mother ever sees the engine.
	e.start(t)
	e.loadImage(t, local)
	e.stop(t)
	spawn := spawner("docker-")
	chick := stepper(12)
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if turn, ok := spawn(r); ok {
			return turn
		}
		return chick(r)
	})
	defer fake.Close()
	cfg := chicksConfig(t, fake.URL, map[string]any{"hosts": []any{map[string]any{"name": "soak", "address": e.host(), "capacity": 4}}})
	data := newData(t, nil, cfg)

	// 1. The engine is down at start: the chick asked for waits.
	p := startMother(t, data, true)
	p.waitErr(t, "chicks unavailable until the Docker host answers", 30*time.Second)
	from := p.mark()
	p.say(t, "please do docker-1")
	p.waitFrom(t, from, "Started.", time.Minute)
	stillAnswers(t, p, "with the engine down")
	figure(t, "engine down at start: Mother started and logged \"chicks unavailable until the Docker host answers\"; the chick asked for was queued and she went on answering")

	// 2. The engine comes up: the waiting chick runs.
	up := e.start(t)
	begin := time.Now()
	p.waitFrom(t, from, "docker-1 complete", 2*time.Minute)
	api := e.client(t)
	figure(t, "engine started (%s): the queued chick ran to the end %s later (the hatchery probes a host that was down every 30 s)", up.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))

	// 3. The engine restarts mid-run.
	from = p.mark()
	p.say(t, "please do docker-3")
	p.waitFrom(t, from, "→ step 2 of docker-3", 2*time.Minute)
	down := e.stop(t)
	whileDown := false
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && !strings.Contains(p.stdout.String()[from:], "(chick ") {
		time.Sleep(50 * time.Millisecond)
	}
	whileDown = strings.Contains(p.stdout.String()[from:], "(chick ")
	upAgain := e.start(t)
	p.waitFrom(t, from, "(chick ", 2*time.Minute)
	reported := p.stdout.String()[from:]
	// Nothing of Mother's is left on the engine once it is back.
	deadline = time.Now().Add(2 * time.Minute)
	for len(containers(t, api, data)) != 0 {
		if time.Now().After(deadline) {
			var names []string
			for _, c := range containers(t, api, data) {
				names = append(names, c.Names[0]+" "+c.State)
			}
			t.Fatalf("containers left on the engine after its restart: %v", names)
		}
		time.Sleep(200 * time.Millisecond)
	}
	from = p.mark()
	p.say(t, "please do docker-4")
	p.waitFrom(t, from, "docker-4 complete", 2*time.Minute)
	stillAnswers(t, p, "after the engine restart")
	if code := p.finish(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if n := len(containers(t, api, data)); n != 0 {
		t.Errorf("%d containers left", n)
	}
	files, lines := checkStore(t, data)
	when := "once it was back"
	if whileDown {
		when = "while it was down"
	}
	figure(t, "engine restarted mid-run (stop %s, start %s): the user was told %s (%q); no container left once the engine was back; the next chick ran to the end", down.Round(time.Millisecond), upAgain.Round(time.Millisecond), when, oneLine(reported))
	figure(t, "store: %d JSONL files, %d lines, all parse", files, lines)
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if i := strings.Index(s, "stopped:"); i >= 0 {
		s = s[i:]
	}
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}
