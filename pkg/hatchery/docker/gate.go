package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	pathpkg "path"
	"slices"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/wire"
)

// The gate of an isolated Mother instance on this engine
// (docs/isolation.md): one container and one volume per instance.

var _ hatchery.Gater = (*Runtime)(nil)

// GateName is the name of the gate's container and of its volume for
// instance.
func GateName(instance string) string { return "mother-gate-" + instance }

// HostsVolume is the volume of instance's gate that holds the isolated
// chicks' hosts file: a plain directory on the engine's disk, so the file
// outlives the gate's restarts (the gate volume is a tmpfs, emptied when
// nothing mounts it).
func HostsVolume(instance string) string { return GateName(instance) + "-hosts" }

// gateSpecVersion changes when the way a gate is built changes, so gates
// made by an older Mother are replaced.
const gateSpecVersion = "1"

// EnsureGate implements hatchery.Gater. A gate the engine listed, or
// has just made, and then does not know when it is started ("No such
// container": seen once in the power-cut soak's 278 cuts, on the restart
// after a Mother killed while her gate was being set up) is removed and
// made again, once.
func (r *Runtime) EnsureGate(ctx context.Context, s hatchery.GateSpec) (hatchery.GateStatus, error) {
	st, err := r.ensureGate(ctx, s)
	var gone *vanished
	if !errors.As(err, &gone) {
		return st, err
	}
	if rerr := r.removeGate(ctx, gone.id); rerr != nil {
		return st, err
	}
	st, err = r.ensureGate(ctx, s)
	if errors.As(err, &gone) {
		err = gone.err
	}
	return st, err
}

// vanished is a gate container gone between its listing (or creation)
// and its start.
type vanished struct {
	id  string
	err error
}

func (v *vanished) Error() string { return v.err.Error() }
func (v *vanished) Unwrap() error { return v.err }

func (r *Runtime) ensureGate(ctx context.Context, s hatchery.GateSpec) (hatchery.GateStatus, error) {
	name := GateName(s.Instance)
	st := hatchery.GateStatus{Volume: name}
	if s.Instance == "" || s.HostName == "" {
		return st, errors.New("gate: instance and host name are required")
	}
	img, err := r.api.ImageInspect(ctx, s.Image)
	if err != nil {
		err = classify(err)
		if errors.Is(err, hatchery.ErrContainerNotFound) {
			return st, fmt.Errorf("gate: the image %s is not on this Docker host (build it with `make image` there, or set chicks.image): %w", s.Image, &marked{hatchery.ErrImageMissing, err})
		}
		return st, fmt.Errorf("gate: inspect image %s: %w", s.Image, err)
	}
	cc, hc, err := gateConfig(s, name)
	if err != nil {
		return st, err
	}
	vopts := gateVolumeOptions(s.Hardening.User)
	volHash := hashOf(gateSpecVersion, vopts)
	hash := hashOf(gateSpecVersion, s, img.ID, volHash, HostsVolume(s.Instance))
	cc.Labels = gateLabels(s.Instance, s.HostName, hash)

	found, err := r.gates(ctx, s.Instance)
	if err != nil {
		return st, err
	}
	var keep *container.Summary
	var drop []container.Summary
	for i, c := range found {
		if h := c.Labels[hatchery.LabelGateHost]; h != s.HostName {
			return st, &marked{hatchery.ErrConflict, fmt.Errorf("gate: this Docker engine already runs the gate of host %q for this Mother (do two chicks.hosts entries name the same engine?)", h)}
		}
		switch {
		case c.Labels[hatchery.LabelGateSpec] != hash:
			drop = append(drop, c)
		case keep == nil:
			keep = &found[i]
		case c.State == hatchery.ContainerRunning && keep.State != hatchery.ContainerRunning:
			drop = append(drop, *keep)
			keep = &found[i]
		default:
			drop = append(drop, c)
		}
	}
	if keep == nil || keep.State != hatchery.ContainerRunning {
		// A gate of another spec (an older Mother's or image's) that
		// chicks still use serves them until they are gone, unless it
		// cannot: then replacing it is no worse.
		if old, err := r.keepForChicks(ctx, s.Instance, drop, cc.Env); err != nil || old != "" {
			st.ID, st.Kept = old, old != ""
			return st, err
		}
	}
	for _, c := range drop {
		if err := r.removeGate(ctx, c.ID); err != nil {
			return st, err
		}
		st.Replaced = true
	}

	// The volume: made once; remade only when its options change (and no
	// chick mounts it any more).
	v, err := r.api.VolumeInspect(ctx, name)
	switch {
	case err == nil && v.Labels[hatchery.LabelGateSpec] != volHash:
		if keep != nil {
			if err := r.removeGate(ctx, keep.ID); err != nil {
				return st, err
			}
			keep, st.Replaced = nil, true
		}
		if err := r.api.VolumeRemove(ctx, name, false); err != nil && !cerrdefs.IsNotFound(err) {
			return st, fmt.Errorf("gate: replace volume %s (its options changed): %w", name, classify(err))
		}
		fallthrough
	case cerrdefs.IsNotFound(err):
		_, err = r.api.VolumeCreate(ctx, volume.CreateOptions{
			Name: name, Driver: "local", DriverOpts: vopts,
			Labels: map[string]string{hatchery.LabelGate: s.Instance, hatchery.LabelInstance: s.Instance, hatchery.LabelGateSpec: volHash},
		})
		if err != nil {
			return st, fmt.Errorf("gate: create volume %s: %w", name, classify(err))
		}
	case err != nil:
		return st, fmt.Errorf("gate: inspect volume %s: %w", name, classify(err))
	}

	if keep == nil {
		resp, err := r.api.ContainerCreate(ctx, cc, hc, nil, nil, name)
		if err != nil {
			return st, fmt.Errorf("gate: create container %s: %w", name, classify(err))
		}
		st.ID, st.Created = resp.ID, true
	} else {
		st.ID = keep.ID
	}
	// Before the start, so the start is the ensure's last call: the
	// hatchery gives the chicks their reconnect grace when it returns.
	r.placeHosts(ctx, s.Instance, st.ID)
	// Not running, and the engine's restart policy not on it: started.
	if keep == nil || (keep.State != hatchery.ContainerRunning && keep.State != "restarting") {
		if err := r.api.ContainerStart(ctx, st.ID, container.StartOptions{}); err != nil {
			err = fmt.Errorf("gate: start container %s: %w", name, classify(err))
			if errors.Is(err, hatchery.ErrContainerNotFound) {
				return st, &vanished{id: st.ID, err: err}
			}
			return st, err
		}
		st.Started = true
	}
	return st, nil
}

// keepForChicks returns the running gate among old (gates of another
// spec) to keep, if running chicks of instance on this engine mount the
// gate's volume and the gate still serves them: it reaches the same
// Mother with the same token and CA (env is the new gate's environment).
// Its hosts file is placed for the chicks that start meanwhile.
func (r *Runtime) keepForChicks(ctx context.Context, instance string, old []container.Summary, env []string) (string, error) {
	id := ""
	for _, c := range old {
		if c.State == hatchery.ContainerRunning || c.State == "restarting" {
			id = c.ID
			break
		}
	}
	if id == "" {
		return "", nil
	}
	list, err := r.api.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(
		filters.Arg("volume", GateName(instance)),
		filters.Arg("label", hatchery.LabelInstance+"="+instance),
	)})
	if err != nil {
		return "", fmt.Errorf("gate: list the chicks that use it: %w", classify(err))
	}
	used := false
	for _, c := range list {
		if _, gate := c.Labels[hatchery.LabelGate]; !gate {
			used = true
			break
		}
	}
	if !used {
		return "", nil
	}
	insp, err := r.api.ContainerInspect(ctx, id)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("gate: inspect container %s: %w", short(id), classify(err))
	}
	if insp.Config == nil || !slices.Equal(reachEnv(insp.Config.Env), reachEnv(env)) {
		return "", nil
	}
	r.placeHosts(ctx, instance, id)
	return id, nil
}

// reachEnv is the part of a gate's environment it needs right to serve
// at all: where Mother is, the name and token it calls her with, and the
// CA it trusts.
func reachEnv(env []string) []string {
	var out []string
	for _, e := range env {
		switch k, _, _ := strings.Cut(e, "="); k {
		case hatchery.EnvAddr, wire.EnvGateHost, wire.EnvGateToken, hatchery.EnvCA:
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return out
}

// placeHosts writes the isolated chicks' hosts file (wire.ChickHosts) into
// instance's HostsVolume through its gate (id, running or not: the volume
// is a directory on the engine's disk), which mounts it (made with the
// gate's container), on every ensure. Chicks then mount the file at
// /etc/hosts from the volume's mountpoint on the engine, and run with the
// engine's networking disabled (containerConfig). Where it cannot be
// written they run in the engine's network mode "none", which is slower
// to start but the same to them.
func (r *Runtime) placeHosts(ctx context.Context, instance, id string) {
	path := ""
	if v, err := r.api.VolumeInspect(ctx, HostsVolume(instance)); err == nil && v.Mountpoint != "" {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		tw.WriteHeader(&tar.Header{Name: wire.GateHostsFile, Mode: 0o644, Size: int64(len(wire.ChickHosts)), Typeflag: tar.TypeReg})
		tw.Write([]byte(wire.ChickHosts))
		tw.Close()
		if r.api.CopyToContainer(ctx, id, wire.GateHostsDir, &b, container.CopyToContainerOptions{}) == nil {
			path = pathpkg.Join(v.Mountpoint, wire.GateHostsFile)
		}
	}
	vol := GateName(instance) // what an isolated chick's spec names
	r.mu.Lock()
	defer r.mu.Unlock()
	if path == "" {
		delete(r.hosts, vol)
		return
	}
	if r.hosts == nil {
		r.hosts = map[string]string{}
	}
	r.hosts[vol] = path
}

// RemoveGate implements hatchery.Gater.
func (r *Runtime) RemoveGate(ctx context.Context, instance string) error {
	found, err := r.gates(ctx, instance)
	if err != nil {
		return err
	}
	for _, c := range found {
		if err := r.removeGate(ctx, c.ID); err != nil {
			return err
		}
	}
	for _, name := range []string{GateName(instance), HostsVolume(instance)} {
		if err := r.api.VolumeRemove(ctx, name, false); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("gate: remove volume %s: %w", name, classify(err))
		}
	}
	return nil
}

// gates lists the gate containers of instance, running or not.
func (r *Runtime) gates(ctx context.Context, instance string) ([]container.Summary, error) {
	list, err := r.api.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", hatchery.LabelGate+"="+instance))})
	if err != nil {
		return nil, fmt.Errorf("gate: list gate containers: %w", classify(err))
	}
	return list, nil
}

func (r *Runtime) removeGate(ctx context.Context, id string) error {
	err := r.api.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("gate: remove container %s: %w", short(id), classify(err))
	}
	return nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// gateLabels mark a gate container (docs/isolation.md).
func gateLabels(instance, host, hash string) map[string]string {
	return map[string]string{
		hatchery.LabelGate:     instance,
		hatchery.LabelInstance: instance,
		hatchery.LabelGateHost: host,
		hatchery.LabelGateSpec: hash,
	}
}

// owner is a uid and gid.
type owner struct{ uid, gid int }

// parseOwner reads "uid[:gid]"; a name (not a number) gives -1.
func parseOwner(user string) owner {
	u, g, _ := strings.Cut(user, ":")
	uid, err := strconv.Atoi(u)
	if err != nil {
		return owner{-1, -1}
	}
	gid := uid
	if g != "" {
		if n, err := strconv.Atoi(g); err == nil {
			gid = n
		}
	}
	return owner{uid, gid}
}

// gateVolumeOptions make the gate's volume a small tmpfs owned by the
// chick user: the gate makes its sockets there, chicks (the same user)
// connect to them through a read-only mount. A user given by name has no
// uid to give the tmpfs; the directory is then open to all (chicks mount
// it read-only all the same).
func gateVolumeOptions(user string) map[string]string {
	o := "size=1m,mode=0777"
	if own := parseOwner(user); own.uid >= 0 {
		o = fmt.Sprintf("size=1m,uid=%d,gid=%d,mode=0755", own.uid, own.gid)
	}
	return map[string]string{"type": "tmpfs", "device": "tmpfs", "o": o}
}

// gateConfig builds the gate's container: the chick binary's gate mode on
// the host network (it reaches Mother on loopback or the LAN), hardened
// like a chick, restarted by the engine unless stopped.
func gateConfig(s hatchery.GateSpec, volumeName string) (*container.Config, *container.HostConfig, error) {
	mem, err := config.ParseBytes(s.Resources.Memory)
	if err != nil {
		return nil, nil, fmt.Errorf("gate memory: %w", err)
	}
	env := []string{
		hatchery.EnvAddr + "=" + s.MotherAddress,
		wire.EnvGateHost + "=" + s.HostName,
		wire.EnvGateToken + "=" + s.Token,
		wire.EnvGateDir + "=" + wire.GateDir,
		wire.EnvGateLimits + "=" + s.Limits.String(),
	}
	if mem > 0 {
		// The Go runtime collects harder as the heap nears this, well
		// below the container's limit, instead of being killed at it.
		env = append(env, "GOMEMLIMIT="+strconv.FormatInt(mem/4*3, 10))
	}
	if s.CAPEM != "" {
		env = append(env, hatchery.EnvCA+"="+s.CAPEM)
	}
	cc := &container.Config{Image: s.Image, Env: env, User: s.Hardening.User, Cmd: []string{"gate"}}
	if len(s.Command) > 0 {
		cc.Entrypoint, cc.Cmd = s.Command[:1], s.Command[1:]
	}
	pids := s.Resources.Pids
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode("host"),
		ReadonlyRootfs: on(s.Hardening.ReadOnlyRoot),
		Mounts: []mount.Mount{
			{Type: mount.TypeVolume, Source: volumeName, Target: wire.GateDir},
			// Made by the engine with the container, if need be.
			{Type: mount.TypeVolume, Source: HostsVolume(s.Instance), Target: wire.GateHostsDir, VolumeOptions: &mount.VolumeOptions{
				Labels: map[string]string{hatchery.LabelGate: s.Instance, hatchery.LabelInstance: s.Instance},
			}},
		},
		Resources: container.Resources{
			Memory:     mem,
			MemorySwap: mem,
			NanoCPUs:   int64(s.Resources.CPUs * 1e9),
			PidsLimit:  &pids,
		},
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
		LogConfig:     container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "10m", "max-file": "2"}},
	}
	if err := harden(hc, s.Hardening); err != nil {
		return nil, nil, err
	}
	return cc, hc, nil
}

// hashOf is a short hash of the JSON of parts (a spec label's value).
func hashOf(parts ...any) string {
	// Plain data (strings, maps of strings): Marshal cannot fail.
	b, _ := json.Marshal(parts)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}
