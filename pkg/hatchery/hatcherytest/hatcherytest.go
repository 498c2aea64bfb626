// Package hatcherytest helps tests that need the real Docker engine: it
// finds the engine (skipping without one, failing under CI=true), builds
// the offline chick image once per test binary, and force-removes the
// containers a test's Mother instance left behind.
package hatcherytest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/mother-chat/mother/internal/testenv"
)

// Image is the tag tests build the offline chick image as:
// mother-chick:test-<hash of this checkout's path>. The engine is shared by
// every checkout on the machine (git worktrees tested in parallel), so a
// fixed tag would let one checkout's tests run another's chick.
var Image = "mother-chick:test-" + checkoutID()

func checkoutID() string {
	root, err := moduleRoot()
	if err != nil {
		return "unknown"
	}
	sum := sha256.Sum256([]byte(root))
	return hex.EncodeToString(sum[:6])
}

// Docker returns a client for the local engine. Without an engine the test
// is skipped, except under CI=true, where that is a failure.
func Docker(t testing.TB) *client.Client {
	t.Helper()
	c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = c.ContainerList(ctx, container.ListOptions{Limit: 1})
		cancel()
	}
	if err != nil {
		testenv.Unavailable(t, "no Docker engine answers (run .ci/ensure-docker as root): %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var (
	buildOnce sync.Once
	buildErr  error
	buildOut  []byte
)

// BuildImage builds the offline chick image (images/chick/build-offline.sh)
// once per test binary and returns its tag.
func BuildImage(t testing.TB) string {
	t.Helper()
	Docker(t)
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		cmd := exec.Command("bash", filepath.Join(root, "images/chick/build-offline.sh"), Image)
		cmd.Dir = root
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("build the chick image: %v\n%s", buildErr, buildOut)
	}
	return Image
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}

// Containers lists the containers (running or not) carrying label
// key=value.
func Containers(t testing.TB, c *client.Client, key, value string) []container.Summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	list, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", key+"="+value))})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	return list
}

// RemoveOnCleanup force-removes every container labelled
// mother.instance=<instance()> when the test ends. instance is called at
// cleanup time (the instance id may only exist once Mother started).
func RemoveOnCleanup(t testing.TB, c *client.Client, instance func() string) {
	t.Helper()
	t.Cleanup(func() {
		inst := instance()
		if inst == "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		list, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "mother.instance="+inst))})
		if err != nil {
			t.Logf("cleanup: list containers: %v", err)
			return
		}
		for _, ct := range list {
			_ = c.ContainerRemove(ctx, ct.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		}
		// The gate's volume (isolated chicks).
		vols, err := c.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "mother.instance="+inst))})
		if err != nil {
			t.Logf("cleanup: list volumes: %v", err)
			return
		}
		for _, v := range vols.Volumes {
			if err := c.VolumeRemove(ctx, v.Name, true); err != nil {
				t.Logf("cleanup: remove volume %s: %v", v.Name, err)
			}
		}
	})
}

// Chicks lists the chick containers (running or not) of a Mother
// instance: its containers but its gates.
func Chicks(t testing.TB, c *client.Client, instance string) []container.Summary {
	t.Helper()
	var out []container.Summary
	for _, ct := range Containers(t, c, "mother.instance", instance) {
		if _, gate := ct.Labels["mother.gate"]; !gate {
			out = append(out, ct)
		}
	}
	return out
}

// Gates lists the gate containers (running or not) of a Mother instance.
func Gates(t testing.TB, c *client.Client, instance string) []container.Summary {
	t.Helper()
	return Containers(t, c, "mother.gate", instance)
}

var (
	standInOnce sync.Once
	standInErr  error
	standInOut  []byte
)

// StandInGate is the chick image with a stand-in for `chick gate` added,
// built once per test binary, and the gate command that runs it: it
// listens on $MOTHER_GATE_DIR/nest.sock and answers each connection with
// "gate <MOTHER_GATE_HOST>\n" (testdata/standin-gate). "standin-gate dial
// PATH" in a container of that image prints what a socket says. For the
// gate's lifecycle and plumbing, without Mother on the other side.
func StandInGate(t testing.TB) (image string, command []string) {
	t.Helper()
	base := BuildImage(t)
	tag := base + "-standin-gate"
	standInOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			standInErr = err
			return
		}
		dir, err := os.MkdirTemp("", "standin-gate-")
		if err != nil {
			standInErr = err
			return
		}
		defer os.RemoveAll(dir)
		build := exec.Command("go", "build", "-o", filepath.Join(dir, "standin-gate"), "./pkg/hatchery/hatcherytest/testdata/standin-gate")
		build.Dir = root
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if standInOut, standInErr = build.CombinedOutput(); standInErr != nil {
			return
		}
		df := "FROM " + base + "\nCOPY standin-gate /usr/local/bin/standin-gate\n"
		if standInErr = os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); standInErr != nil {
			return
		}
		standInOut, standInErr = exec.Command("docker", "build", "-q", "-t", tag, dir).CombinedOutput()
	})
	if standInErr != nil {
		t.Fatalf("build the stand-in gate image: %v\n%s", standInErr, standInOut)
	}
	return tag, []string{"/usr/local/bin/standin-gate", "serve"}
}

// InstanceFile reads <dir>/instance (the hatchery's instance id), or "".
func InstanceFile(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "instance"))
	if err != nil {
		return ""
	}
	s := string(b)
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == ' ') {
		s = s[:len(s)-1]
	}
	return s
}
