package hatchery

import (
	"testing"

	"github.com/mother-chat/mother/pkg/config"
)

func TestHardeningSwitches(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{}
	cfg.SetDefaults("")
	_, hc, err := containerSpec(cfg.Chicks, "img", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(hc.CapDrop) != 1 || len(hc.SecurityOpt) != 1 || !hc.ReadonlyRootfs {
		t.Errorf("defaults: capdrop %v secopt %v readonly %v, want all on", hc.CapDrop, hc.SecurityOpt, hc.ReadonlyRootfs)
	}
	off := false
	cfg.Chicks.Hardening = config.Hardening{DropCapabilities: &off, NoNewPrivileges: &off, ReadOnlyRoot: &off, User: "1000:1000"}
	cc, hc, err := containerSpec(cfg.Chicks, "img", []string{"sleep", "1"}, nil, nil)
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
	if _, _, err := containerSpec(cfg.Chicks, "img", nil, nil, nil); err == nil {
		t.Error("bad memory size accepted")
	}
}

func TestUploadPathsStayInside(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "/etc/passwd", "../x", "a/../../x", ".", ".."} {
		if _, err := cleanRel(bad); err == nil {
			t.Errorf("cleanRel(%q) accepted", bad)
		}
	}
	for in, want := range map[string]string{"a/b.txt": "a/b.txt", "/workspace/out/r.md": "out/r.md", "a/./b/../c": "a/c"} {
		if got, err := cleanRel(in); err != nil || got != want {
			t.Errorf("cleanRel(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
