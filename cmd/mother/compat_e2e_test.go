package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/internal/testenv"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// TestChickWireCompat: a chick outlives a Mother upgrade, so a chick of the
// previous build must work with the new Mother, and the reverse (each
// image with each Mother, isolated behind the gate of that image; the
// switch itself with a chick running is TestUpgradeMatrix). "Previous"
// is the wire baseline, the commit proto/BASELINE names: its chick image
// and its mother binary are built from git (git archive of that commit,
// cached by commit id) and each runs against the other side of the tree
// under test, through the real path: mother --cli, a chick container on
// the real engine, TLS, join, session events, model calls through the
// broker, an output file uploaded, the result told to the channel.
//
// While the baseline is the commit under test itself (the commit that
// introduces a wire, before the baseline is moved past it) both sides are
// the same build: the test says so in its log instead of hiding it.
func TestChickWireCompat(t *testing.T) {
	api := hatcherytest.Docker(t)
	newImage := hatcherytest.BuildImage(t)
	base := wireBaseline(t)
	prev := buildPrevious(t, api, base)

	t.Run("NewMotherPreviousChick", func(t *testing.T) {
		t.Parallel()
		runCompat(t, api, motherBin, "dev", prev.image, prev.version)
	})
	t.Run("PreviousMotherNewChick", func(t *testing.T) {
		t.Parallel()
		runCompat(t, api, prev.mother, prev.version, newImage, "dev")
	})
}

// baseline is the commit of proto/BASELINE and how it relates to the tree
// under test.
type baseline struct {
	commit string
	root   string // the module root of the tree under test
}

// wireBaseline reads proto/BASELINE and logs what is compared with what.
// Without git or without the baseline commit in this clone the test is
// skipped, except under CI=true, where it fails.
func wireBaseline(t *testing.T) baseline {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "proto", "BASELINE"))
	if err != nil {
		t.Fatalf("the wire baseline: %v", err)
	}
	commit := regexp.MustCompile(`(?m)^[0-9a-f]{40}$`).FindString(string(b))
	if commit == "" {
		t.Fatal("proto/BASELINE names no commit id")
	}
	unusable := func(format string, args ...any) {
		t.Helper()
		testenv.Unavailable(t, format, args...)
	}
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	if _, err := git("cat-file", "-e", commit+"^{commit}"); err != nil {
		unusable("the wire baseline %s (proto/BASELINE) is not in this clone (a shallow clone, or not a git checkout): %v", commit, err)
	}
	head, err := git("rev-parse", "HEAD")
	if err != nil {
		unusable("git rev-parse HEAD: %v", err)
	}
	dirty, _ := git("status", "--porcelain", "--untracked-files=no")
	state := "HEAD " + head[:12]
	if dirty != "" {
		state += " with uncommitted changes"
	}
	switch {
	case commit == head && dirty == "":
		t.Logf("wire compat: the baseline %s (proto/BASELINE) IS the commit under test: both sides are the same build, so this run proves the machinery, not compatibility; it will once proto/BASELINE names an older commit than the one tested", commit[:12])
	case commit == head:
		t.Logf("wire compat: previous build = baseline %s (proto/BASELINE) = HEAD without the uncommitted changes; new build = the working tree", commit[:12])
	default:
		t.Logf("wire compat: previous build = baseline %s (proto/BASELINE); new build = %s", commit[:12], state)
	}
	return baseline{commit: commit, root: root}
}

// previous is the build of the baseline.
type previous struct {
	mother  string // the mother binary
	image   string // the chick image
	version string // what both report as their version
}

var (
	prevOnce sync.Once
	prevErr  error
	prevOut  previous
)

// buildPrevious builds the baseline's mother binary and chick image once
// per test binary, reusing them across runs: the binary is cached under
// the user cache directory by commit id, the image is tagged with it.
func buildPrevious(t *testing.T, api *client.Client, b baseline) previous {
	t.Helper()
	prevOnce.Do(func() { prevOut, prevErr = buildPreviousOnce(t, api, b) })
	if prevErr != nil {
		t.Fatalf("build the baseline %s: %v", b.commit[:12], prevErr)
	}
	return prevOut
}

func buildPreviousOnce(t *testing.T, api *client.Client, b baseline) (previous, error) {
	short := b.commit[:12]
	p := previous{version: "baseline-" + short, image: "mother-chick:baseline-" + short}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "mother-compat", b.commit)
	p.mother = filepath.Join(dir, "mother")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	_, imgErr := api.ImageInspect(ctx, p.image)
	_, binErr := os.Stat(p.mother)
	if imgErr == nil && binErr == nil {
		t.Logf("baseline %s: cached %s and image %s", short, p.mother, p.image)
		return p, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return p, err
	}
	src, err := os.MkdirTemp(dir, "src-")
	if err != nil {
		return p, err
	}
	defer os.RemoveAll(src)
	start := time.Now()
	archive := exec.CommandContext(ctx, "bash", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "archive", b.root, b.commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		return p, fmt.Errorf("git archive: %v\n%s", err, out)
	}
	if binErr != nil {
		tmp := p.mother + ".tmp"
		// Built as TestMain builds the new one, so the build cache serves
		// every package the two trees share.
		build := exec.CommandContext(ctx, "go", "build", "-ldflags", "-X main.version="+p.version, "-o", tmp, "./cmd/mother")
		build.Dir = src
		if out, err := build.CombinedOutput(); err != nil {
			return p, fmt.Errorf("go build ./cmd/mother: %v\n%s", err, out)
		}
		if err := os.Rename(tmp, p.mother); err != nil {
			return p, err
		}
	}
	if imgErr != nil {
		img := exec.CommandContext(ctx, "bash", "images/chick/build-offline.sh", p.image)
		img.Dir = src
		img.Env = append(os.Environ(), "VERSION="+p.version)
		if out, err := img.CombinedOutput(); err != nil {
			return p, fmt.Errorf("build the chick image: %v\n%s", err, out)
		}
	}
	t.Logf("baseline %s: built %s and image %s in %s", short, p.mother, p.image, time.Since(start).Round(time.Second))
	return p, nil
}

// runCompat runs one chick job with the given mother binary and chick
// image, and checks that it went the whole way and that the builds meant
// were the ones that ran.
func runCompat(t *testing.T, api *client.Client, mother, motherVersion, image, chickVersion string) {
	data, _ := chickData(t, api, nil)
	cfgPath := filepath.Join(data, "config.json")
	var cfg map[string]any
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	// Isolated (the default): the chick reaches Mother through the gate,
	// which runs from the chick's image, so the gate of one release meets
	// the Mother of the other.
	cfg["chicks"].(map[string]any)["image"] = image
	b, _ = json.Marshal(cfg)
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}

	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		switch r.Model {
		case motherModel:
			if !hasToolResult(r) {
				return motherTurn("Compute 6*7 in the shell and keep the answer in outputs/.")
			}
			return ollamatest.Turn{Text: "A chick is on it."}
		case chickModel:
			res := toolResults(r)
			if len(res) == 0 {
				return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "bash", Args: map[string]any{"label": "compute",
					"command": "mkdir -p outputs && echo 42 > outputs/answer.txt && echo result=$((6*7))"}}}}
			}
			return ollamatest.Turn{Text: "Chick says: " + strings.Join(strings.Fields(res[0]), " ")}
		}
		return ollamatest.Turn{Status: 404, Error: "unknown model " + r.Model}
	})
	defer fake.Close()

	p := startMotherBinary(t, mother, data, chickEnv(fake))
	io.WriteString(p.stdin, "please run the computation\n")
	p.waitOut(t, "Chick says: result=42", 3*time.Minute)
	p.stdin.Close()
	if code := p.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, p.out(), p.errs())
	}
	out, err := exec.Command(mother, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), motherVersion) {
		t.Errorf("%s --version = %q (%v), want %s: not the Mother meant", mother, out, err, motherVersion)
	}
	noRace(t, "mother --version", string(out))
	errs := p.errs()
	if !regexp.MustCompile(`chick joined.* version=` + regexp.QuoteMeta(chickVersion)).MatchString(errs) {
		t.Errorf("no chick of version %s joined:\n%s", chickVersion, errs)
	}
	got, _ := filepath.Glob(filepath.Join(data, "workspace/channels/cli/local/scratch/chicks/c-*", "outputs/answer.txt"))
	if len(got) != 1 {
		t.Errorf("the chick's output file was not stored in the channel's directory")
	}
	if left := instanceContainers(t, api, data); len(left) != 0 {
		t.Errorf("%d chick containers left after mother exited", len(left))
	}
}

// startMotherBinary is startChickMother with a given mother binary.
func startMotherBinary(t *testing.T, bin, data string, env []string) *chickProc {
	t.Helper()
	p := &chickProc{done: make(chan error, 1)}
	p.cmd = exec.Command(bin, "--cli", "--log-level", "info", data)
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "USER=mario"}, env...)
	var err error
	p.stdin, err = p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = lockedWriter{&p.mu, &p.stdout}
	p.cmd.Stderr = lockedWriter{&p.mu, &p.stderr}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	noRaceAtEnd(t, "mother", p.errs)
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			exited := make(chan struct{})
			go func() {
				<-p.done
				close(exited)
			}()
			stopGently(p.cmd.Process, exited)
		}
	})
	return p
}
