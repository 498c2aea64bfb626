package chick_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/chick"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/version"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// versionsMother starts Mother's chick side (a real hatchery on the
// local Docker engine, a real nest on a TCP socket) and spawns one chick;
// this test process plays the chick its container would run. It returns
// Mother, her address, the chick's id and its token.
func versionsMother(t *testing.T, fake *ollamatest.Server) (*mother, string, string, string) {
	t.Helper()
	dockerAPI := hatcherytest.Docker(t)
	image := hatcherytest.BuildImage(t)
	cfg := &config.Config{}
	cfg.SetDefaults("")
	cfg.Chicks.Image = image
	cfg.Chicks.Tiers["local"] = config.Tier{Provider: "ollama", Model: "chick-m"}
	cfg.Chicks.KillGrace = config.Dur(time.Second)
	cfg.Chicks.Resources.Memory = "128m"
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	m := startMother(t, cfg, t.TempDir(), addr, fake)
	t.Cleanup(m.stop)
	hatcherytest.RemoveOnCleanup(t, dockerAPI, m.h.Instance)
	chDir := filepath.Join(t.TempDir(), "chan")
	os.MkdirAll(chDir, 0o700)
	in, err := m.h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "say hello", Files: hatchery.Files{ChannelDir: chDir}})
	if err != nil {
		t.Fatal(err)
	}
	for m.h.State(in.ID) != hatchery.StateRunning {
		time.Sleep(20 * time.Millisecond)
	}
	return m, addr, in.ID, versionsToken(t, dockerAPI, m, in.ID)
}

func versionsToken(t *testing.T, api *client.Client, m *mother, id string) string {
	t.Helper()
	got, _ := m.h.Get(id)
	insp, err := api.ContainerInspect(t.Context(), got.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range insp.Config.Env {
		if v, ok := strings.CutPrefix(e, hatchery.EnvToken+"="); ok {
			return v
		}
	}
	t.Fatal("the chick's container has no token")
	return ""
}

func versionsEnd(t *testing.T, m *mother) hatchery.Info {
	t.Helper()
	select {
	case end := <-m.obs.ended:
		return end
	case <-time.After(time.Minute):
		t.Fatal("Mother did not end the chick")
	}
	return hatchery.Info{}
}

// TestVersionsJoinRefused: a chick that says a release this Mother does
// not work with (0.9.2: an image relabelled, or a chick binary newer than
// its label) is refused at its Join with one sentence naming both
// releases and the fix; the chick returns that sentence as its error at
// once (no retries into a heartbeat timeout), and Mother ends it with the
// sentence as its reason, not as hung or crashed.
func TestVersionsJoinRefused(t *testing.T) {
	t.Parallel()
	fake := ollamatest.New(ollamatest.Turn{Text: "never asked"})
	defer fake.Close()
	m, addr, id, token := versionsMother(t, fake)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err := chick.Run(ctx, chick.Options{Addr: addr, Token: token, ChickID: id, Workspace: t.TempDir(), CAPEM: m.ca, Release: "0.9.2"})
	want := "the chick on host local is 0.9.2; this Mother (" + version.Release + ") needs 0.1.x or 0.2.x: upgrade the mother package here, or install mother-chick 0.2.x there"
	var inc *chick.IncompatibleError
	if !errors.As(err, &inc) || err.Error() != want {
		t.Fatalf("chick.Run = %v, want the IncompatibleError %q", err, want)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the refused chick took %s to give up", took)
	}
	end := versionsEnd(t, m)
	if end.Reason != hatchery.ReasonIncompatible || end.Outcome != want {
		t.Errorf("the chick ended %s %q, want %s %q", end.Reason, end.Outcome, hatchery.ReasonIncompatible, want)
	}
	if len(fake.Requests()) != 0 {
		t.Errorf("the refused chick made %d model calls", len(fake.Requests()))
	}
}

// TestVersionsOlderMother: a chick whose Mother says a release older than
// the chick's range (her JoinResponse rewritten on the chick's side of
// the wire to say 0.0.3) ends its run at once with a result that names
// the skew, and Mother ends it with that sentence, not as hung.
func TestVersionsOlderMother(t *testing.T) {
	t.Parallel()
	fake := ollamatest.New(ollamatest.Turn{Text: "never asked"})
	defer fake.Close()
	m, addr, id, token := versionsMother(t, fake)
	older := grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if j, ok := reply.(*pb.JoinResponse); ok && err == nil {
			if j.GetRelease() != version.Release || j.GetProtocol() != version.Protocol {
				t.Errorf("Mother's JoinResponse says release %q protocol %d, want %s and %d", j.GetRelease(), j.GetProtocol(), version.Release, version.Protocol)
			}
			j.Release, j.Protocol = "0.0.3", 1
		}
		return err
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := chick.Run(ctx, chick.Options{Addr: addr, Token: token, ChickID: id, Workspace: t.TempDir(), CAPEM: m.ca, DialOptions: []grpc.DialOption{older}}); err != nil {
		t.Fatalf("chick.Run: %v, want its result stored", err)
	}
	want := "this chick image is " + version.Release + "; Mother here is 0.0.3 and it needs Mother 0.1.x or 0.2.x: upgrade the mother package"
	end := versionsEnd(t, m)
	if end.Reason != hatchery.ReasonError || end.Outcome != "failed: "+want || end.Result == nil || end.Result.Error != want {
		t.Errorf("the chick ended %s %q (result %+v), want failed: %q", end.Reason, end.Outcome, end.Result, want)
	}
	if len(fake.Requests()) != 0 {
		t.Errorf("the chick made %d model calls facing a Mother it does not work with", len(fake.Requests()))
	}
}
