package hatchery_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/docker"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
)

// logBuf keeps every log record as text, for tests that look at levels.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuf) lines(substr string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.buf.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// A chick image that is not on the engine is a step still to do (issue
// 34): Mother says so once as a warning, never as an ERROR (not for the
// gate either), refuses chicks that could only fail instead of accepting
// them, and takes chicks again as soon as the image is there, by herself.
func TestMissingImageRefusesChicksUntilBuilt(t *testing.T) {
	for _, network := range []string{config.NetworkIsolated, config.NetworkBridge} {
		t.Run(network, func(t *testing.T) {
			t.Parallel()
			api := hatcherytest.Docker(t)
			built := ""
			if network == config.NetworkBridge {
				built = hatcherytest.BuildImage(t)
			}
			suffix := make([]byte, 4)
			rand.Read(suffix)
			tag := "mother-chick:missing-" + hex.EncodeToString(suffix)
			t.Cleanup(func() { api.ImageRemove(t.Context(), tag, image.RemoveOptions{}) })
			cfg := testConfig(tag)
			cfg.Chicks.Network = network
			hostAPI, err := docker.Dial(config.DockerHost{Name: "local"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			logs := &logBuf{}
			h, err := hatchery.New(hatchery.Options{
				Config: cfg, Dir: t.TempDir(), Command: []string{"sleep", "60"}, Logger: slog.New(slog.NewTextHandler(logs, nil)),
				Hosts: []hatchery.Host{{Name: "local", Runtime: docker.New(hostAPI), Capacity: 2, MotherAddress: "127.0.0.1:1"}},
			})
			if err != nil {
				t.Fatal(err)
			}
			hatcherytest.RemoveOnCleanup(t, api, h.Instance)
			t.Cleanup(func() { h.Close() })
			if err := <-h.StartReconcile(t.Context()); err != nil {
				t.Fatal(err)
			}
			if errs := logs.lines("level=ERROR"); len(errs) > 0 {
				t.Errorf("a missing image logged errors:\n%s", strings.Join(errs, "\n"))
			}
			warns := logs.lines("chicks are off on this Docker host")
			if len(warns) != 1 || !strings.Contains(warns[0], "level=WARN") || !strings.Contains(warns[0], "make image") || !strings.Contains(warns[0], tag) {
				t.Errorf("want one warning naming the image and make image, got %q", warns)
			}
			for range 2 {
				_, err = h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "g"})
				if !errors.Is(err, hatchery.ErrImageMissing) || !strings.Contains(err.Error(), "make image") || !strings.Contains(err.Error(), "Docker host local") {
					t.Fatalf("spawn with the image missing: %v, want ErrImageMissing saying what to do", err)
				}
			}
			if n := len(h.List(true)); n != 0 {
				t.Errorf("%d chicks accepted although none could start", n)
			}
			if n := len(logs.lines("chicks are off on this Docker host")); n != 1 {
				t.Errorf("the warning was repeated (%d times)", n)
			}
			if built == "" {
				return
			}
			// The operator builds the image: the next spawn takes it.
			if err := api.ImageTag(t.Context(), built, tag); err != nil {
				t.Fatal(err)
			}
			in, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "g"})
			if err != nil {
				t.Fatalf("spawn once the image is built: %v", err)
			}
			deadline := time.Now().Add(time.Minute)
			for {
				got, err := h.Get(in.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.State == hatchery.StateRunning {
					break
				}
				if got.State.Final() || time.Now().After(deadline) {
					t.Fatalf("chick did not run once the image was there: %+v", got)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if n := len(logs.lines("chicks can start on this host")); n != 1 {
				t.Errorf("want the image's arrival said once, got %d", n)
			}
			if _, err := h.Stop(in.ID, hatchery.ReasonKilled, "test done", time.Second); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// slowList is a Docker runtime whose List waits for the test: the
// reconcile at start is under way for as long as the test likes.
type slowList struct {
	*docker.Runtime
	release chan struct{}
}

func (r slowList) List(ctx context.Context, key, value string) ([]hatchery.Container, error) {
	<-r.release
	return r.Runtime.List(ctx, key, value)
}

// A chick asked for while Mother reconciles in the background waits in
// the queue; when the reconcile finds the image missing it ends at once
// with the reason (no_start) instead of waiting, unseen, for a build.
func TestChickQueuedDuringReconcileEndsWithoutImage(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	cfg := testConfig(fmt.Sprintf("mother-chick:missing-%d", time.Now().UnixNano()))
	hostAPI, err := docker.Dial(config.DockerHost{Name: "local"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rt := slowList{docker.New(hostAPI), make(chan struct{})}
	h, err := hatchery.New(hatchery.Options{
		Config: cfg, Dir: t.TempDir(), Command: []string{"sleep", "60"}, Logger: testLogger(t),
		Hosts: []hatchery.Host{{Name: "local", Runtime: rt, Capacity: 2, MotherAddress: "127.0.0.1:1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	hatcherytest.RemoveOnCleanup(t, api, h.Instance)
	t.Cleanup(func() { h.Close() })
	rec := newRecorder()
	h.Subscribe(rec)
	done := h.StartReconcile(t.Context())
	in, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if in.State != hatchery.StateQueued {
		t.Fatalf("a chick spawned while reconciling is %s, want queued", in.State)
	}
	close(rt.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := rec.wait(t, in.ID, time.Minute)
	if got.Reason != hatchery.ReasonNoStart || !strings.Contains(got.Outcome, "make image") {
		t.Errorf("queued chick ended as %s %q, want no_start saying to build the image", got.Reason, got.Outcome)
	}
}
