//go:build soak

package soak

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// modelFor is the fake model of a chick scenario: Mother spawns chicks for
// goals with the given prefix, chicks answer with chick(r).
func modelFor(prefix string, chick func(r ollamatest.Request) ollamatest.Turn) *ollamatest.Server {
	spawn := spawner(prefix)
	return ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if turn, ok := spawn(r); ok {
			return turn
		}
		return chick(r)
	})
}

// longWait is a chick that starts a long command and is then killed,
// hung or crashed by the scenario.
func longWait(r ollamatest.Request) ollamatest.Turn {
	if toolCount(r) == 0 {
		return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "bash", Args: map[string]any{"label": "long wait for " + r.LastUser(), "command": "sleep 60"}}}}
	}
	return ollamatest.Turn{Text: "woke up"}
}

// stillAnswers checks Mother answers a message after the fault.
func stillAnswers(t *testing.T, p *proc, word string) time.Duration {
	t.Helper()
	msg := "are you still there " + word
	p.say(t, msg)
	return p.waitOut(t, "Yes, I am here: "+lastWords(msg), time.Minute)
}

// TestSoakChickCrash: a chick's container dies under it (SIGKILL from the
// engine, as an OOM kill or a crash would). Mother notices at once, tells
// the channel, frees the slot, keeps answering, and leaves nothing behind.
func TestSoakChickCrash(t *testing.T) {
	api := docker(t)
	fake := modelFor("crash-", longWait)
	defer fake.Close()
	data := newData(t, api, chicksConfig(t, fake.URL, nil))
	p := startMother(t, data, true)
	p.say(t, "please do crash-1")
	p.waitOut(t, "→ long wait for crash-1", 2*time.Minute)
	c := running(t, api, data, 10*time.Second)
	start := time.Now()
	if err := api.ContainerKill(ctx10(t), c.ID, "KILL"); err != nil {
		t.Fatal(err)
	}
	p.waitOut(t, "crashed (the chick exited with code 137 without a result)", time.Minute)
	told := time.Since(start)
	answer := stillAnswers(t, p, "after the crash")
	if code := p.finish(t, time.Minute); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if n := len(containers(t, api, data)); n != 0 {
		t.Errorf("%d containers left", n)
	}
	files, lines := checkStore(t, data)
	figure(t, "container SIGKILLed mid-run: user told in %s (\"crashed (the chick exited with code 137 without a result)\"); Mother answered the next message in %s; 0 containers left; %d JSONL files, %d lines, all parse",
		told.Round(time.Millisecond), answer.Round(time.Millisecond), files, lines)
}

// TestSoakChickHang: a chick that stops sending heartbeats (its process
// stopped with SIGSTOP; its container frozen with docker pause) is
// declared hung after three missed intervals, killed, reported and
// removed.
func TestSoakChickHang(t *testing.T) {
	api := docker(t)
	fake := modelFor("hang-", longWait)
	defer fake.Close()
	data := newData(t, api, chicksConfig(t, fake.URL, nil))
	p := startMother(t, data, true)
	for i, how := range []string{"SIGSTOP of the chick process", "docker pause of its container"} {
		p.say(t, fmt.Sprintf("please do hang-%d", i))
		p.waitOut(t, fmt.Sprintf("→ long wait for hang-%d", i), 2*time.Minute)
		c := running(t, api, data, 10*time.Second)
		start := time.Now()
		if i == 0 {
			insp, err := api.ContainerInspect(ctx10(t), c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(insp.State.Pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
		} else if err := api.ContainerPause(ctx10(t), c.ID); err != nil {
			t.Fatal(err)
		}
		// "for 1.5s" (3 missed of 500 ms), or longer for a chick whose
		// messages the watchdog measured further apart on a loaded
		// machine.
		const hung = "stopped answering (no heartbeat for "
		before := strings.Count(p.stdout.String(), hung)
		deadline := time.Now().Add(time.Minute)
		for strings.Count(p.stdout.String(), hung) == before {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the hung chick was never reported", how)
			}
			time.Sleep(20 * time.Millisecond)
		}
		told := time.Since(start)
		deadline = time.Now().Add(30 * time.Second)
		for len(containers(t, api, data)) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the hung chick's container was not removed", how)
			}
			time.Sleep(50 * time.Millisecond)
		}
		figure(t, "%s: declared hung and the user told %s later (heartbeat 500 ms, 3 missed); container removed", how, told.Round(time.Millisecond))
	}
	stillAnswers(t, p, "after the hangs")
	if code := p.finish(t, time.Minute); code != 0 {
		t.Fatalf("exit %d", code)
	}
	checkStore(t, data)
}

// TestSoakChickFlood: a chick streams thousands of events as fast as its
// model and tools allow. Every event is stored and rendered, none lost;
// Mother answers the channel meanwhile; her memory returns.
func TestSoakChickFlood(t *testing.T) {
	api := docker(t)
	turns, batch := envInt("SOAK_FLOOD_TURNS", 40), envInt("SOAK_FLOOD_BATCH", 100)
	fake := modelFor("flood-", func(r ollamatest.Request) ollamatest.Turn {
		n := toolCount(r)
		if n/batch >= turns {
			return ollamatest.Turn{Text: "flood over"}
		}
		var calls []ollamatest.Call
		for j := range batch {
			calls = append(calls, ollamatest.Call{Name: "read", Args: map[string]any{"label": fmt.Sprintf("ev %d", n+j), "path": "MEMORY.md"}})
		}
		return ollamatest.Turn{Calls: calls}
	})
	defer fake.Close()
	// The fake answers at once with a hundred tool calls a turn: the chick
	// sends events far faster than chicks.events' default rate (100 a
	// second, a burst of 1,000; a real model never nears it), which would
	// stop it for flooding, and far faster than chicks.posts shows a
	// chick's progress (20 tool calls a minute). This scenario is Mother
	// rendering a legitimate flood whole; the hostile suites stop a chick
	// past the bound and pace its posts.
	data := newData(t, api, chicksConfig(t, fake.URL, map[string]any{
		"events": map[string]any{"perSecond": 1000000, "burst": 1000000},
		"posts":  map[string]any{"progressPerMinute": 1000000, "progressBurst": 1000000},
	}))
	chDir := filepath.Join(data, "workspace", "channels", "cli", "local")
	os.MkdirAll(chDir, 0o700)
	os.WriteFile(filepath.Join(chDir, "MEMORY.md"), []byte("notes\n"), 0o600)
	p := startMother(t, data, true)
	stillAnswers(t, p, "warm-up")
	idle, _ := p.rss(t)
	g0 := p.goroutines(t)
	start := time.Now()
	p.say(t, "please do flood-1")
	p.waitOut(t, "→ ev 0", 2*time.Minute)
	// Ping Mother while the flood lasts.
	var lat []time.Duration
	for i := 0; !strings.Contains(p.stdout.String(), "flood over"); i++ {
		lat = append(lat, stillAnswers(t, p, fmt.Sprintf("ping-%d", i)))
		time.Sleep(500 * time.Millisecond)
		if time.Since(start) > 10*time.Minute {
			t.Fatal("the flood did not end")
		}
	}
	p.waitOut(t, "(chick ", time.Minute)
	elapsed := time.Since(start)
	_, peak := p.rss(t)
	rendered := strings.Count(p.stdout.String(), "] → ev ")
	var stored, tools int
	for _, r := range records(t, data) {
		b, _ := os.ReadFile(filepath.Join(data, "chicks", r.ID, "events.jsonl"))
		stored += strings.Count(string(b), "\n")
		tools += strings.Count(string(b), `"type":"tool_start"`)
	}
	if want := turns * batch; tools != want || rendered != want {
		t.Errorf("tool calls: %d asked, %d stored, %d rendered", want, tools, rendered)
	}
	time.Sleep(3 * time.Second)
	after, _ := p.rss(t)
	g1 := p.goroutines(t)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if code := p.finish(t, time.Minute); code != 0 {
		t.Fatalf("exit %d", code)
	}
	_, lines := checkStore(t, data)
	figure(t, "%d events stored (%d tool calls asked, stored and rendered: 0 lost) in %s = %.0f events/s", stored, turns*batch, elapsed.Round(time.Millisecond), float64(stored)/elapsed.Seconds())
	figure(t, "Mother answered %d messages during the flood: median %s, worst %s", len(lat), lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
	figure(t, "Mother's RSS: %.1f MB before, peak %.1f MB, %.1f MB 3 s after; goroutines %d before, %d after; %d JSONL lines parse", mb(idle), mb(peak), mb(after), g0, g1, lines)
}

// TestSoakChickHugeOutput: a chick prints 300 MB to stdout, writes an
// output file over the 100 MB limit beside a small one, and attaches a
// 30 MB file. Mother's memory stays bounded, the events stay small, the
// files within the limits arrive, and the user learns what did not.
func TestSoakChickHugeOutput(t *testing.T) {
	api := docker(t)
	var mu sync.Mutex
	var firstResult string
	fake := modelFor("huge-", func(r ollamatest.Request) ollamatest.Turn {
		res := toolResults(r)
		switch len(res) {
		case 0:
			return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "bash", Args: map[string]any{"label": "huge stdout",
				"command": "head -c 300000000 /dev/zero | tr '\\0' x; echo"}}}}
		case 1:
			mu.Lock()
			firstResult = res[0]
			mu.Unlock()
			return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "bash", Args: map[string]any{"label": "big files",
				"command": "mkdir -p outputs && head -c 150000000 /dev/urandom > outputs/big.bin && head -c 1000000 /dev/urandom > outputs/small.bin && head -c 30000000 /dev/urandom > scratch/attach.bin && ls -la outputs scratch"}}}}
		case 2:
			return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "attach", Args: map[string]any{"label": "attaching", "path": "scratch/attach.bin", "title": "the data"}}}}
		}
		return ollamatest.Turn{Text: "huge work done"}
	})
	defer fake.Close()
	data := newData(t, api, chicksConfig(t, fake.URL, map[string]any{"resources": map[string]any{"memory": "256m", "cpus": 1, "pids": 128, "tmpfs": "32m"}}))
	p := startMother(t, data, true)
	stillAnswers(t, p, "warm-up")
	idle, _ := p.rss(t)
	start := time.Now()
	p.say(t, "please do huge-1")
	p.waitOut(t, "(chick ", 10*time.Minute)
	elapsed := time.Since(start)
	_, peak := p.rss(t)
	out := p.stdout.String()
	mu.Lock()
	first := firstResult
	mu.Unlock()
	if len(first) > 200_000 || !strings.Contains(first, "bash-output") {
		t.Errorf("the 300 MB output reached the model as %d bytes (want it truncated, with the full output saved): %.300q", len(first), first)
	}
	var evBytes int64
	for _, r := range records(t, data) {
		if fi, err := os.Stat(filepath.Join(data, "chicks", r.ID, "events.jsonl")); err == nil {
			evBytes += fi.Size()
		}
	}
	small, _ := filepath.Glob(filepath.Join(data, "workspace/channels/cli/local/scratch/chicks/c-*/outputs/small.bin"))
	big, _ := filepath.Glob(filepath.Join(data, "workspace/channels/cli/local/scratch/chicks/c-*/outputs/big.bin"))
	att, _ := filepath.Glob(filepath.Join(data, "workspace/channels/cli/local/scratch/chicks/c-*/scratch/attach.bin"))
	if len(small) != 1 || len(att) != 1 || len(big) != 0 {
		t.Errorf("stored: small %v, attach %v, big %v; want the small output and the attachment, not the file over the limit", small, att, big)
	}
	if !strings.Contains(out, "big.bin") {
		t.Errorf("the user was not told that outputs/big.bin did not arrive:\n%s", out)
	}
	if code := p.finish(t, time.Minute); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if n := len(containers(t, api, data)); n != 0 {
		t.Errorf("%d containers left", n)
	}
	checkStore(t, data)
	figure(t, "300 MB on stdout, a 150 MB output (over the 100 MB limit), a 1 MB output, a 30 MB attachment: done in %s; the model saw %d bytes of the stdout; events.jsonl %d KB", elapsed.Round(time.Millisecond), len(first), evBytes/1024)
	figure(t, "Mother's RSS: %.1f MB before, peak %.1f MB; the 1 MB output and the 30 MB attachment stored, the 150 MB file refused and named to the user", mb(idle), mb(peak))
}
