package docker_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/docker"
	"github.com/mother-chat/mother/pkg/hatchery/docker/enginetest"
)

// fakeRuntime is the driver on the real Docker client, talking to a fake
// engine over its unix socket.
func fakeRuntime(t *testing.T) (*enginetest.Engine, *docker.Runtime) {
	t.Helper()
	e := enginetest.New(t)
	c, err := client.NewClientWithOpts(client.WithHost(e.Host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	rt := docker.New(c)
	t.Cleanup(func() { rt.Close() })
	return e, rt
}

func spec() hatchery.ContainerSpec {
	cfg := &config.Config{}
	cfg.SetDefaults("")
	return hatchery.ContainerSpec{
		Name: "mother-chick-c-1-m-1", Image: "mother-chick:test",
		Network: cfg.Chicks.Network, Resources: cfg.Chicks.Resources, Hardening: cfg.Chicks.Hardening,
	}
}

// kinds names the hatchery error kinds err is marked with.
func kinds(err error) string {
	var out []string
	for _, k := range []error{hatchery.ErrContainerNotFound, hatchery.ErrConflict, hatchery.ErrUnreachable} {
		if errors.Is(err, k) {
			out = append(out, k.Error())
		}
	}
	return strings.Join(out, ",")
}

func TestFakeEngineErrorsAreMarked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		method    string
		path      string
		answer    enginetest.Answer
		call      func(ctx context.Context, rt *docker.Runtime) error
		wantKind  string
		wantInMsg string
	}{
		{
			name: "create fails 500", method: http.MethodPost, path: "/containers/create",
			answer: enginetest.Error(500, "disk full"),
			call: func(ctx context.Context, rt *docker.Runtime) error {
				_, err := rt.Create(ctx, spec())
				return err
			},
			wantKind: "", wantInMsg: "disk full",
		},
		{
			name: "create finds no image (404)", method: http.MethodPost, path: "/containers/create",
			answer: enginetest.Error(404, "No such image: mother-chick:test"),
			call: func(ctx context.Context, rt *docker.Runtime) error {
				_, err := rt.Create(ctx, spec())
				return err
			},
			wantKind: hatchery.ErrContainerNotFound.Error(), wantInMsg: "No such image",
		},
		{
			name: "start 409", method: http.MethodPost, path: "/containers/{}/start",
			answer:   enginetest.Error(409, "container is marked for removal and cannot be started"),
			call:     func(ctx context.Context, rt *docker.Runtime) error { return rt.Start(ctx, "k1") },
			wantKind: hatchery.ErrConflict.Error(), wantInMsg: "marked for removal",
		},
		{
			name: "remove 404 is gone", method: http.MethodDelete, path: "/containers/{}",
			answer:   enginetest.Error(404, "No such container: k1"),
			call:     func(ctx context.Context, rt *docker.Runtime) error { return rt.Remove(ctx, "k1") },
			wantKind: hatchery.ErrContainerNotFound.Error(), wantInMsg: "No such container",
		},
		{
			name: "kill 409 (not running)", method: http.MethodPost, path: "/containers/{}/kill",
			answer:   enginetest.Error(409, "container k1 is not running"),
			call:     func(ctx context.Context, rt *docker.Runtime) error { return rt.Kill(ctx, "k1", "KILL") },
			wantKind: hatchery.ErrConflict.Error(), wantInMsg: "not running",
		},
		{
			name: "inspect 404", method: http.MethodGet, path: "/containers/{}/json",
			answer: enginetest.Error(404, "No such container: k1"),
			call: func(ctx context.Context, rt *docker.Runtime) error {
				st, err := rt.Inspect(ctx, "k1")
				if err == nil || st.ExitCode != -1 {
					return errors.New("inspect of a missing container did not fail with exit code -1")
				}
				return err
			},
			wantKind: hatchery.ErrContainerNotFound.Error(), wantInMsg: "No such container",
		},
		{
			name: "list 500", method: http.MethodGet, path: "/containers/json",
			answer: enginetest.Error(500, "engine busy"),
			call: func(ctx context.Context, rt *docker.Runtime) error {
				_, err := rt.List(ctx, hatchery.LabelInstance, "m-1")
				return err
			},
			wantKind: "", wantInMsg: "engine busy",
		},
		{
			name: "logs of a removed container", method: http.MethodGet, path: "/containers/{}/logs",
			answer: enginetest.Error(404, "No such container: k1"),
			call: func(ctx context.Context, rt *docker.Runtime) error {
				return rt.Logs(ctx, "k1", false, &strings.Builder{})
			},
			wantKind: hatchery.ErrContainerNotFound.Error(), wantInMsg: "No such container",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, rt := fakeRuntime(t)
			e.On(tc.method, tc.path, tc.answer)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			err := tc.call(ctx, rt)
			if err == nil {
				t.Fatalf("call answered %d: got no error", tc.answer.Status)
			}
			if got := kinds(err); got != tc.wantKind {
				t.Errorf("error %q marked %q, want %q", err, got, tc.wantKind)
			}
			if !strings.Contains(err.Error(), tc.wantInMsg) {
				t.Errorf("error %q does not carry the engine's message %q", err, tc.wantInMsg)
			}
		})
	}
}

func TestFakeEngineCreateStartWaitRemove(t *testing.T) {
	t.Parallel()
	e, rt := fakeRuntime(t)
	e.On(http.MethodPost, "/containers/create", enginetest.JSON(201, map[string]any{"Id": "k1", "Warnings": []string{}}))
	e.On(http.MethodPost, "/containers/{}/wait", enginetest.JSON(200, map[string]any{"StatusCode": 3}))
	e.On(http.MethodPost, "/containers/{}/start", enginetest.Answer{Status: 204})
	e.On(http.MethodDelete, "/containers/{}", enginetest.Answer{Status: 204})
	e.On(http.MethodGet, "/containers/json", enginetest.JSON(200, []map[string]any{
		{"Id": "k1", "State": "running", "Labels": map[string]string{hatchery.LabelChickID: "c-1"}},
	}))
	ctx := t.Context()
	id, err := rt.Create(ctx, spec())
	if err != nil || id != "k1" {
		t.Fatalf("Create = %q, %v; want k1", id, err)
	}
	exit := rt.Wait(ctx, id, true)
	if err := rt.Start(ctx, id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if ex := <-exit; ex.Err != nil || ex.Code != 3 {
		t.Errorf("Wait = %+v, want code 3", ex)
	}
	list, err := rt.List(ctx, hatchery.LabelInstance, "m-1")
	if err != nil || len(list) != 1 || list[0].ID != "k1" || list[0].State != hatchery.ContainerRunning || list[0].Labels[hatchery.LabelChickID] != "c-1" {
		t.Errorf("List = %+v, %v", list, err)
	}
	if err := rt.Remove(ctx, id); err != nil {
		t.Errorf("Remove: %v", err)
	}
	var sawFilter bool
	for _, c := range e.Calls() {
		if c == "POST /containers/create" {
			sawFilter = true
		}
	}
	if !sawFilter {
		t.Errorf("calls %v: no create", e.Calls())
	}
}

func TestFakeEngineHungCallEndsWithItsTimeout(t *testing.T) {
	t.Parallel()
	e, rt := fakeRuntime(t)
	e.On(http.MethodGet, "/containers/{}/json", enginetest.Hang())
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := rt.Inspect(ctx, "k1")
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("hung inspect = %v, want the call's deadline", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a hung call outlived its timeout")
	}
}

func TestFakeEngineHungWaitEndsWithItsContext(t *testing.T) {
	t.Parallel()
	e, rt := fakeRuntime(t)
	e.On(http.MethodPost, "/containers/{}/wait", enginetest.Pending())
	ctx, cancel := context.WithCancel(t.Context())
	exit := rt.Wait(ctx, "k1", false)
	cancel()
	select {
	case ex := <-exit:
		if ex.Err == nil || ex.Code != -1 {
			t.Errorf("cancelled wait = %+v, want an error and code -1", ex)
		}
	case <-time.After(time.Minute):
		t.Fatal("a cancelled wait did not end")
	}
}

func TestFakeEngineDroppedConnection(t *testing.T) {
	t.Parallel()
	e, rt := fakeRuntime(t)
	e.On(http.MethodPost, "/containers/{}/kill", enginetest.Drop())
	err := rt.Kill(t.Context(), "k1", "KILL")
	if err == nil {
		t.Fatal("kill over a dropped connection succeeded")
	}
	if errors.Is(err, hatchery.ErrContainerNotFound) || errors.Is(err, hatchery.ErrConflict) {
		t.Errorf("dropped connection %q taken for an answer (%s)", err, kinds(err))
	}
}

func TestFakeEngineGoneIsUnreachable(t *testing.T) {
	t.Parallel()
	e, rt := fakeRuntime(t)
	if v, err := rt.Version(t.Context()); err != nil || v != "fake" {
		t.Fatalf("Version = %q, %v; want fake", v, err)
	}
	e.Close()
	_, err := rt.Version(t.Context())
	if !errors.Is(err, hatchery.ErrUnreachable) {
		t.Errorf("engine gone: Version = %v (%s), want ErrUnreachable", err, kinds(err))
	}
}
