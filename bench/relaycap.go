package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// relaycap measures Mother's own relay ceiling: how many chick events per
// second she stores (each fsynced before its ack) and renders, and her
// CPU per event, with the chicks' own work out of the way.
//
// Mother spawns 10 real chicks (real containers, network host) through the
// real hatchery, so she knows them and their tokens. Once each chick has
// joined and is waiting on its first model call, the bench freezes its
// container (docker pause) and takes its place: with the chick's id, token
// and CA (from the container's environment) it opens the chick's Session
// over real gRPC and TLS, as a reconnecting chick does, and streams
// tool_start/tool_end events as fast as Mother acknowledges them, then the
// result. The window runs from the start of the burst to the last ack.
func relaycap(bin, tmp string, quick bool) {
	fmt.Printf("## Relay ceiling: %d synthetic chicks streaming events into Mother\n\n", relayChicks)
	if err := exec.Command("docker", "info").Run(); err != nil {
		fmt.Printf("skipped: no Docker engine answers (`docker info`: %v)\n\n", err)
		return
	}
	buildBenchImage()
	perChick := 5000
	if quick {
		perChick = 1000
	}
	joined := make(chan string, relayChicks)
	release := make(chan struct{})
	var spawnMu sync.Mutex
	spawned := map[string]bool{}
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		goal := r.LastUser()
		if r.Model == chickModel {
			if strings.HasPrefix(goal, "relaycap-") {
				joined <- goal
				<-release
			}
			return ollamatest.Turn{Text: goal + " finished"}
		}
		var calls []ollamatest.Call
		spawnMu.Lock()
		defer spawnMu.Unlock()
		for _, g := range strings.Fields(goal) {
			// Each goal once: later turns (the tool results, a relayed
			// result) ask for nothing new.
			if strings.HasPrefix(g, "relaycap-") && !spawned[g] {
				spawned[g] = true
				calls = append(calls, ollamatest.Call{Name: "spawn_chick", Args: map[string]any{"label": "relaying", "goal": g}})
			}
		}
		if len(calls) == 0 {
			return ollamatest.Turn{Text: "Nothing to do."}
		}
		return ollamatest.Turn{Calls: calls}
	})
	defer fake.Close()
	fake.ForgetRequests()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	data := filepath.Join(tmp, "relaycap")
	check(os.MkdirAll(data, 0o700))
	cfg, _ := json.Marshal(map[string]any{
		"adapters":  map[string]any{"cli": map[string]any{"type": "cli"}},
		"model":     map[string]any{"provider": "ollama", "id": motherModel},
		"providers": map[string]any{"ollama": map[string]any{"url": fake.URL}},
		"chicks": map[string]any{
			"image": benchImage, "defaultTier": "local", "maxConcurrent": relayChicks, "maxPerChannel": relayChicks,
			"tiers":     map[string]any{"local": map[string]any{"provider": "ollama", "model": chickModel, "description": "bench"}},
			"resources": map[string]any{"memory": "256m", "cpus": 1, "pids": 128, "tmpfs": "16m"},
			// The bench, on the host, dials the address the chicks were given.
			"network": "host",
			"results": "relay",
			// Events as fast as Mother acknowledges them: far past
			// chicks.events' default rate, which this ceiling is not about.
			"events": map[string]any{"perSecond": 1000000, "burst": 1000000},
		},
		"log": map[string]any{"level": "warn"},
	})
	d := startDaemonOpts(bin, data, cfg, true)
	out := newLineLog(d.stdout)
	defer func() {
		d.stop()
		removeInstance(filepath.Join(data, "chicks"))
	}()

	var goals []string
	for c := range relayChicks {
		goals = append(goals, fmt.Sprintf("relaycap-%d", c))
	}
	fmt.Fprintln(d.stdin, "please run "+strings.Join(goals, " "))
	for range relayChicks {
		select {
		case <-joined:
		case <-time.After(5 * time.Minute):
			check(fmt.Errorf("relaycap: the chicks did not all join"))
		}
	}
	// Take each chick's place.
	chicksDir := filepath.Join(data, "chicks")
	var syn []*synthChick
	for _, g := range goals {
		s := takeOver(chicksDir, g)
		defer s.close()
		syn = append(syn, s)
	}
	for _, s := range syn {
		s.open()
	}

	f0 := d.fsyncs()
	cpu0, t0 := cpuTicks(d.cmd.Process.Pid), time.Now()
	var wg sync.WaitGroup
	for _, s := range syn {
		wg.Add(1)
		go func() { defer wg.Done(); s.burst(perChick) }()
	}
	wg.Wait()
	cpu1, t1 := cpuTicks(d.cmd.Process.Pid), time.Now()
	f1 := d.fsyncs()
	for _, s := range syn {
		s.finish()
	}
	close(release)
	released = true
	for _, s := range syn {
		exec.Command("docker", "unpause", s.container).Run()
	}
	for _, g := range goals {
		out.wait(0, g+" finished", 2*time.Minute)
	}

	stored, lost := 0, 0
	for _, s := range syn {
		n := 0
		for _, ev := range storedEvents(chicksDir, s.goal) {
			if strings.HasPrefix(ev.Label, s.goal+"-") {
				n++
			}
		}
		stored += n
		lost += perChick - n
	}
	window := t1.Sub(t0)
	cpu := float64(cpu1-cpu0) / clockTicks
	perSecond := float64(relayChicks*perChick) / window.Seconds()
	fs, kinds := fsyncDelta(f0, f1)
	fmt.Printf("| | |\n|---|---|\n")
	fmt.Printf("| events sent (tool_start/tool_end, %d per chick) / stored / lost | %d / %d / %d |\n", perChick, relayChicks*perChick, stored, lost)
	fmt.Printf("| window (burst start to the last cumulative ack: every event fsynced) | %s |\n", window.Round(time.Millisecond))
	fmt.Printf("| events per second, durable before their ack | %.0f |\n", perSecond)
	fmt.Printf("| Mother's CPU over the window (utime+stime from /proc/PID/stat) | %.2f s = %.0f%% of one core |\n", cpu, 100*cpu/window.Seconds())
	fmt.Printf("| Mother's CPU per event | %.1f µs |\n", 1e6*cpu/float64(relayChicks*perChick))
	if len(f1) > 0 {
		fmt.Printf("| fsyncs over the window | %.0f = %.4f per event (%s) |\n", fs, fs/float64(relayChicks*perChick), kinds)
		if fs > 0 {
			fmt.Printf("| at 10 ms per fsync (an SD card): ceiling from fsyncs alone | %.0f events/s |\n", float64(relayChicks*perChick)/(fs*0.010))
		}
	}
	fmt.Printf("\nThe chicks are real containers spawned by Mother, frozen (docker pause) once joined; the bench speaks their Session over TLS with their id and token and streams events as fast as Mother acks them (at most %d unacknowledged per chick, as a chick's outbox resends what is not acked). The events are stored in each chick's events.jsonl, fsynced by group commit, and rendered on the terminal adapter. The bench's own clients share the 2 cores with Mother.\n\n", relayWindow)
	summary.haveCap, summary.capPerSecond, summary.capCPUPerEvent, summary.capEvents = true, perSecond, cpu/float64(relayChicks*perChick), relayChicks*perChick
	if len(f1) > 0 {
		summary.capFsyncsPerEvent, summary.haveCapFsyncs = fs/float64(relayChicks*perChick), true
	}
}

const (
	relayChicks = 10
	// relayWindow bounds a synthetic chick's unacknowledged events.
	relayWindow = 1024
)

// synthChick is the bench in a frozen chick's place.
type synthChick struct {
	goal, id, container string
	conn                *grpc.ClientConn
	stream              pb.ChickService_SessionClient
	cancel              context.CancelFunc
	seq                 uint64        // the last seq sent
	acks                chan uint64   // cumulative acks
	ended               chan struct{} // the stream ended
}

// takeOver finds the container of the chick whose goal is goal, reads its
// credentials and freezes it.
func takeOver(chicksDir, goal string) *synthChick {
	b, err := os.ReadFile(filepath.Join(chicksDir, "chicks.jsonl"))
	check(err)
	s := &synthChick{goal: goal}
	for _, line := range strings.Split(string(b), "\n") {
		var r struct{ ID, Goal string }
		if json.Unmarshal([]byte(line), &r) == nil && r.Goal == goal {
			s.id = r.ID
			break
		}
	}
	if s.id == "" {
		check(fmt.Errorf("relaycap: no chick with goal %q", goal))
	}
	cid, err := exec.Command("docker", "ps", "-q", "--filter", "label="+hatchery.LabelChickID+"="+s.id).Output()
	check(err)
	s.container = strings.TrimSpace(string(cid))
	envJSON, err := exec.Command("docker", "inspect", "-f", "{{json .Config.Env}}", s.container).Output()
	check(err)
	var env []string
	check(json.Unmarshal(envJSON, &env))
	get := func(k string) string {
		for _, e := range env {
			if v, ok := strings.CutPrefix(e, k+"="); ok {
				return v
			}
		}
		check(fmt.Errorf("relaycap: chick %s has no %s", s.id, k))
		return ""
	}
	addr, token, ca := get(hatchery.EnvAddr), get(hatchery.EnvToken), get(hatchery.EnvCA)
	check(exec.Command("docker", "pause", s.container).Run())
	creds, err := wire.ClientTLS([]byte(ca))
	check(err)
	s.conn, err = grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	check(err)
	ctx, cancel := context.WithCancel(wire.Credentials(context.Background(), s.id, token))
	s.cancel = cancel
	s.stream, err = pb.NewChickServiceClient(s.conn).Session(ctx)
	check(err)
	return s
}

// open says hello, as a reconnecting chick does, and learns what Mother
// stored of the frozen chick's events.
func (s *synthChick) open() {
	check(s.stream.Send(&pb.SessionRequest{Kind: &pb.SessionRequest_Hello{Hello: &pb.SessionHello{}}}))
	first, err := s.stream.Recv()
	check(err)
	s.seq = first.GetAck().GetSeq()
	s.acks, s.ended = make(chan uint64, relayWindow), make(chan struct{})
	go func() {
		defer close(s.ended)
		for {
			m, err := s.stream.Recv()
			if err != nil {
				return
			}
			if a := m.GetAck(); a != nil {
				s.acks <- a.GetSeq()
			}
		}
	}()
}

// burst sends n events, never more than relayWindow unacknowledged, and
// returns once Mother has acknowledged the last.
func (s *synthChick) burst(n int) {
	acked, last := s.seq, s.seq+uint64(n)
	args := json.RawMessage(`{"path":"MEMORY.md"}`)
	for i := range n {
		for s.seq-acked >= relayWindow {
			acked = s.waitAck()
		}
		ev := agent.Event{Type: agent.EventToolStart, Time: time.Now(), ToolCallID: fmt.Sprint("c", i/2), ToolName: "read", Label: fmt.Sprintf("%s-%d", s.goal, i/2), Args: args}
		if i%2 == 1 {
			ev.Type, ev.Result, ev.Duration = agent.EventToolEnd, "A small file the chicks read.\n", time.Millisecond
		}
		s.seq++
		check(s.stream.Send(&pb.SessionRequest{Kind: &pb.SessionRequest_Event{Event: wire.EventToProto(s.seq, ev)}}))
		if i%1000 == 999 {
			check(s.stream.Send(&pb.SessionRequest{Kind: &pb.SessionRequest_Heartbeat{Heartbeat: &pb.Heartbeat{SentAt: timestamppb.Now()}}}))
		}
	}
	for acked < last {
		acked = s.waitAck()
	}
}

func (s *synthChick) waitAck() uint64 {
	select {
	case a := <-s.acks:
		return a
	case <-s.ended:
		check(fmt.Errorf("relaycap: chick %s: the session ended before its events were acknowledged", s.id))
	case <-time.After(2 * time.Minute):
		check(fmt.Errorf("relaycap: chick %s: no ack for 2 minutes", s.id))
	}
	return 0
}

// finish sends the result and waits until Mother has stored it (she
// closes the stream).
func (s *synthChick) finish() {
	check(s.stream.Send(&pb.SessionRequest{Kind: &pb.SessionRequest_Result{Result: &pb.ChickResult{Text: s.goal + " finished", StopReason: wire.StopReasonToProto(agent.StopDone)}}}))
	select {
	case <-s.ended:
	case <-time.After(time.Minute):
		check(fmt.Errorf("relaycap: chick %s: result not stored", s.id))
	}
}

func (s *synthChick) close() {
	s.cancel()
	s.conn.Close()
}
