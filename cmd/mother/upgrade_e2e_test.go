package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// upgradePrevRelease is the release proto/BASELINE names.
const upgradePrevRelease = "0.1.0"

// TestUpgradeMatrix: an owner upgrades Mother with a chick running, and
// rolls back the same way. The previous release (proto/BASELINE: 0.1.0)
// is built from git (buildPrevious); the new one is this tree. Each
// direction runs a real chick, isolated behind its gate (the default
// network mode), with messages, an event and the ledger in flight across
// the switch: the first Mother is stopped with SIGTERM (as systemd
// would) while the chick sleeps, the second starts on the same data with
// its own image configured. The chick (of the first Mother's image)
// finishes and its result reaches the channel; nothing acknowledged is
// lost: every line of log.jsonl and of the ledger the first Mother wrote
// is still there, the event ran exactly once, and the chick's calls are
// charged once each, before and after the switch.
//
// Each image with each Mother on its own (no switch) is
// TestChickWireCompat.
func TestUpgradeMatrix(t *testing.T) {
	api := hatcherytest.Docker(t)
	newImage := hatcherytest.BuildImage(t)
	prev := buildPrevious(t, api, wireBaseline(t))
	prevSide := upgradeSide{mother: prev.mother, image: prev.image, version: prev.version, name: upgradePrevRelease}
	newSide := upgradeSide{mother: motherBin, image: newImage, version: "dev", name: "this tree"}

	t.Run("Upgrade", func(t *testing.T) {
		t.Parallel()
		upgradeSwitch(t, api, prevSide, newSide, false)
	})
	t.Run("Rollback", func(t *testing.T) {
		t.Parallel()
		upgradeSwitch(t, api, newSide, prevSide, true)
	})
}

// upgradeSide is one release: its mother binary and its chick image.
type upgradeSide struct {
	mother, image string
	// version is what the binary and the image's chick report.
	version string
	name    string
}

// upgradeChickSleep is how long the chick's tool runs: the switch
// happens inside it.
const upgradeChickSleep = 25

// upgradeSwitch runs a chick under from, stops from (SIGTERM) while the
// chick works, and starts to on the same data with to's image configured.
// rollback: `mother rollback` (this tree's) runs in between.
func upgradeSwitch(t *testing.T, api *client.Client, from, to upgradeSide, rollback bool) {
	data, _ := chickData(t, api, nil)
	upgradeSetImage(t, data, from.image)

	var mu sync.Mutex
	eventRuns := 0
	chickCalls := 0
	sleeping := make(chan struct{})
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		last := r.Messages[len(r.Messages)-1]
		switch r.Model {
		case motherModel:
			user := r.LastUser()
			switch {
			case last.Role == "tool":
				return ollamatest.Turn{Text: "A chick is on it."}
			case strings.Contains(user, "UPGRADE-EVENT"):
				mu.Lock()
				eventRuns++
				mu.Unlock()
				return ollamatest.Turn{Text: "Event handled."}
			case strings.Contains(user, "start the long job"):
				return motherTurn("Sleep a while in the shell, then report.")
			case strings.Contains(user, "start the quick job"):
				return motherTurn("Quick job: answer at once.")
			case strings.Contains(user, "note "):
				_, word, _ := strings.Cut(user, "note ")
				return ollamatest.Turn{Text: "Noted " + strings.Fields(word)[0] + "."}
			}
			return ollamatest.Turn{Text: "Hm."}
		case chickModel:
			if strings.Contains(r.LastUser(), "Quick job") {
				return ollamatest.Turn{Text: "Quick chick done.", PromptTokens: 500, OutputTokens: 5}
			}
			mu.Lock()
			chickCalls++
			n := chickCalls
			mu.Unlock()
			if last.Role != "tool" {
				if n == 1 {
					close(sleeping)
				}
				return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "bash", Args: map[string]any{"label": "sleeping",
					"command": fmt.Sprintf("sleep %d && echo slept-through", upgradeChickSleep)}}},
					PromptTokens: 1100, OutputTokens: 11}
			}
			return ollamatest.Turn{Text: "Chick reports: " + strings.Join(strings.Fields(last.Content), " "), PromptTokens: 2200, OutputTokens: 22}
		}
		return ollamatest.Turn{Status: 404, Error: "unknown model " + r.Model}
	})
	defer fake.Close()

	// The first Mother: a chick, two messages answered.
	a := startMotherBinary(t, from.mother, data, chickEnv(fake))
	io.WriteString(a.stdin, "please start the long job\n")
	a.waitOut(t, "A chick is on it.", 3*time.Minute)
	select {
	case <-sleeping:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the chick never called its model\nstderr:\n%s", a.errs())
	}
	io.WriteString(a.stdin, "note alpha\n")
	a.waitOut(t, "Noted alpha.", time.Minute)
	io.WriteString(a.stdin, "note beta\n")
	a.waitOut(t, "Noted beta.", time.Minute)
	// An event due around the switch: while the first Mother stops or
	// the second starts.
	ev := filepath.Join(data, "workspace", "events")
	upgradeWriteFile(t, filepath.Join(ev, ".upgrade.json"), fmt.Sprintf(`{"type":"one-shot","channelId":"local","text":"UPGRADE-EVENT ring","at":%q}`, time.Now().Add(2*time.Second).Format(time.RFC3339Nano)))
	if err := os.Rename(filepath.Join(ev, ".upgrade.json"), filepath.Join(ev, "upgrade.json")); err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(t, time.Minute); code != 0 {
		t.Fatalf("%s: exit %d after SIGTERM\nstderr:\n%s", from.name, code, a.errs())
	}
	if !regexp.MustCompile(`chick joined.* version=` + regexp.QuoteMeta(from.version)).MatchString(a.errs()) {
		t.Errorf("no chick of %s (version %s) joined %s:\n%s", from.name, from.version, from.name, a.errs())
	}
	if n := len(instanceContainers(t, api, data)); n != 1 {
		t.Fatalf("%d chick containers after %s stopped, want the one still running", n, from.name)
	}
	logBefore := upgradeLines(t, data, "workspace/channels/*/*/log.jsonl")
	ledgerBefore := upgradeLines(t, data, "chicks/usage/*.jsonl")
	if len(ledgerBefore) == 0 {
		t.Fatalf("%s wrote no ledger lines for the chick's first call", from.name)
	}

	// The switch: the other release's binary and image on the same data.
	if rollback {
		out, err := exec.Command(motherBin, "rollback", "--to", upgradePrevRelease, data).CombinedOutput()
		if err != nil {
			t.Fatalf("mother rollback --to %s: %v\n%s", upgradePrevRelease, err, out)
		}
		t.Logf("mother rollback: %s", strings.TrimSpace(string(out)))
	}
	upgradeSetImage(t, data, to.image)
	b := startMotherBinary(t, to.mother, data, chickEnv(fake))
	// A second chick while the first still runs: of the second
	// Mother's image, through the gate kept for the first (upgrade), or
	// the one the previous release put in its place (rollback).
	b.waitOut(t, "is still working", 2*time.Minute)
	io.WriteString(b.stdin, "please start the quick job\n")
	b.waitOut(t, "Quick chick done.", 2*time.Minute)
	if strings.Contains(b.out(), "Chick reports:") {
		t.Errorf("the first chick ended before the second started: the switch took too long for this test's %d s", upgradeChickSleep)
	}
	if !regexp.MustCompile(`chick joined.* version=` + regexp.QuoteMeta(to.version)).MatchString(b.errs()) {
		t.Errorf("no chick of %s (version %s) joined %s:\n%s", to.name, to.version, to.name, b.errs())
	}
	b.waitOut(t, "Chick reports: slept-through", 3*time.Minute)
	b.waitOut(t, "Event handled.", time.Minute)
	io.WriteString(b.stdin, "note gamma\n")
	b.waitOut(t, "Noted gamma.", time.Minute)
	if to.mother == motherBin {
		// Its image changed: the gate of the old one serves the chicks
		// until the last ends, then it is replaced.
		if !strings.Contains(b.errs(), "gate kept") {
			t.Errorf("%s did not keep the gate for the running chick of %s's image:\n%s", to.name, from.name, b.errs())
		}
		upgradeWaitErr(t, b, "gate replaced", time.Minute)
	}
	b.stdin.Close()
	if code := b.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", to.name, code, b.out(), b.errs())
	}
	t.Logf("%s after %s: stdout:\n%s", to.name, from.name, b.out())

	// Nothing acknowledged lost.
	logAfter := upgradeLines(t, data, "workspace/channels/*/*/log.jsonl")
	for _, l := range upgradeMissing(logBefore, logAfter) {
		t.Errorf("a log.jsonl line %s wrote is gone after %s ran: %s", from.name, to.name, l)
	}
	ledgerAfter := upgradeLines(t, data, "chicks/usage/*.jsonl")
	for _, l := range upgradeMissing(ledgerBefore, ledgerAfter) {
		t.Errorf("a ledger line %s wrote is gone after %s ran: %s", from.name, to.name, l)
	}
	mu.Lock()
	runs, calls := eventRuns, chickCalls
	mu.Unlock()
	if runs != 1 {
		t.Errorf("the event due around the switch ran %d times, want once", runs)
	}
	if _, err := os.Stat(filepath.Join(ev, "upgrade.json")); !os.IsNotExist(err) {
		t.Errorf("the event's file is still there after its run (%v)", err)
	}
	if calls != 2 {
		t.Errorf("the chick called its model %d times, want 2 (one before the switch, one after)", calls)
	}
	// The chick's two calls, one under each Mother, each charged once.
	// The quick chick's one call, under the second.
	var got []int64
	for _, tok := range upgradeCharged(t, ledgerAfter) {
		got = append(got, tok)
	}
	slices.Sort(got)
	if want := []int64{500 + 5, 1100 + 11 + 2200 + 22}; !slices.Equal(got, want) {
		t.Errorf("the ledger charges the chicks %v tokens, want %v (the quick chick's call; the first chick's call under %s and its call under %s, once each)", got, want, from.name, to.name)
	}
	if left := instanceContainers(t, api, data); len(left) != 0 {
		t.Errorf("%d chick containers left after %s exited", len(left), to.name)
	}
}

// upgradeWaitErr waits until p's stderr contains s.
func upgradeWaitErr(t *testing.T, p *chickProc, s string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(p.errs(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr never showed %q:\n%s", s, p.errs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// upgradeSetImage sets chicks.image in data's config (an upgrade of the
// chick image package, or of its tag).
func upgradeSetImage(t *testing.T, data, image string) {
	t.Helper()
	path := filepath.Join(data, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["chicks"].(map[string]any)["image"] = image
	b, _ = json.MarshalIndent(cfg, "", "  ")
	upgradeWriteFile(t, path, string(b))
}

func upgradeWriteFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// upgradeLines are the non-empty lines of the files matching pattern
// under data.
func upgradeLines(t *testing.T, data, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(data, pattern))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if l != "" {
				out = append(out, l)
			}
		}
	}
	return out
}

// upgradeMissing are the lines of before that after lacks.
func upgradeMissing(before, after []string) []string {
	have := map[string]int{}
	for _, l := range after {
		have[l]++
	}
	var out []string
	for _, l := range before {
		if have[l] == 0 {
			out = append(out, l)
			continue
		}
		have[l]--
	}
	return out
}

// upgradeCharged adds up the tokens the ledger's settlements charge each
// chick for its own calls (not reservations, not reports).
func upgradeCharged(t *testing.T, lines []string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, l := range lines {
		var e struct {
			Kind   string `json:"kind"`
			Chick  string `json:"chick"`
			Report bool   `json:"report"`
			In     int64  `json:"in"`
			Out    int64  `json:"out"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Errorf("a ledger line does not parse: %v: %s", err, l)
			continue
		}
		if e.Chick == "" || e.Report || e.Kind == "reserve" {
			continue
		}
		out[e.Chick] += e.In + e.Out
	}
	return out
}
