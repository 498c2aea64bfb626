package docker

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/mount"
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
		Limits: wire.GateLimits{NestConnsPerChick: 4, ProxyConnsPerChick: 32, Pending: 64, Conns: 512, PrefaceTimeout: 5 * time.Second},
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
	wantEnv := []string{"MOTHER_ADDR=192.0.2.1:7777", wire.EnvGateHost + "=gpu1", wire.EnvGateToken + "=tok", wire.EnvGateDir + "=" + wire.GateDir,
		wire.EnvGateLimits + "=nest=4 proxy=32 pending=64 conns=512 preface=5s",
		"GOMEMLIMIT=50331648", // 48 MiB: 3/4 of the gate's 64
		"MOTHER_CA_PEM=CA"}
	if !slices.Equal(cc.Env, wantEnv) {
		t.Errorf("env %q, want %q", cc.Env, wantEnv)
	}
	if cc.User != "65534:65534" || !hc.ReadonlyRootfs || !slices.Equal(hc.CapDrop, []string{"ALL"}) || !slices.Equal(hc.SecurityOpt, []string{"no-new-privileges"}) {
		t.Errorf("hardening: user %q readonly %v capdrop %v secopt %v", cc.User, hc.ReadonlyRootfs, hc.CapDrop, hc.SecurityOpt)
	}
	if hc.NetworkMode != "host" || hc.RestartPolicy.Name != "unless-stopped" || hc.Memory != 64<<20 || *hc.PidsLimit != 128 || hc.NanoCPUs != 0 {
		t.Errorf("network %q restart %q memory %d pids %d cpus %d", hc.NetworkMode, hc.RestartPolicy.Name, hc.Memory, *hc.PidsLimit, hc.NanoCPUs)
	}
	if len(hc.Mounts) != 2 || hc.Mounts[0].Source != "mother-gate-m-1" || hc.Mounts[0].Target != wire.GateDir || hc.Mounts[0].ReadOnly ||
		hc.Mounts[1].Source != "mother-gate-m-1-hosts" || hc.Mounts[1].Target != wire.GateHostsDir || hc.Mounts[1].ReadOnly ||
		hc.Mounts[1].VolumeOptions == nil || hc.Mounts[1].VolumeOptions.Labels[hatchery.LabelInstance] != "m-1" {
		t.Errorf("mounts %+v, want the gate volume read-write at %s and the hosts volume (labelled) read-write at %s", hc.Mounts, wire.GateDir, wire.GateHostsDir)
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
	iso := hatchery.ContainerSpec{Image: "img", Network: "none", GateVolume: "mother-gate-m-1", Resources: cfg.Chicks.Resources, Hardening: cfg.Chicks.Hardening}
	gateVol := mount.Mount{Type: mount.TypeVolume, Source: "mother-gate-m-1", Target: wire.GateDir, ReadOnly: true}
	hosts := mount.Mount{Type: mount.TypeBind, Source: "/var/lib/docker/volumes/mother-gate-m-1/_data/hosts", Target: "/etc/hosts", ReadOnly: true}
	// With the gate volume's hosts file: the engine's networking
	// disabled (runc's namespace with only loopback), the file at
	// /etc/hosts.
	cc, hc, err := containerConfig(iso, hosts.Source)
	if err != nil {
		t.Fatal(err)
	}
	if !cc.NetworkDisabled || hc.NetworkMode != "none" || !slices.Equal(hc.Mounts, []mount.Mount{gateVol, hosts}) {
		t.Errorf("with a hosts file: NetworkDisabled %v, network %q, mounts %+v; want true, none, the gate volume and the hosts file read-only", cc.NetworkDisabled, hc.NetworkMode, hc.Mounts)
	}
	// Without one: the engine's mode "none".
	cc, hc, err = containerConfig(iso, "")
	if err != nil {
		t.Fatal(err)
	}
	if cc.NetworkDisabled || hc.NetworkMode != "none" || !slices.Equal(hc.Mounts, []mount.Mount{gateVol}) {
		t.Errorf("without a hosts file: NetworkDisabled %v, network %q, mounts %+v; want false, none, the gate volume read-only", cc.NetworkDisabled, hc.NetworkMode, hc.Mounts)
	}
	// Any other network is the engine's, hosts file or not.
	for _, network := range []string{config.NetworkHost, config.NetworkBridge} {
		s := iso
		s.Network, s.GateVolume = network, ""
		cc, hc, err := containerConfig(s, hosts.Source)
		if err != nil {
			t.Fatal(err)
		}
		if cc.NetworkDisabled || string(hc.NetworkMode) != network || len(hc.Mounts) != 0 {
			t.Errorf("network %q: NetworkDisabled %v, mode %q, mounts %+v", network, cc.NetworkDisabled, hc.NetworkMode, hc.Mounts)
		}
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
	return hashOf(gateSpecVersion, s, "sha256:img", hashOf(gateSpecVersion, gateVolumeOptions(s.Hardening.User)), HostsVolume(s.Instance))
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
			wantCalls: []string{"GET /images/mother-chick:test/json", "GET /containers/json", "GET /volumes/mother-gate-m-1", "GET /volumes/mother-gate-m-1-hosts"},
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

// TestFakeEngineIsolatedChickHostsFile: EnsureGate writes the chicks'
// hosts file into the gate's hosts volume through the gate, and an
// isolated chick is then created with the engine's networking disabled
// and that file, from the volume's mountpoint, at /etc/hosts. Where the file could
// not be written, or the engine refuses the mount (the file is gone), the
// chick is created in the engine's mode "none".
func TestFakeEngineIsolatedChickHostsFile(t *testing.T) {
	t.Parallel()
	const mp = "/var/lib/docker/volumes/mother-gate-m-1-hosts/_data"
	cfg := &config.Config{}
	cfg.SetDefaults("")
	iso := hatchery.ContainerSpec{Name: "c1", Image: "mother-chick:test", Network: "none", GateVolume: "mother-gate-m-1", Resources: cfg.Chicks.Resources, Hardening: cfg.Chicks.Hardening}
	type created struct {
		NetworkDisabled bool
		HostConfig      struct {
			NetworkMode string
			Mounts      []mount.Mount
		}
	}
	creates := func(e *enginetest.Engine) (got []created) {
		bodies := e.Bodies()
		for i, c := range e.Calls() {
			if c == "POST /containers/create" {
				var cr created
				if err := json.Unmarshal([]byte(bodies[i]), &cr); err != nil {
					t.Fatal(err)
				}
				got = append(got, cr)
			}
		}
		return got
	}
	hostsMount := mount.Mount{Type: mount.TypeBind, Source: mp + "/hosts", Target: "/etc/hosts", ReadOnly: true}
	for _, tc := range []struct {
		name       string
		copyAnswer enginetest.Answer
		refuse     bool // the first create is refused as a bad mount
		want       []bool
	}{
		{name: "written", copyAnswer: enginetest.Answer{Status: 200}, want: []bool{true}},
		{name: "not written", copyAnswer: enginetest.Error(500, "no space left on device"), want: []bool{false}},
		{name: "gone from the volume", copyAnswer: enginetest.Answer{Status: 200}, refuse: true, want: []bool{true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, rt := fakeGateRuntime(t)
			e.On("GET", "/images/{}/json", enginetest.JSON(200, map[string]any{"Id": "sha256:img"}))
			e.On("GET", "/containers/json", enginetest.JSON(200, []map[string]any{{"Id": "g1", "State": "running", "Labels": gateLabels("m-1", "gpu1", keptHash())}}))
			e.On("GET", "/volumes/{}", enginetest.JSON(200, map[string]any{"Name": "mother-gate-m-1", "Driver": "local", "Labels": map[string]string{hatchery.LabelGateSpec: hashOf(gateSpecVersion, gateVolumeOptions("65534:65534"))}}))
			e.On("GET", "/volumes/mother-gate-m-1-hosts", enginetest.JSON(200, map[string]any{"Name": "mother-gate-m-1-hosts", "Driver": "local", "Mountpoint": mp}))
			e.On("PUT", "/containers/{}/archive", tc.copyAnswer)
			e.On("POST", "/containers/create", enginetest.JSON(201, map[string]any{"Id": "c1"}))
			if tc.refuse {
				e.OnOnce("POST", "/containers/create", enginetest.Error(400, `invalid mount config for type "bind": bind source path does not exist: `+mp+"/hosts"))
			}
			if _, err := rt.EnsureGate(context.Background(), gateSpec()); err != nil {
				t.Fatal(err)
			}
			// The file went to the gate's hosts volume as a tar of one entry.
			n := slices.Index(e.Calls(), "PUT /containers/g1/archive")
			if n < 0 {
				t.Fatalf("no copy into the gate; calls %q", e.Calls())
			}
			tr := tar.NewReader(strings.NewReader(e.Bodies()[n]))
			h, err := tr.Next()
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(tr)
			if h.Name != wire.GateHostsFile || h.Mode != 0o644 || string(body) != wire.ChickHosts {
				t.Errorf("copied %s (mode %o): %q; want hosts (644): %q", h.Name, h.Mode, body, wire.ChickHosts)
			}
			if id, err := rt.Create(context.Background(), iso); err != nil || id != "c1" {
				t.Fatalf("Create = %q, %v", id, err)
			}
			got := creates(e)
			if len(got) != len(tc.want) {
				t.Fatalf("%d creates, want %d", len(got), len(tc.want))
			}
			for i, disabled := range tc.want {
				c := got[i]
				hasHosts := slices.Contains(c.HostConfig.Mounts, hostsMount)
				if c.NetworkDisabled != disabled || hasHosts != disabled || c.HostConfig.NetworkMode != "none" {
					t.Errorf("create %d: NetworkDisabled %v, hosts mounted %v, mode %q; want %v, %v, none (mounts %+v)", i, c.NetworkDisabled, hasHosts, c.HostConfig.NetworkMode, disabled, disabled, c.HostConfig.Mounts)
				}
			}
		})
	}
}

// TestFakeEngineEnsureGateMadeAgainWhenItVanishes: a gate the engine
// lists and then does not know when it is started ("No such container")
// is removed and made again, once; gone twice, the error is the start's.
func TestFakeEngineEnsureGateMadeAgainWhenItVanishes(t *testing.T) {
	t.Parallel()
	img := enginetest.JSON(200, map[string]any{"Id": "sha256:img"})
	vol := enginetest.JSON(200, map[string]any{"Name": "mother-gate-m-1", "Driver": "local", "Labels": map[string]string{hatchery.LabelGateSpec: hashOf(gateSpecVersion, gateVolumeOptions("65534:65534"))}})
	ghost := enginetest.JSON(200, []map[string]any{{"Id": "g1", "State": "exited", "Labels": gateLabels("m-1", "gpu1", keptHash())}})
	noSuch := enginetest.Error(404, "No such container: g1")

	e, rt := fakeGateRuntime(t)
	e.On(http.MethodGet, "/images/{}/json", img)
	e.On(http.MethodGet, "/volumes/{}", vol)
	e.On(http.MethodGet, "/containers/json", enginetest.JSON(200, []any{}))
	e.OnOnce(http.MethodGet, "/containers/json", ghost)
	e.On(http.MethodDelete, "/containers/{}", enginetest.Error(404, "No such container: g1"))
	e.On(http.MethodPost, "/containers/create", enginetest.JSON(201, map[string]any{"Id": "g2"}))
	e.On(http.MethodPost, "/containers/{}/start", enginetest.Answer{Status: 204})
	e.OnOnce(http.MethodPost, "/containers/{}/start", noSuch)
	st, err := rt.EnsureGate(context.Background(), gateSpec())
	if want := (hatchery.GateStatus{ID: "g2", Volume: "mother-gate-m-1", Created: true, Started: true}); err != nil || st != want {
		t.Fatalf("EnsureGate = %+v, %v; want %+v", st, err, want)
	}
	removed := false
	for _, c := range e.Calls() {
		removed = removed || c == "DELETE /containers/g1"
	}
	if !removed {
		t.Errorf("the vanished gate was not removed: %q", e.Calls())
	}

	// Gone again: no third try.
	e2, rt2 := fakeGateRuntime(t)
	e2.On(http.MethodGet, "/images/{}/json", img)
	e2.On(http.MethodGet, "/volumes/{}", vol)
	e2.On(http.MethodGet, "/containers/json", ghost)
	e2.On(http.MethodDelete, "/containers/{}", enginetest.Answer{Status: 204})
	e2.On(http.MethodPost, "/containers/{}/start", noSuch)
	if _, err := rt2.EnsureGate(context.Background(), gateSpec()); !errors.Is(err, hatchery.ErrContainerNotFound) || !strings.Contains(err.Error(), "start container mother-gate-m-1") {
		t.Fatalf("EnsureGate with the gate gone twice = %v; want the start's error", err)
	}
	starts := 0
	for _, c := range e2.Calls() {
		if strings.HasSuffix(c, "/start") {
			starts++
		}
	}
	if starts != 2 {
		t.Errorf("%d starts, want 2 (one retry)", starts)
	}
}
