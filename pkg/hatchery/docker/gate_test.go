package docker

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/docker/enginetest"
	"github.com/mother-chat/mother/pkg/wire"
)

func gateSpec() hatchery.GateSpec {
	cfg := &config.Config{}
	cfg.SetDefaults("")
	return hatchery.GateSpec{
		Instance: "m-1", HostName: "gpu1", Image: "mother-chick:test", MotherAddress: "192.0.2.1:7777",
		CAPEM: "CA", Token: "tok", Resources: hatchery.GateResources, Hardening: cfg.Chicks.Hardening,
	}
}

func TestGateConfig(t *testing.T) {
	t.Parallel()
	cc, hc, err := gateConfig(gateSpec(), "mother-gate-m-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(cc.Entrypoint) != 0 || !slices.Equal(cc.Cmd, []string{"gate"}) {
		t.Errorf("entrypoint %v cmd %v, want the image's entrypoint with gate", cc.Entrypoint, cc.Cmd)
	}
	wantEnv := []string{"MOTHER_ADDR=192.0.2.1:7777", wire.EnvGateHost + "=gpu1", wire.EnvGateToken + "=tok", wire.EnvGateDir + "=" + wire.GateDir, "MOTHER_CA_PEM=CA"}
	if !slices.Equal(cc.Env, wantEnv) {
		t.Errorf("env %q, want %q", cc.Env, wantEnv)
	}
	if cc.User != "65534:65534" || !hc.ReadonlyRootfs || !slices.Equal(hc.CapDrop, []string{"ALL"}) || !slices.Equal(hc.SecurityOpt, []string{"no-new-privileges"}) {
		t.Errorf("hardening: user %q readonly %v capdrop %v secopt %v", cc.User, hc.ReadonlyRootfs, hc.CapDrop, hc.SecurityOpt)
	}
	if hc.NetworkMode != "host" || hc.RestartPolicy.Name != "unless-stopped" || hc.Memory != 64<<20 || *hc.PidsLimit != 128 || hc.NanoCPUs != 0 {
		t.Errorf("network %q restart %q memory %d pids %d cpus %d", hc.NetworkMode, hc.RestartPolicy.Name, hc.Memory, *hc.PidsLimit, hc.NanoCPUs)
	}
	if len(hc.Mounts) != 1 || hc.Mounts[0].Source != "mother-gate-m-1" || hc.Mounts[0].Target != wire.GateDir || hc.Mounts[0].ReadOnly {
		t.Errorf("mounts %+v, want the gate volume read-write at %s", hc.Mounts, wire.GateDir)
	}
	s := gateSpec()
	s.Command = []string{"/bin/standin", "serve"}
	s.Hardening.User = ""
	if _, _, err := gateConfig(s, "v"); err == nil {
		t.Error("empty user accepted")
	}
	s.Hardening.User = "65534"
	cc, _, err = gateConfig(s, "v")
	if err != nil || !slices.Equal(cc.Entrypoint, []string{"/bin/standin"}) || !slices.Equal(cc.Cmd, []string{"serve"}) {
		t.Errorf("command override: %v %v %v", cc.Entrypoint, cc.Cmd, err)
	}
}

func TestGateVolumeOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ user, want string }{
		{"65534:65534", "size=1m,uid=65534,gid=65534,mode=0755"},
		{"1000", "size=1m,uid=1000,gid=1000,mode=0755"},
		{"nobody", "size=1m,mode=0777"},
	} {
		o := gateVolumeOptions(tc.user)
		if o["type"] != "tmpfs" || o["device"] != "tmpfs" || o["o"] != tc.want {
			t.Errorf("gateVolumeOptions(%q) = %v, want tmpfs with o=%s", tc.user, o, tc.want)
		}
	}
}

func TestIsolatedChickSpec(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{}
	cfg.SetDefaults("")
	_, hc, err := containerConfig(hatchery.ContainerSpec{Image: "img", Network: "none", GateVolume: "mother-gate-m-1", Resources: cfg.Chicks.Resources, Hardening: cfg.Chicks.Hardening})
	if err != nil {
		t.Fatal(err)
	}
	if hc.NetworkMode != "none" || len(hc.Mounts) != 1 || hc.Mounts[0].Source != "mother-gate-m-1" || hc.Mounts[0].Target != wire.GateDir || !hc.Mounts[0].ReadOnly {
		t.Errorf("network %q mounts %+v, want none and the gate volume read-only", hc.NetworkMode, hc.Mounts)
	}
}

func fakeGateRuntime(t *testing.T) (*enginetest.Engine, *Runtime) {
	t.Helper()
	e := enginetest.New(t)
	c, err := client.NewClientWithOpts(client.WithHost(e.Host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	rt := New(c)
	t.Cleanup(func() { rt.Close() })
	return e, rt
}

// keptHash is the spec label EnsureGate gives gateSpec() made from image
// id "sha256:img".
func keptHash() string {
	s := gateSpec()
	return hashOf(gateSpecVersion, s, "sha256:img", hashOf(gateSpecVersion, gateVolumeOptions(s.Hardening.User)))
}

func TestFakeEngineEnsureGate(t *testing.T) {
	t.Parallel()
	img := enginetest.JSON(200, map[string]any{"Id": "sha256:img"})
	vol := enginetest.JSON(200, map[string]any{"Name": "mother-gate-m-1", "Driver": "local", "Labels": map[string]string{hatchery.LabelGateSpec: hashOf(gateSpecVersion, gateVolumeOptions("65534:65534"))}})
	gate := func(host, hash, state string) enginetest.Answer {
		return enginetest.JSON(200, []map[string]any{{"Id": "g1", "State": state, "Labels": gateLabels("m-1", host, hash)}})
	}
	tests := []struct {
		name      string
		answers   map[string]enginetest.Answer
		wantErr   string
		wantKind  error
		wantCalls []string
		want      hatchery.GateStatus
	}{
		{
			name:    "no image",
			answers: map[string]enginetest.Answer{"GET /images/{}/json": enginetest.Error(404, "No such image: mother-chick:test")},
			wantErr: "make image", wantKind: hatchery.ErrContainerNotFound,
		},
		{
			name: "a gate of another host on this engine",
			answers: map[string]enginetest.Answer{
				"GET /images/{}/json": img, "GET /containers/json": gate("gpu2", "x", "running"),
			},
			wantErr: `gate of host "gpu2"`, wantKind: hatchery.ErrConflict,
		},
		{
			name: "the same gate running: kept, nothing made or started",
			answers: map[string]enginetest.Answer{
				"GET /images/{}/json": img, "GET /containers/json": gate("gpu1", keptHash(), "running"), "GET /volumes/{}": vol,
			},
			want:      hatchery.GateStatus{ID: "g1", Volume: "mother-gate-m-1"},
			wantCalls: []string{"GET /images/mother-chick:test/json", "GET /containers/json", "GET /volumes/mother-gate-m-1"},
		},
		{
			name: "the same gate stopped: started",
			answers: map[string]enginetest.Answer{
				"GET /images/{}/json": img, "GET /containers/json": gate("gpu1", keptHash(), "exited"), "GET /volumes/{}": vol,
				"POST /containers/{}/start": {Status: 204},
			},
			want: hatchery.GateStatus{ID: "g1", Volume: "mother-gate-m-1", Started: true},
		},
		{
			name: "another spec: replaced",
			answers: map[string]enginetest.Answer{
				"GET /images/{}/json": img, "GET /containers/json": gate("gpu1", "old", "running"), "GET /volumes/{}": vol,
				"DELETE /containers/{}": {Status: 204}, "POST /containers/create": enginetest.JSON(201, map[string]any{"Id": "g2"}),
				"POST /containers/{}/start": {Status: 204},
			},
			want: hatchery.GateStatus{ID: "g2", Volume: "mother-gate-m-1", Created: true, Replaced: true, Started: true},
		},
		{
			name: "none yet: volume and gate made",
			answers: map[string]enginetest.Answer{
				"GET /images/{}/json": img, "GET /containers/json": enginetest.JSON(200, []any{}),
				"GET /volumes/{}":           enginetest.Error(404, "get mother-gate-m-1: no such volume"),
				"POST /volumes/create":      enginetest.JSON(201, map[string]any{"Name": "mother-gate-m-1"}),
				"POST /containers/create":   enginetest.JSON(201, map[string]any{"Id": "g2"}),
				"POST /containers/{}/start": {Status: 204},
			},
			want: hatchery.GateStatus{ID: "g2", Volume: "mother-gate-m-1", Created: true, Started: true},
		},
		{
			name: "create fails",
			answers: map[string]enginetest.Answer{
				"GET /images/{}/json": img, "GET /containers/json": enginetest.JSON(200, []any{}), "GET /volumes/{}": vol,
				"POST /containers/create": enginetest.Error(500, "disk full"),
			},
			wantErr: "create container mother-gate-m-1: Error response from daemon: disk full",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, rt := fakeGateRuntime(t)
			for k, a := range tc.answers {
				method, path, _ := strings.Cut(k, " ")
				e.On(method, path, a)
			}
			st, err := rt.EnsureGate(context.Background(), gateSpec())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("EnsureGate = %+v, %v; want an error with %q", st, err, tc.wantErr)
				}
				if tc.wantKind != nil && !errors.Is(err, tc.wantKind) {
					t.Errorf("error %q not marked %v", err, tc.wantKind)
				}
				return
			}
			if err != nil || st != tc.want {
				t.Fatalf("EnsureGate = %+v, %v; want %+v", st, err, tc.want)
			}
			if tc.wantCalls != nil {
				var calls []string
				for _, c := range e.Calls() {
					if !strings.HasSuffix(c, " /_ping") {
						calls = append(calls, c)
					}
				}
				if !slices.Equal(calls, tc.wantCalls) {
					t.Errorf("calls %q, want %q", calls, tc.wantCalls)
				}
			}
		})
	}
}

func TestFakeEngineRemoveGate(t *testing.T) {
	t.Parallel()
	e, rt := fakeGateRuntime(t)
	e.On(http.MethodGet, "/containers/json", enginetest.JSON(200, []map[string]any{{"Id": "g1", "Labels": gateLabels("m-1", "gpu1", "x")}}))
	e.On(http.MethodDelete, "/containers/{}", enginetest.Answer{Status: 204})
	e.On(http.MethodDelete, "/volumes/{}", enginetest.Error(409, "remove mother-gate-m-1: volume is in use - [c1]"))
	err := rt.RemoveGate(context.Background(), "m-1")
	if !errors.Is(err, hatchery.ErrConflict) || !strings.Contains(err.Error(), "in use") {
		t.Errorf("RemoveGate with the volume in use = %v, want ErrConflict", err)
	}
	e.On(http.MethodDelete, "/volumes/{}", enginetest.Error(404, "no such volume"))
	if err := rt.RemoveGate(context.Background(), "m-1"); err != nil {
		t.Errorf("RemoveGate with nothing left = %v", err)
	}
}
