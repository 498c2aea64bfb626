package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// setChicksField sets chicks.<field> in data's config.json, keeping the
// rest of what chickData wrote.
func setChicksField(t *testing.T, data, field string, v any) {
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
	cfg["chicks"].(map[string]any)[field] = v
	if b, err = json.MarshalIndent(cfg, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// toolResultOfThisRun is the result of the last tool call made after the
// last user message (the run's own, not one of an earlier run still in the
// context), or "".
func toolResultOfThisRun(r ollamatest.Request) string {
	last := ""
	for _, m := range r.Messages {
		switch m.Role {
		case "user":
			last = ""
		case "tool":
			last = m.Content
		}
	}
	return last
}

// TestChickLimitsPerUser: through the real binary, the person at the CLI
// (cli/local-user) may have one chick at a time (chicks.maxPerUser 1): a
// second spawn while the first works is refused with a message naming the
// limit and when it frees up. The first chick spends all of the person's
// 200,000 a day (budgets.userDailyTokens; its one call reserved less and
// reports 199,970 prompt tokens). Mother restarts; the next spawn is refused by the
// daily budget, read back from the ledger, with when it resets.
func TestChickLimitsPerUser(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	data, _ := chickData(t, api, map[string]any{"budgets": map[string]any{"userDailyTokens": 200000}})
	// chickData's "chicks" section, with the per-person cap.
	setChicksField(t, data, "maxPerUser", 1)

	calling := make(chan struct{}, 10)
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	var mu sync.Mutex
	chickCalls := 0
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if r.Model == motherModel {
			if res := toolResultOfThisRun(r); res != "" {
				return ollamatest.Turn{Text: "Spawn said: " + res}
			}
			return motherTurn("Do this: " + r.LastUser())
		}
		mu.Lock()
		chickCalls++
		mu.Unlock()
		calling <- struct{}{}
		<-release
		return ollamatest.Turn{Text: "First job done.", PromptTokens: 199970, OutputTokens: 30}
	})
	defer fake.Close()

	a := startChickMother(t, data, chickEnv(fake))
	io.WriteString(a.stdin, "first job\n")
	select {
	case <-calling:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the first chick never called its model; stdout:\n%s\nstderr:\n%s", a.out(), a.errs())
	}
	first := waitRunning(t, data, 30*time.Second)
	io.WriteString(a.stdin, "second job\n")
	a.waitOut(t, "chicks.maxPerUser is 1", time.Minute)
	out := a.out()
	for _, want := range []string{"Not started, a per-person limit: cli/local-user already has 1 chick running or queued (" + first.ID + ")", "another can start when one of them ends"} {
		if !strings.Contains(out, want) {
			t.Errorf("first Mother's stdout lacks %q:\n%s", want, out)
		}
	}
	free()
	a.stdin.Close() // Mother waits for the chick to end, then exits
	if code := a.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("first Mother exit %d\nstdout:\n%s\nstderr:\n%s", code, a.out(), a.errs())
	}
	if out := a.out(); !strings.Contains(out, "First job done.") || !strings.Contains(out, "200000 tokens: 199970 in, 30 out") {
		t.Fatalf("the first chick's result was not posted:\n%s\nstderr:\n%s", out, a.errs())
	}

	b := startChickMother(t, data, chickEnv(fake))
	io.WriteString(b.stdin, "third job\n")
	b.waitOut(t, "budgets.userDailyTokens", time.Minute)
	// The person used the first chick's 200,000 tokens and the report
	// Mother's model read about it, charged to the chick.
	used := 200000 + reportTokens(t, data, "")
	for _, want := range []string{fmt.Sprintf("Not started, a per-person limit: budget exhausted: user cli/local-user used %d of their 200000 chick tokens today", used), "it resets at 00:00 "} {
		if !strings.Contains(b.out(), want) {
			t.Errorf("second Mother's stdout lacks %q:\n%s", want, b.out())
		}
	}
	st, code := momctl(t, data, "status")
	if code != 0 || !strings.Contains(st, fmt.Sprintf("user cli/local-user today: %d tokens (of 200000, 0 left)", used)) {
		t.Errorf("momctl status (exit %d) does not show the person's budget:\n%s", code, st)
	}
	b.stdin.Close()
	if code := b.wait(t, time.Minute); code != 0 {
		t.Fatalf("second Mother exit %d\nstdout:\n%s\nstderr:\n%s", code, b.out(), b.errs())
	}
	mu.Lock()
	n := chickCalls
	mu.Unlock()
	if n != 1 {
		t.Errorf("%d chick model calls, want 1: only the first chick ran", n)
	}
	if left := instanceContainers(t, api, data); len(left) != 0 {
		t.Errorf("%d chick containers left", len(left))
	}
}
