package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// Issue 42, item 6: a chick's attachments are streamed from disk to the
// platform, never held whole in Mother's memory.
const (
	// uploadsFiles and uploadsFileBytes are the row: ten attachments of
	// 25 MiB (Discord's upload limit for a bot).
	uploadsFiles     = 10
	uploadsFileBytes = 25 << 20
	// uploadsRSSBound is what the uploads may raise Mother's RSS by.
	uploadsRSSBound = 64 << 20
)

// TestHostileBackUploads drives real chicks that attach big files, against
// a platform's wire fake, and measures Mother's RSS (a Mother built
// without the race detector) while she posts them.
func TestHostileBackUploads(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	plainMother(t)
	rows := []struct {
		name     string
		platform func(*testing.T, *ollamatest.Server) uploadsPlatform
	}{
		{"Discord", uploadsDiscord},
		{"Slack", uploadsSlack},
		// Telegram is measured in pkg/adapters/telegram (TestUploadMemory):
		// under the race detector its fake here reads the forms too slowly
		// for ten in four minutes (8 of 10 in a race run).
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			uploadsRow(t, api, r.platform)
		})
	}
}

// uploadsMother starts Mother (built without the race detector) with the
// chicks' settings of the hostile suite and extra top-level config, and
// without the terminal: her platform is extra's adapter.
func uploadsMother(t *testing.T, api *client.Client, model *ollamatest.Server, extra map[string]any) *chickProc {
	t.Helper()
	data, _ := chickData(t, api, extra)
	removeGateVolumes(t, api, data)
	p := &chickProc{done: make(chan error, 1)}
	p.cmd = exec.Command(plainMother(t), "--log-level", "info", data)
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "USER=mario"}
	for _, kv := range chickEnv(model) {
		// The fake's token is config.json's, not the environment's.
		if !strings.HasPrefix(kv, "DISCORD_BOT_TOKEN=") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	p.cmd.Stdout = lockedWriter{&p.mu, &p.stdout}
	p.cmd.Stderr = lockedWriter{&p.mu, &p.stderr}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			exited := make(chan struct{})
			go func() {
				<-p.done
				close(exited)
			}()
			stopGently(p.cmd.Process, exited)
		}
	})
	return p
}

// uploadsSums matches sha256sum's lines: the sum and the file's name.
var uploadsSums = regexp.MustCompile(`([0-9a-f]{64})  scratch/(up-\d+\.bin)`)

// uploadsSteps are the chick's calls: bash makes the files and prints
// their sums, then one attach per file.
func uploadsSteps() []step {
	steps := []step{plainCall("make files", fmt.Sprintf(
		"for i in $(seq 0 %d); do head -c %d /dev/urandom > scratch/up-$i.bin || exit 1; done; sha256sum scratch/up-*.bin",
		uploadsFiles-1, uploadsFileBytes))}
	for i := range uploadsFiles {
		steps = append(steps, func(leaked) ollamatest.Call {
			return ollamatest.Call{Name: "attach", Args: map[string]any{"label": "share", "path": fmt.Sprintf("scratch/up-%d.bin", i)}}
		})
	}
	return steps
}

// uploadsSampler records a process's RSS before and its highest since.
type uploadsSampler struct {
	pid            int
	once           sync.Once
	mu             sync.Mutex
	baseline, peak int64
	stop, done     chan struct{}
}

func newUploadsSampler(pid int) *uploadsSampler {
	return &uploadsSampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
}

// start takes the baseline and samples every 50 ms (once).
func (s *uploadsSampler) start() {
	s.once.Do(func() {
		s.mu.Lock()
		s.baseline = vmRSS(s.pid)
		s.mu.Unlock()
		go func() {
			defer close(s.done)
			for {
				r := vmRSS(s.pid)
				s.mu.Lock()
				s.peak = max(s.peak, r)
				s.mu.Unlock()
				select {
				case <-s.stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
	})
}

// end stops sampling and returns the baseline and the peak.
func (s *uploadsSampler) end() (baseline, peak int64) {
	close(s.stop)
	s.once.Do(func() { close(s.done) })
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.baseline, s.peak
}

// uploadsPlatform is a platform's wire fake as the row drives it.
type uploadsPlatform struct {
	// adapters is config.json's "adapters" for Mother on the fake.
	adapters any
	// connected reports whether Mother is on the fake.
	connected func() bool
	// ask posts the message that makes Mother spawn the row's chick.
	ask func(text string)
	// files are the files the fake received in the channel, by name.
	files func() map[string][]byte
}

func uploadsDiscord(t *testing.T, model *ollamatest.Server) uploadsPlatform {
	fake := newDiscordFake(t, 0)
	return uploadsPlatform{
		adapters:  discordConfig(fake, model)["adapters"],
		connected: func() bool { return fake.Connected() == 1 },
		ask:       func(text string) { fake.Say(dGeneral, dMario, "<@"+fake.Bot().ID+"> "+text) },
		files: func() map[string][]byte {
			got := map[string][]byte{}
			for _, m := range fake.Messages(dGeneral) {
				for _, f := range m.Files {
					got[f.Name] = f.Data
				}
			}
			return got
		},
	}
}

func uploadsSlack(t *testing.T, model *ollamatest.Server) uploadsPlatform {
	fake := newSlackFake(t)
	return uploadsPlatform{
		adapters:  slackConfig(fake, model)["adapters"],
		connected: func() bool { return fake.Opens() == 1 },
		ask:       func(text string) { fake.Post(sGeneral, sMario.ID, "<@UBOT> "+text) },
		files: func() map[string][]byte {
			got := map[string][]byte{}
			for _, f := range fake.Files() {
				if f.Channel == sGeneral && len(f.Data) > 0 {
					got[f.Name] = f.Data
				}
			}
			return got
		},
	}
}

// uploadsRow: a chick attaches ten 25 MiB files in a channel of the
// platform's fake; Mother's RSS rises by at most uploadsRSSBound while she
// posts them, and every file reaches the fake whole.
func uploadsRow(t *testing.T, api *client.Client, platform func(*testing.T, *ollamatest.Server) uploadsPlatform) {
	h := newHostileModel(api)
	h.row("uploads", uploadsSteps()...)
	var sampler *uploadsSampler
	var mu sync.Mutex
	made := ""
	h.onTurn["uploads"] = func(_ leaked, done int) {
		if done == 1 { // the files are made; the attachments are next
			sampler.start()
		}
	}
	model := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if res := toolResults(r); len(res) >= 2 && r.Model == chickModel {
			mu.Lock()
			made = res[1]
			mu.Unlock()
		}
		return h.turn(r)
	})
	defer model.Close()
	pf := platform(t, model)
	p := uploadsMother(t, api, model, map[string]any{"adapters": pf.adapters})
	sampler = newUploadsSampler(p.cmd.Process.Pid)
	for deadline := time.Now().Add(30 * time.Second); !pf.connected(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Mother is not on the fake after 30 s:\n%s", tail(p.errs(), 3000))
		}
	}
	pf.ask("uploads of ten big files")
	var got map[string][]byte
	for deadline := time.Now().Add(4 * time.Minute); len(got) < uploadsFiles; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d files posted after 4 minutes:\n%s", len(got), uploadsFiles, tail(p.errs(), 3000))
		}
		got = pf.files()
	}
	baseline, peak := sampler.end()
	t.Logf("Mother's RSS: %d MB before the uploads, %d MB at most during", baseline>>20, peak>>20)
	if baseline <= 0 || peak-baseline > uploadsRSSBound {
		t.Errorf("Mother's RSS went from %d MB to %d MB while she posted ten 25 MiB files, want within %d MB", baseline>>20, peak>>20, uploadsRSSBound>>20)
	}
	mu.Lock()
	want := map[string]string{}
	for _, m := range uploadsSums.FindAllStringSubmatch(made, -1) {
		want[m[2]] = m[1]
	}
	mu.Unlock()
	if len(want) != uploadsFiles {
		t.Fatalf("the chick made %d files, want %d:\n%s", len(want), uploadsFiles, made)
	}
	for name, sum := range want {
		data := got[name]
		if len(data) != uploadsFileBytes || fmt.Sprintf("%x", sha256.Sum256(data)) != sum {
			t.Errorf("%s arrived with %d bytes, sum %x; want %d bytes, the chick's sum %s", name, len(data), sha256.Sum256(data), uploadsFileBytes, sum)
		}
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("exit %d\n%s", code, tail(p.errs(), 3000))
	}
}
