package nest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/docker"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/ollama"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/nest"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

type fixture struct {
	h      *hatchery.Hatchery
	srv    *nest.Server
	client pb.ChickServiceClient
	gate   pb.GateServiceClient
	admin  pb.AdminServiceClient
	dir    string
	chDir  string
	fake   *ollamatest.Server
	ca     []byte
}

// fixtureOut is the output limit of the fixture's tier.
const fixtureOut = 32

// newFixture runs a hatchery whose chicks sleep (they never dial), the
// nest on loopback and its admin socket, and a broker on a fake Ollama.
// The test plays the chicks with their real tokens.
//
// Options may change the configuration and the nest's options before the
// nest is built (the hatchery is already running).
func newFixture(t testing.TB, budget int64, opts ...func(cfg *config.Config, h *hatchery.Hatchery, o *nest.Options)) *fixture {
	t.Helper()
	return newFixtureConfig(t, budget, nil, opts...)
}

// newFixtureConfig is newFixture with conf changing the configuration
// before the hatchery is built.
func newFixtureConfig(t testing.TB, budget int64, conf func(cfg *config.Config), opts ...func(cfg *config.Config, h *hatchery.Hatchery, o *nest.Options)) *fixture {
	t.Helper()
	api := hatcherytest.Docker(t)
	image := hatcherytest.BuildImage(t)
	cfg := &config.Config{}
	cfg.Budgets.ChickTokens = config.Tokens(budget)
	cfg.SetDefaults("")
	cfg.Chicks.Image = image
	// Small answers: a call reserves its prompt's estimate plus this, and
	// the budget tests' budgets hold a few calls.
	cfg.Chicks.Tiers["local"] = config.Tier{Provider: "ollama", Model: "chick-m", MaxOutputTokens: fixtureOut}
	cfg.Chicks.KillGrace = config.Dur(time.Second)
	cfg.Chicks.Resources.Memory = "128m"
	if conf != nil {
		conf(cfg)
	}
	dir := t.TempDir()
	hostAPI, err := docker.Dial(config.DockerHost{Name: "local"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fake := ollamatest.New()
	t.Cleanup(fake.Close)
	br, err := broker.New(broker.Options{Config: cfg, Dir: dir, Providers: func(string) (model.Provider, error) { return ollama.New(fake.URL, nil) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { br.Close() })
	tl, err := nest.LoadTLS(filepath.Join(dir, "tls"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := hatchery.New(hatchery.Options{Config: cfg, Dir: dir, Command: []string{"sleep", "3600"}, Meter: br, CAPEM: tl.CAPEM,
		Hosts: []hatchery.Host{{Name: "local", Runtime: docker.New(hostAPI), Capacity: 6, MotherAddress: "127.0.0.1:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	hatcherytest.RemoveOnCleanup(t, api, h.Instance)
	t.Cleanup(func() { h.Close() })
	no := nest.Options{Chicks: h, Models: br, KillGrace: time.Second, Version: "test", TLS: tl.Creds}
	for _, o := range opts {
		o(cfg, h, &no)
	}
	srv := nest.New(no)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeChicks(lis)
	sock := filepath.Join(dir, "mother.sock")
	alis, err := nest.ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeAdmin(alis)
	t.Cleanup(srv.Stop)
	creds, err := wire.ClientTLS(tl.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	aconn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { aconn.Close() })
	chDir := filepath.Join(t.TempDir(), "chan")
	os.MkdirAll(chDir, 0o700)
	return &fixture{h: h, srv: srv, client: pb.NewChickServiceClient(conn), gate: pb.NewGateServiceClient(conn), admin: pb.NewAdminServiceClient(aconn), dir: dir, chDir: chDir, fake: fake, ca: tl.CAPEM}
}

// spawn starts a chick and returns its id and token (read from its
// container's environment, as the chick would).
func (f *fixture) spawn(t testing.TB) (string, string) {
	t.Helper()
	return f.spawnFiles(t, hatchery.Files{ChannelDir: f.chDir})
}

// spawnFiles is spawn with files.
func (f *fixture) spawnFiles(t testing.TB, files hatchery.Files) (string, string) {
	t.Helper()
	in, err := f.h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "test", Files: files})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for f.h.State(in.ID) != hatchery.StateRunning {
		if time.Now().After(deadline) {
			t.Fatalf("chick %s: %s", in.ID, f.h.State(in.ID))
		}
		time.Sleep(20 * time.Millisecond)
	}
	got, _ := f.h.Get(in.ID)
	api := hatcherytest.Docker(t)
	insp, err := api.ContainerInspect(t.Context(), got.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	var tok, ca string
	for _, e := range insp.Config.Env {
		if v, ok := strings.CutPrefix(e, hatchery.EnvToken+"="); ok {
			tok = v
		}
		if v, ok := strings.CutPrefix(e, hatchery.EnvCA+"="); ok {
			ca = v
		}
	}
	if tok == "" {
		t.Fatal("no token in the chick's environment")
	}
	if ca != string(f.ca) {
		t.Fatalf("the chick's %s is not the nest's CA certificate: %q", hatchery.EnvCA, ca)
	}
	return in.ID, tok
}

func TestTokensAreBoundToTheirChick(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0)
	a, tokA := f.spawn(t)
	b, tokB := f.spawn(t)
	ctx := t.Context()

	join := func(id, tok string) error {
		c := ctx
		if id != "" || tok != "" {
			c = wire.Credentials(ctx, id, tok)
		}
		_, err := f.client.Join(c, &pb.JoinRequest{Version: "test"})
		return err
	}
	if err := join(a, tokA); err != nil {
		t.Fatalf("chick A with its own token: %v", err)
	}
	resp, err := f.client.Join(wire.Credentials(ctx, b, tokB), &pb.JoinRequest{})
	if err != nil || resp.GetChickId() != b || resp.GetGoal() != "test" || resp.GetChannel() != "cli/local" {
		t.Fatalf("chick B join: %v %v", resp, err)
	}
	cases := []struct {
		name, id, tok string
	}{
		{"A's token for B", b, tokA},
		{"B's token for A", a, tokB},
		{"no token", "", ""},
		{"token without id", "", tokA},
		{"made-up token", a, strings.Repeat("0", 64)},
		{"unknown chick", "c-00000000", tokA},
	}
	for _, c := range cases {
		err := join(c.id, c.tok)
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: %v, want Unauthenticated", c.name, err)
		}
	}
	// Streams are guarded too.
	s, err := f.client.Session(wire.Credentials(ctx, b, tokA))
	if err == nil {
		_, err = s.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("session with A's token for B: %v", err)
	}
	// Once A has ended its token is useless.
	if _, err := f.h.Stop(a, hatchery.ReasonKilled, "test", 0); err != nil {
		t.Fatal(err)
	}
	ended, _ := f.h.Ended(a)
	<-ended
	err = join(a, tokA)
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(status.Convert(err).Message(), "ended") {
		t.Errorf("ended chick's token: %v, want Unauthenticated (expired)", err)
	}
}

func TestSessionResumesWithoutLosingOrDoublingEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0)
	id, tok := f.spawn(t)
	ctx := wire.Credentials(t.Context(), id, tok)
	ev := func(seq uint64) *pb.SessionRequest {
		return &pb.SessionRequest{Kind: &pb.SessionRequest_Event{Event: wire.EventToProto(seq, agent.Event{Type: agent.EventToolStart, Label: "step", ToolName: "bash", Time: time.Now()})}}
	}
	open := func(lastSent uint64) (pb.ChickService_SessionClient, uint64) {
		s, err := f.client.Session(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(&pb.SessionRequest{Kind: &pb.SessionRequest_Hello{Hello: &pb.SessionHello{LastSentSeq: lastSent}}}); err != nil {
			t.Fatal(err)
		}
		m, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return s, m.GetAck().GetSeq()
	}
	s, acked := open(0)
	if acked != 0 {
		t.Fatalf("first ack %d, want 0", acked)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		must(t, s.Send(ev(seq)))
		m, err := s.Recv()
		if err != nil || m.GetAck().GetSeq() != seq {
			t.Fatalf("ack for %d: %v %v", seq, m, err)
		}
	}
	must(t, s.CloseSend())
	// The chick reconnects having sent up to 5, of which 4 and 5 were lost
	// on the way; it resends from 2 (it never saw the acks for 2 and 3).
	s2, acked := open(5)
	if acked != 3 {
		t.Fatalf("resume ack %d, want 3", acked)
	}
	for seq := uint64(2); seq <= 5; seq++ {
		must(t, s2.Send(ev(seq)))
		m, err := s2.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if want := max(seq, 3); m.GetAck().GetSeq() != want {
			t.Errorf("ack after resending %d: %d, want %d", seq, m.GetAck().GetSeq(), want)
		}
	}
	// A gap is refused; the chick resends from the ack.
	must(t, s2.Send(ev(9)))
	if _, err := s2.Recv(); status.Code(err) != codes.DataLoss {
		t.Errorf("gap: %v, want DataLoss", err)
	}
	// Events on disk: 1..5, each once.
	b, err := os.ReadFile(filepath.Join(f.dir, id, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var v struct {
			Seq uint64 `json:"seq"`
		}
		json.Unmarshal([]byte(line), &v)
		seqs = append(seqs, v.Seq)
	}
	if len(seqs) != 5 || seqs[0] != 1 || seqs[4] != 5 {
		t.Errorf("stored seqs %v, want 1..5 once each", seqs)
	}

}

func TestCancelReachesSessionThenResultEndsIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0)
	id, tok := f.spawn(t)
	ctx := wire.Credentials(t.Context(), id, tok)
	s, err := f.client.Session(ctx)
	must(t, err)
	must(t, s.Send(&pb.SessionRequest{Kind: &pb.SessionRequest_Hello{Hello: &pb.SessionHello{}}}))
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	killed := make(chan *pb.KillChickResponse, 1)
	go func() {
		r, err := f.admin.KillChick(context.Background(), &pb.KillChickRequest{Id: id, Grace: durationpb.New(30 * time.Second)})
		if err != nil {
			t.Error(err)
		}
		killed <- r
	}()
	m, err := s.Recv()
	if err != nil || m.GetCancel() == nil || !strings.Contains(m.GetCancel().GetMessage(), "operator") {
		t.Fatalf("want a cancellation naming the operator, got %v %v", m, err)
	}
	// The chick answers with its result; Mother closes the stream.
	must(t, s.Send(&pb.SessionRequest{Kind: &pb.SessionRequest_Result{Result: &pb.ChickResult{Text: "partial", StopReason: pb.StopReason_STOP_REASON_ABORTED}}}))
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("after the result: %v, want EOF", err)
	}
	// The container (a sleep that ignores all this) is killed after the
	// grace the result starts, and the chick ends as killed.
	select {
	case r := <-killed:
		if r.GetState() != pb.ChickState_CHICK_STATE_KILLED {
			t.Errorf("kill: %v", r)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("KillChick did not return")
	}
	in, _ := f.h.Get(id)
	if in.Result == nil || in.Result.Text != "partial" {
		t.Errorf("result not kept: %+v", in.Result)
	}
}

func TestGenerateGoesThroughTheBrokerAndItsBudget(t *testing.T) {
	t.Parallel()
	// The call reserves broker.EstimateInput (78 for "hi") plus 32 and
	// costs 110: the budget holds one, not two.
	f := newFixture(t, 150)
	id, tok := f.spawn(t)
	f.fake.Push(ollamatest.Turn{Text: "hello from the model", PromptTokens: 80, OutputTokens: 30})
	ctx := wire.Credentials(t.Context(), id, tok)
	req := wire.RequestToProto(model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}})
	st, err := f.client.Generate(ctx, req)
	must(t, err)
	var text strings.Builder
	var done *pb.GenerateDone
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		must(t, err)
		text.WriteString(m.GetTextDelta())
		if m.GetDone() != nil {
			done = m.GetDone()
		}
	}
	if text.String() != "hello from the model" || done.GetUsage().GetInputTokens() != 80 {
		t.Errorf("streamed %q, done %v", text.String(), done)
	}
	if got := f.fake.Requests(); len(got) != 1 || got[0].Model != "chick-m" || got[0].Options["num_predict"] != float64(fixtureOut) {
		t.Errorf("the provider saw %+v, want one call for the tier's model", got)
	}
	// 110 of 150 tokens used, the next call may cost 110: it is refused
	// before it is sent and the chick is being stopped.
	st, err = f.client.Generate(ctx, req)
	must(t, err)
	_, err = st.Recv()
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "budget exhausted") {
		t.Errorf("over budget: %v", err)
	}
	mapped, ok := wire.ModelErrorFromStatus(err)
	if !ok || !errors.Is(mapped, model.ErrBudgetExhausted) {
		t.Errorf("chick side mapping: %v", mapped)
	}
	ended, _ := f.h.Ended(id)
	select {
	case <-ended:
	case <-time.After(60 * time.Second):
		t.Fatal("chick over budget was not stopped")
	}
	in, _ := f.h.Get(id)
	if in.Reason != hatchery.ReasonBudget || in.Usage.Total() != 110 {
		t.Errorf("ended %s with %d tokens, want budget with 110", in.Reason, in.Usage.Total())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestBurstIsStoredInBatchesWithCumulativeAcks sends a burst of events
// without waiting: Mother stores them in batches, at most one fsync and
// one cumulative ack per batch, every event once and in order. Not parallel:
// it counts the process's fsyncs of chick event logs.
func TestBurstIsStoredInBatchesWithCumulativeAcks(t *testing.T) {
	f := newFixture(t, 0)
	id, tok := f.spawn(t)
	ctx := wire.Credentials(t.Context(), id, tok)
	s, err := f.client.Session(ctx)
	must(t, err)
	must(t, s.Send(&pb.SessionRequest{Kind: &pb.SessionRequest_Hello{Hello: &pb.SessionHello{}}}))
	if m, err := s.Recv(); err != nil || m.GetAck().GetSeq() != 0 {
		t.Fatalf("hello ack: %v %v", m, err)
	}
	before := fsync.CountOf(fsync.KindChickEvents)
	const n = 500
	for seq := uint64(1); seq <= n; seq++ {
		must(t, s.Send(&pb.SessionRequest{Kind: &pb.SessionRequest_Event{Event: wire.EventToProto(seq, agent.Event{Type: agent.EventToolStart, Label: fmt.Sprint("step ", seq), ToolName: "bash", Time: time.Now()})}}))
	}
	var acks []uint64
	for len(acks) == 0 || acks[len(acks)-1] < n {
		m, err := s.Recv()
		if err != nil {
			t.Fatalf("after acks %v: %v", acks, err)
		}
		if a := m.GetAck(); a != nil {
			if len(acks) > 0 && a.GetSeq() <= acks[len(acks)-1] {
				t.Fatalf("ack %d after %d: acks must grow", a.GetSeq(), acks[len(acks)-1])
			}
			acks = append(acks, a.GetSeq())
		}
	}
	must(t, s.CloseSend())
	// A batch written while the one before it was being fsynced may be
	// covered by that batch's fsync or the next: at most one per ack.
	fsyncs := fsync.CountOf(fsync.KindChickEvents) - before
	if fsyncs == 0 || fsyncs > uint64(len(acks)) {
		t.Errorf("%d fsyncs of events.jsonl for %d acks: want at most one per ack", fsyncs, len(acks))
	}
	t.Logf("%d events stored with %d fsyncs and %d acks", n, fsyncs, len(acks))
	b, err := os.ReadFile(filepath.Join(f.dir, id, "events.jsonl"))
	must(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != n {
		t.Fatalf("%d events stored, want %d", len(lines), n)
	}
	for i, line := range lines {
		var v struct {
			Seq uint64 `json:"seq"`
		}
		must(t, json.Unmarshal([]byte(line), &v))
		if v.Seq != uint64(i+1) {
			t.Fatalf("line %d holds seq %d", i+1, v.Seq)
		}
	}
}
