package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/metrics"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	release "github.com/mother-chat/mother/pkg/version"
)

// versionsRelabel builds, on the local engine and from the test's chick
// image (never pulled), an image labelled as release rel, and removes the
// tag when the test ends.
func versionsRelabel(t *testing.T, rel string) string {
	t.Helper()
	tag := fmt.Sprintf("mother-chick:versions-%d", time.Now().UnixNano())
	cmd := exec.Command("docker", "build", "-q", "-t", tag, "-")
	cmd.Stdin = strings.NewReader("FROM " + hatcherytest.BuildImage(t) + "\nLABEL " + release.LabelRelease + "=" + rel + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker build of the relabelled image: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "image", "rm", tag).Run() })
	return tag
}

// versionsHealth reads /healthz.
func versionsHealth(t *testing.T, base string) (int, metrics.Health, string) {
	t.Helper()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var h metrics.Health
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatalf("/healthz: %v\n%s", err, b)
	}
	return resp.StatusCode, h, string(b)
}

// TestVersionsImageIncompatible: the chick image on the host says
// release 9.9.0, outside what this Mother works with. Mother warns that
// chicks are off there, a chick asked for is refused with one sentence
// naming both releases and the fix, and the host's state is
// "incompatible" with that sentence on /healthz and in momctl status.
// When the image changes (the tag moved to a good one), asking again
// clears it.
func TestVersionsImageIncompatible(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	tag := versionsRelabel(t, "9.9.0")
	metricsAddr := freePort(t)
	data, _ := chickData(t, api, map[string]any{"metrics": map[string]any{"listen": metricsAddr}})
	cfg := readJSON(t, data+"/config.json")
	cfg["chicks"].(map[string]any)["image"] = tag
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(data+"/config.json", b, 0o600); err != nil {
		t.Fatal(err)
	}
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if !hasToolResult(r) {
			return motherTurn("count the files")
		}
		return ollamatest.Turn{Text: "Told: " + strings.Join(toolResults(r), " | ")}
	})
	defer fake.Close()
	p := startChickMother(t, data, chickEnv(fake))
	want := "the chick image on host local is 9.9.0; this Mother (" + release.Release + ") needs 0.1.x or 0.2.x: upgrade the mother package here, or install mother-chick 0.2.x there"
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(p.errs(), "its chick image is of a release this Mother does not work with") {
		if time.Now().After(deadline) {
			t.Fatalf("no warning that chicks are off; stderr:\n%s", p.errs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	io.WriteString(p.stdin, "please count the files\n")
	p.waitOut(t, "Told: ", time.Minute)
	if out := p.out(); !strings.Contains(out, "Not started: "+want+".") || strings.Contains(out, "hatched") {
		t.Errorf("the spawn's result does not say %q:\n%s", want, out)
	}
	if n, _ := recordedChicks(t, data); n != 0 {
		t.Errorf("%d chick records written, want none", n)
	}

	base := "http://" + metricsAddr
	code, h, body := versionsHealth(t, base)
	if code != http.StatusServiceUnavailable || h.Status != "degraded" || len(h.HostsIncompatible) != 1 ||
		h.HostsIncompatible[0] != (metrics.HostIncompatible{Host: "local", State: "incompatible", Reason: want}) || h.Release != release.Release {
		t.Errorf("/healthz: %d %s, want degraded with local incompatible: %q", code, body, want)
	}
	st, rc := momctl(t, data, "status")
	if rc != 0 || !strings.Contains(st, "  local  INCOMPATIBLE") || !strings.Contains(st, want) {
		t.Errorf("momctl status: exit %d, want local INCOMPATIBLE with %q:\n%s", rc, want, st)
	}
	js, rc := momctl(t, data, "status", "--json")
	var sj struct {
		Hosts []struct{ Name, State, Incompatible string }
	}
	if err := json.Unmarshal([]byte(js), &sj); rc != 0 || err != nil || len(sj.Hosts) != 1 || sj.Hosts[0].State != "incompatible" || sj.Hosts[0].Incompatible != want {
		t.Errorf("momctl status --json: exit %d %v, want local incompatible:\n%s", rc, err, js)
	}

	// The tag moves to an image of this release: momctl status asks the
	// host again, and the state clears.
	if out, err := exec.Command("docker", "tag", hatcherytest.Image, tag).CombinedOutput(); err != nil {
		t.Fatalf("docker tag: %v\n%s", err, out)
	}
	st, rc = momctl(t, data, "status")
	if rc != 0 || !strings.Contains(st, "  local  up") || strings.Contains(st, "INCOMPATIBLE") {
		t.Errorf("momctl status after the image changed: exit %d:\n%s", rc, st)
	}
	if code, h, body := versionsHealth(t, base); code != http.StatusOK || h.Status != "ok" || len(h.HostsIncompatible) != 0 {
		t.Errorf("/healthz after the image changed: %d %s, want ok", code, body)
	}
	if !strings.Contains(p.errs(), "the chick image works with this Mother now") {
		t.Errorf("no word that chicks can start again; stderr:\n%s", p.errs())
	}
	p.stdin.Close()
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.errs())
	}
}
