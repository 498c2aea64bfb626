package docker

import (
	"slices"
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
