package hatchery

import (
	"fmt"
	"strings"

	"github.com/docker/docker/api/types/container"

	"github.com/mother-chat/mother/pkg/config"
)

// Labels every chick container carries, so Mother can find and reap
// strays after a crash (decision 4).
const (
	LabelChickID  = "mother.chick.id"
	LabelChannel  = "mother.channel"
	LabelInstance = "mother.instance"
	LabelTier     = "mother.tier"
)

// Environment variables a chick is started with. These, and nothing Mother
// was given, are its whole environment.
const (
	EnvAddr    = "MOTHER_ADDR"
	EnvToken   = "MOTHER_TOKEN"
	EnvChickID = "MOTHER_CHICK_ID"
	// EnvCA is the nest's CA certificate (PEM, public): the chick trusts
	// only it when dialling Mother over TLS.
	EnvCA = "MOTHER_CA_PEM"
)

func on(b *bool) bool { return b == nil || *b }

// containerSpec builds the container's configuration from the chicks
// config: hardened by default (decision 4), each switch configurable.
func containerSpec(cfg config.Chicks, image string, cmd []string, labels map[string]string, env []string) (*container.Config, *container.HostConfig, error) {
	mem, err := config.ParseBytes(cfg.Resources.Memory)
	if err != nil {
		return nil, nil, fmt.Errorf("chicks.resources.memory: %w", err)
	}
	tmpfs, err := config.ParseBytes(cfg.Resources.Tmpfs)
	if err != nil {
		return nil, nil, fmt.Errorf("chicks.resources.tmpfs: %w", err)
	}
	h := cfg.Hardening
	cc := &container.Config{
		Image:      image,
		Env:        env,
		Labels:     labels,
		WorkingDir: Workspace,
		User:       h.User,
		// An anonymous volume: writable under a read-only root, filled
		// through the archive API before start, removed with the container.
		Volumes: map[string]struct{}{Workspace: {}},
	}
	if len(cmd) > 0 {
		// A command replaces the image's entrypoint (tests, debugging).
		cc.Entrypoint, cc.Cmd = cmd[:1], cmd[1:]
	}
	pids := cfg.Resources.Pids
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(cfg.Network),
		ReadonlyRootfs: on(h.ReadOnlyRoot),
		Tmpfs:          map[string]string{"/tmp": fmt.Sprintf("rw,nosuid,nodev,size=%d,mode=1777", tmpfs)},
		Resources: container.Resources{
			Memory:     mem,
			MemorySwap: mem, // no swap beyond the memory limit
			NanoCPUs:   int64(cfg.Resources.CPUs * 1e9),
			PidsLimit:  &pids,
		},
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		LogConfig:     container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "10m", "max-file": "2"}},
	}
	if on(h.DropCapabilities) {
		hc.CapDrop = []string{"ALL"}
	}
	if on(h.NoNewPrivileges) {
		hc.SecurityOpt = append(hc.SecurityOpt, "no-new-privileges")
	}
	if strings.TrimSpace(h.User) == "" {
		return nil, nil, fmt.Errorf("chicks.hardening.user: empty")
	}
	return cc, hc, nil
}
