//go:build soak

package soak

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// TestSoakSpawnKillCycles spawns and kills 1,000 chicks (SOAK_CYCLES), ten
// at a time, through Mother's model (spawn_chick) and the admin socket
// (KillChick, as momctl does). Afterwards: no container left, Mother's
// goroutine count back where it was, her heap and resident memory flat.
func TestSoakSpawnKillCycles(t *testing.T) {
	api := docker(t)
	cycles := envInt("SOAK_CYCLES", 1000)
	const batch = 10
	spawn := spawner("cycle-")
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if turn, ok := spawn(r); ok {
			return turn
		}
		return ollamatest.Turn{Text: "never", Delay: 10 * time.Minute} // works until killed
	})
	defer fake.Close()
	data := newData(t, api, chicksConfig(t, fake.URL, map[string]any{"queueSize": batch}))
	p := startMother(t, data, true)
	p.waitErr(t, "nest listening", 30*time.Second)
	conn, err := grpc.NewClient("unix://"+filepath.Join(data, "mother.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	admin := pb.NewAdminServiceClient(conn)
	alive := func() []*pb.ChickInfo {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := admin.ListChicks(ctx, &pb.ListChicksRequest{})
		if err != nil {
			t.Fatalf("ListChicks: %v", err)
		}
		return resp.GetChicks()
	}
	var spawnTotal, killTotal time.Duration
	round := func(r int) {
		var goals []string
		for i := range batch {
			goals = append(goals, fmt.Sprintf("cycle-%d-%d", r, i))
		}
		start := time.Now()
		p.say(t, "please do "+strings.Join(goals, " "))
		deadline := time.Now().Add(3 * time.Minute)
		var list []*pb.ChickInfo
		for {
			list = alive()
			n := 0
			for _, c := range list {
				if c.GetState() == pb.ChickState_CHICK_STATE_RUNNING {
					n++
				}
			}
			if n == batch {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d of %d chicks running", r, n, batch)
			}
			time.Sleep(20 * time.Millisecond)
		}
		spawnTotal += time.Since(start)
		start = time.Now()
		for _, c := range list {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := admin.KillChick(ctx, &pb.KillChickRequest{Id: c.GetId()})
			cancel()
			if err != nil {
				t.Fatalf("KillChick %s: %v", c.GetId(), err)
			}
		}
		deadline = time.Now().Add(2 * time.Minute)
		for len(alive()) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: chicks still alive after the kills", r)
			}
			time.Sleep(20 * time.Millisecond)
		}
		killTotal += time.Since(start)
	}
	settle := func(word string) (g int, heap uint64, rss int) {
		// A message of her own, then quiet: 2 s after her last run Mother
		// collects and returns freed memory, so the heap read after is
		// what she holds, not garbage waiting for the collector.
		// The history index follows 5 s after the last lines, and is
		// trimmed after in turn (pkg/recall): quiet means after that too.
		stillAnswers(t, p, word)
		time.Sleep(8 * time.Second)
		rss, _ = p.rss(t) // first: reading /metrics runs code she otherwise does not
		g = p.goroutines(t)
		heap = p.heapInuse(t)
		return
	}
	round(0) // warm-up: connections, caches, the first chicks
	g0, h0, r0 := settle("before the cycles")
	start := time.Now()
	rounds := cycles / batch
	var hMid uint64
	var pause time.Duration
	for r := 1; r <= rounds; r++ {
		round(r)
		if r%10 == 0 {
			t.Logf("%d chicks spawned and killed; %d goroutines", r*batch, p.goroutines(t))
		}
		if r == rounds/2 {
			// Halfway, long after the bounded records (200 chicks, 1,024
			// late-event ids) are full: from here the heap must stay flat.
			s := time.Now()
			_, hMid, _ = settle("halfway")
			pause = time.Since(s)
		}
	}
	elapsed := time.Since(start) - pause
	g1, h1, r1 := settle("after the cycles")
	left := len(containers(t, api, data))
	_, peak := p.rss(t)
	if left != 0 {
		t.Errorf("%d containers left after %d cycles", left, rounds*batch)
	}
	if g1 > g0+3 {
		t.Errorf("goroutines grew from %d to %d over %d cycles", g0, g1, rounds*batch)
	}
	if float64(h1) > float64(h0)*1.5+2<<20 {
		t.Errorf("heap in use grew from %.1f MB to %.1f MB over %d cycles", float64(h0)/(1<<20), float64(h1)/(1<<20), rounds*batch)
	}
	if hMid > 0 && h1 > hMid+1<<20 {
		t.Errorf("heap in use grew from %.1f MB halfway to %.1f MB at the end: something is kept per chick", float64(hMid)/(1<<20), float64(h1)/(1<<20))
	}
	if code := p.finish(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d", code)
	}
	_, lines := checkStore(t, data)
	n := rounds * batch
	figure(t, "%d chicks spawned and killed, %d at a time, in %s (spawn to %d running: %s per round; kill to none alive: %s per round)",
		n, batch, elapsed.Round(time.Second), batch, (spawnTotal / time.Duration(rounds+1)).Round(time.Millisecond), (killTotal / time.Duration(rounds+1)).Round(time.Millisecond))
	figure(t, "containers left: %d; goroutines %d after the warm-up, %d after (growth %d)", left, g0, g1, g1-g0)
	figure(t, "heap in use %.1f MB after the warm-up, %.1f MB halfway, %.1f MB after; RSS %.1f MB → %.1f MB (peak %.1f MB); %d JSONL lines parse", float64(h0)/(1<<20), float64(hMid)/(1<<20), float64(h1)/(1<<20), mb(r0), mb(r1), mb(peak), lines)
}
