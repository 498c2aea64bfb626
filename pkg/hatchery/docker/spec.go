package docker

import (
	"fmt"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/wire"
)

func on(b *bool) bool { return b == nil || *b }

// containerConfig builds the container's configuration from a chick's
// spec: hardened by default (decision 4), each switch configurable.
// hostsFile, for an isolated chick, is the engine's path of the hosts file
// in its gate's hosts volume ("" if there is none).
func containerConfig(s hatchery.ContainerSpec, hostsFile string) (*container.Config, *container.HostConfig, error) {
	mem, err := config.ParseBytes(s.Resources.Memory)
	if err != nil {
		return nil, nil, fmt.Errorf("chicks.resources.memory: %w", err)
	}
	tmpfs, err := config.ParseBytes(s.Resources.Tmpfs)
	if err != nil {
		return nil, nil, fmt.Errorf("chicks.resources.tmpfs: %w", err)
	}
	ws, err := config.ParseBytes(s.Resources.WorkspaceBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("chicks.resources.workspaceBytes: %w", err)
	}
	h := s.Hardening
	cc := &container.Config{
		Image:      s.Image,
		Env:        s.Env,
		Labels:     s.Labels,
		WorkingDir: hatchery.Workspace,
		User:       h.User,
	}
	if cmd := s.Command; len(cmd) > 0 {
		// A command replaces the image's entrypoint (tests, debugging).
		cc.Entrypoint, cc.Cmd = cmd[:1], cmd[1:]
	}
	pids := s.Resources.Pids
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(s.Network),
		ReadonlyRootfs: on(h.ReadOnlyRoot),
		Tmpfs: map[string]string{
			"/tmp": fmt.Sprintf("rw,nosuid,nodev,size=%d,mode=1777", tmpfs),
			// Writable under a read-only root, filled by the chick
			// (FetchFiles), gone with the container. A tmpfs of
			// chicks.resources.workspaceBytes: a write past it fails
			// with ENOSPC, and none of it reaches the engine's disk (an
			// anonymous volume there had no limit; docs/isolation.md).
			hatchery.Workspace: workspaceTmpfs(ws, h.User),
		},
		Resources: container.Resources{
			// A tmpfs's pages are charged to the container's memory:
			// the workspace gets its own share on top of the memory the
			// chick's processes are given, so a full workspace ends in
			// ENOSPC, not in an OOM kill of the agent.
			Memory:     mem + ws,
			MemorySwap: mem + ws, // no swap beyond the memory limit
			NanoCPUs:   int64(s.Resources.CPUs * 1e9),
			PidsLimit:  &pids,
		},
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		LogConfig:     container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "10m", "max-file": "2"}},
	}
	if s.GateVolume != "" {
		// The isolated chick's only way out: the gate's sockets, read-only.
		hc.Mounts = []mount.Mount{{Type: mount.TypeVolume, Source: s.GateVolume, Target: wire.GateDir, ReadOnly: true}}
	}
	if s.Network == config.NetworkNone && hostsFile != "" {
		// No network at all, as mode "none" gives, but made by runc: a
		// namespace of its own with only loopback. The engine then makes
		// no network sandbox for the chick and runs no prestart hook that
		// re-executes dockerd (libnetwork-setkey) for it: that was about
		// 40% of the engine's CPU for each isolated spawn. Nor does it
		// mount an /etc/hosts: the file of the gate's hosts volume,
		// read-only, keeps localhost resolving for the chick's tools.
		cc.NetworkDisabled = true
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: hostsFile, Target: "/etc/hosts", ReadOnly: true})
	}
	if err := harden(hc, h); err != nil {
		return nil, nil, err
	}
	return cc, hc, nil
}

// workspaceTmpfs is the options of the chick's /workspace tmpfs: size
// bytes, owned by the chick user when it is numeric (the images' 1777
// directory, open to all, otherwise). Executables may run from it, as
// from the volume it replaces (the chick's tools build and run programs
// there): the engine mounts a tmpfs noexec unless told "exec".
func workspaceTmpfs(size int64, user string) string {
	o := fmt.Sprintf("rw,exec,nosuid,nodev,size=%d,mode=1777", size)
	if own := parseOwner(user); own.uid >= 0 {
		o = fmt.Sprintf("rw,exec,nosuid,nodev,size=%d,uid=%d,gid=%d,mode=0755", size, own.uid, own.gid)
	}
	return o
}

// harden applies the hardening switches shared by chicks and gates
// (the user goes in the container's Config).
func harden(hc *container.HostConfig, h config.Hardening) error {
	if on(h.DropCapabilities) {
		hc.CapDrop = []string{"ALL"}
	}
	if on(h.NoNewPrivileges) {
		hc.SecurityOpt = append(hc.SecurityOpt, "no-new-privileges")
	}
	if strings.TrimSpace(h.User) == "" {
		return fmt.Errorf("chicks.hardening.user: empty")
	}
	return nil
}
