package docker

import (
	"slices"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
)

func TestHardeningSwitches(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{}
	cfg.SetDefaults("")
	dc, hc, err := containerConfig(spec(cfg.Chicks, nil), "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(hc.CapDrop, []string{"ALL"}) || !slices.Equal(hc.SecurityOpt, []string{"no-new-privileges"}) || !hc.ReadonlyRootfs || dc.User != "65534:65534" {
		t.Errorf("defaults: capdrop %q secopt %q readonly %v user %q, want [ALL], [no-new-privileges], true, 65534:65534", hc.CapDrop, hc.SecurityOpt, hc.ReadonlyRootfs, dc.User)
	}
	off := false
	cfg.Chicks.Hardening = config.Hardening{DropCapabilities: &off, NoNewPrivileges: &off, ReadOnlyRoot: &off, User: "1000:1000"}
	cc, hc, err := containerConfig(spec(cfg.Chicks, []string{"sleep", "1"}), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(hc.CapDrop) != 0 || len(hc.SecurityOpt) != 0 || hc.ReadonlyRootfs || cc.User != "1000:1000" {
		t.Errorf("switched off: capdrop %v secopt %v readonly %v user %q", hc.CapDrop, hc.SecurityOpt, hc.ReadonlyRootfs, cc.User)
	}
	if len(cc.Entrypoint) != 1 || cc.Entrypoint[0] != "sleep" || len(cc.Cmd) != 1 {
		t.Errorf("command override: entrypoint %v cmd %v", cc.Entrypoint, cc.Cmd)
	}
	cfg.Chicks.Resources.Memory = "lots"
	if _, _, err := containerConfig(spec(cfg.Chicks, nil), ""); err == nil {
		t.Error("bad memory size accepted")
	}
}

// spec is the ContainerSpec the hatchery makes from a chicks config.
func spec(cfg config.Chicks, cmd []string) hatchery.ContainerSpec {
	return hatchery.ContainerSpec{Image: "img", Command: cmd, Network: cfg.Network, Resources: cfg.Resources, Hardening: cfg.Hardening}
}

// TestWorkspaceIsASizedTmpfs: /workspace is a tmpfs of
// chicks.resources.workspaceBytes owned by the chick user, not a volume
// on the engine's disk, and the memory limit makes room for it; a bad
// size is refused with the field's name.
func TestWorkspaceIsASizedTmpfs(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{}
	cfg.SetDefaults("")
	cc, hc, err := containerConfig(spec(cfg.Chicks, nil), "")
	if err != nil {
		t.Fatal(err)
	}
	const gib = 1 << 30
	if got, want := hc.Tmpfs[hatchery.Workspace], "rw,exec,nosuid,nodev,size=2147483648,uid=65534,gid=65534,mode=0755"; got != want {
		t.Errorf("default /workspace tmpfs %q, want %q", got, want)
	}
	if len(cc.Volumes) != 0 || len(hc.Mounts) != 0 || len(hc.Binds) != 0 {
		t.Errorf("volumes %v mounts %v binds %v: the workspace must not be a volume on the engine's disk", cc.Volumes, hc.Mounts, hc.Binds)
	}
	if hc.Memory != 2*gib+2*gib || hc.MemorySwap != hc.Memory {
		t.Errorf("memory %d swap %d, want the chick's 2g plus the workspace's 2g, no swap", hc.Memory, hc.MemorySwap)
	}
	cfg.Chicks.Resources.WorkspaceBytes = "64m"
	cfg.Chicks.Resources.Memory = "256m"
	cfg.Chicks.Hardening.User = "nobody"
	_, hc, err = containerConfig(spec(cfg.Chicks, nil), "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hc.Tmpfs[hatchery.Workspace], "rw,exec,nosuid,nodev,size=67108864,mode=1777"; got != want {
		t.Errorf("/workspace tmpfs for a user by name %q, want %q", got, want)
	}
	if hc.Memory != (256+64)<<20 {
		t.Errorf("memory %d, want 256m + 64m", hc.Memory)
	}
	for _, bad := range []string{"", "0", "big"} {
		cfg.Chicks.Resources.WorkspaceBytes = bad
		if _, _, err := containerConfig(spec(cfg.Chicks, nil), ""); err == nil || !strings.Contains(err.Error(), "chicks.resources.workspaceBytes") {
			t.Errorf("workspaceBytes %q: %v, want an error naming the field", bad, err)
		}
	}
}
