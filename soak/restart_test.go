//go:build soak

package soak

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// stepper is a chick's model: steps bash calls of ~0.3 s each, then the
// goal's result.
func stepper(steps int) func(r ollamatest.Request) ollamatest.Turn {
	return func(r ollamatest.Request) ollamatest.Turn {
		goal := r.LastUser()
		if n := toolCount(r); n < steps {
			return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "bash", Args: map[string]any{
				"label": fmt.Sprintf("step %d of %s", n+1, goal), "command": fmt.Sprintf("sleep 0.3; echo step %d", n+1)}}}}
		}
		return ollamatest.Turn{Text: goal + " complete"}
	}
}

func readLogFile(t *testing.T, data string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "workspace", "channels", "cli", "local", "log.jsonl"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return b
}

// TestSoakMotherSIGKILL kills Mother with SIGKILL at a random point of a
// chick's run (before, during and after the spawn, mid-run, at the end),
// 20 times (SOAK_KILLS), restarting her on the same data directory each
// time. After each restart: every JSONL line of the store parses, every
// log line written before the kill is still there, every chick ended
// (resumed and finished, or reaped) with no container left, the user was
// told how each chick ended, and every logged message was answered.
func TestSoakMotherSIGKILL(t *testing.T) {
	api := docker(t)
	rounds := envInt("SOAK_KILLS", 20)
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("SOAK_SEED"), 10, 64); err == nil {
		seed = s
	}
	rng := rand.New(rand.NewPCG(seed, seed))
	spawn := spawner("iteration-")
	chick := stepper(5)
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if turn, ok := spawn(r); ok {
			// Mother's own run takes a while too, so some kills cut it.
			turn.Delay = 400 * time.Millisecond
			return turn
		}
		return chick(r)
	})
	defer fake.Close()
	data := newData(t, api, chicksConfig(t, fake.URL, nil))

	atKill := map[string]int{}  // what the chick was doing when Mother died
	outcome := map[string]int{} // how it ended
	var told, toldTwice, repaired, resumedRuns, duplicates, goalsDone int
	var minKill, maxKill time.Duration = time.Hour, 0
	var storeLines int
	for i := range rounds {
		goal := fmt.Sprintf("iteration-%d", i)
		prev := records(t, data)
		a := startMother(t, data, true)
		a.say(t, "please work on "+goal)
		kill := time.Duration(rng.Int64N(int64(4 * time.Second)))
		minKill, maxKill = min(minKill, kill), max(maxKill, kill)
		time.Sleep(kill)
		a.kill(t)
		// What state was the chick in?
		state := "no chick yet"
		for id, r := range records(t, data) {
			if _, old := prev[id]; !old && r.Goal == goal {
				state = string(r.State)
			}
		}
		atKill[state]++
		logBefore := readLogFile(t, data)

		b := startMother(t, data, true)
		if code := b.finish(t, 3*time.Minute); code != 0 {
			t.Fatalf("round %d: restarted Mother exited %d", i, code)
		}
		if strings.Contains(b.stderr.String(), "repaired torn") {
			repaired++
		}
		if strings.Contains(b.stdout.String(), "Resuming my answer") || strings.Contains(b.stdout.String(), "which was waiting") {
			resumedRuns++
			t.Logf("round %d: killed %s in, chick %s; the restarted Mother said:\n%s", i, kill.Round(time.Millisecond), state, b.stdout.String())
		}
		_, lines := checkStore(t, data)
		storeLines = lines
		// No lost log line: what was whole before the kill is a prefix now.
		logAfter := readLogFile(t, data)
		whole := logBefore[:bytes.LastIndexByte(logBefore, '\n')+1]
		if !bytes.HasPrefix(logAfter, whole) {
			t.Errorf("round %d: log.jsonl lost lines written before the kill", i)
		}
		// Every chick ended; the user was told how; no container is left.
		var mine []hatchery.Record
		for id, r := range records(t, data) {
			if _, old := prev[id]; !old {
				mine = append(mine, r)
			}
		}
		if len(mine) > 1 {
			duplicates += len(mine) - 1
		}
		for _, r := range mine {
			if r.Reason == hatchery.ReasonDone {
				goalsDone++
				break
			}
		}
		for _, r := range mine {
			if !r.State.Final() {
				t.Errorf("round %d: chick %s is %s after the restart: neither resumed nor reaped", i, r.ID, r.State)
				continue
			}
			outcome[string(r.Reason)]++
			if n := strings.Count(a.stdout.String()+b.stdout.String(), "(chick "+r.ID+" · "); n > 0 {
				told++
				toldTwice += min(n-1, 1)
			} else {
				t.Errorf("round %d: the user was never told how chick %s ended (%s: %s)\nbefore the kill:\n%s\nafter:\n%s", i, r.ID, r.Reason, r.Outcome, a.stdout.String(), b.stdout.String())
			}
		}
		if n := len(containers(t, api, data)); n != 0 {
			t.Errorf("round %d: %d chick containers left", i, n)
		}
		// Every logged message of the user was answered after it.
		var msgs []chat.ChannelMessage
		for _, line := range bytes.Split(bytes.TrimSpace(logAfter), []byte("\n")) {
			var m chat.ChannelMessage
			if json.Unmarshal(line, &m) == nil {
				msgs = append(msgs, m)
			}
		}
		for j, m := range msgs {
			if m.Text != "please work on "+goal {
				continue
			}
			answered := false
			for _, later := range msgs[j+1:] {
				if later.Sender.ID == "mother" {
					answered = true
				}
			}
			if !answered {
				t.Errorf("round %d: %q was logged but never answered", i, m.Text)
			}
		}
	}
	figure(t, "%d SIGKILLs at random points %s to %s after the request (seed %d)", rounds, minKill.Round(time.Millisecond), maxKill.Round(time.Millisecond), seed)
	figure(t, "chick state at the kill: %s", counts(atKill))
	figure(t, "after the restart: %s; the user told of %d of %d chick endings (%d of them twice); %d of Mother's own runs resumed; %d duplicate chicks; %d of %d goals done", counts(outcome), told, total(outcome), toldTwice, resumedRuns, duplicates, goalsDone, rounds)
	figure(t, "store: %d JSONL lines, all parse; torn tails repaired at start in %d restarts; no log line lost; 0 containers left", storeLines, repaired)
}

func counts(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
