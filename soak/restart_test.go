//go:build soak

package soak

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
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
// (resumed and finished, or reaped) with no container left, no goal was
// started as a second chick, every goal was done, the user was told how
// each chick ended and told once, and every request was answered once,
// by a real answer (no error, no "Lost"). Each is a test failure, not
// only a figure.
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
	var told, toldTwice, repaired, resumedRuns, duplicates, goalsDone, answeredOnce int
	var minKill, maxKill time.Duration = time.Hour, 0
	var storeLines int
	for i := range rounds {
		goal := fmt.Sprintf("iteration-%d", i)
		prev := records(t, data)
		a := startMother(t, data, true)
		// Her CLI reads stdin from here on: a request written earlier
		// could die unread in the pipe with her, which is no fault of
		// hers and would leave nothing to check.
		a.waitErr(t, "mother ready", 30*time.Second)
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
		sort.Slice(mine, func(x, y int) bool { return mine[x].CreatedAt.Before(mine[y].CreatedAt) })
		if len(mine) > 1 {
			duplicates += len(mine) - 1
			t.Errorf("round %d: goal %s was started %d times (%s): a resumed run started a chick for a goal that already had one", i, goal, len(mine), chickStates(mine))
		}
		done := false
		for _, r := range mine {
			done = done || r.Reason == hatchery.ReasonDone
		}
		if done {
			goalsDone++
		} else {
			t.Errorf("round %d: goal %s was not done after the restart (killed %s in, chick %s at the kill; its chicks: %s)", i, goal, kill.Round(time.Millisecond), state, chickStates(mine))
		}
		for _, r := range mine {
			if !r.State.Final() {
				t.Errorf("round %d: chick %s is %s after the restart: neither resumed nor reaped", i, r.ID, r.State)
				continue
			}
			outcome[string(r.Reason)]++
			n := strings.Count(a.stdout.String()+b.stdout.String(), "(chick "+r.ID+" · ")
			switch {
			case n == 0:
				t.Errorf("round %d: the user was never told how chick %s ended (%s: %s)\nbefore the kill:\n%s\nafter:\n%s", i, r.ID, r.Reason, r.Outcome, a.stdout.String(), b.stdout.String())
			case n > 1:
				told++
				toldTwice++
				t.Errorf("round %d: the user was told %d times how chick %s ended (killed %s in, chick %s at the kill)\nbefore the kill:\n%s\nafter:\n%s", i, n, r.ID, kill.Round(time.Millisecond), state, a.stdout.String(), b.stdout.String())
			default:
				told++
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
		requests := 0
		for _, m := range msgs {
			if m.Text != "please work on "+goal {
				continue
			}
			requests++
			var answers []string
			for _, later := range msgs {
				if later.Sender.ID == "mother" && later.ReplyTo == m.ID {
					answers = append(answers, later.Text)
				}
			}
			switch {
			case len(answers) != 1:
				t.Errorf("round %d: %q was answered %d times, want once: %q", i, m.Text, len(answers), answers)
			case !realAnswer(answers[0]):
				t.Errorf("round %d: %q was answered by %q, not by her answer (%q or %q)", i, m.Text, answers[0], startedAnswer, onItAnswer)
			default:
				answeredOnce++
			}
		}
		if requests != 1 {
			t.Errorf("round %d: the request is logged %d times, want once", i, requests)
		}
	}
	figure(t, "%d SIGKILLs at random points %s to %s after the request (seed %d)", rounds, minKill.Round(time.Millisecond), maxKill.Round(time.Millisecond), seed)
	figure(t, "chick state at the kill: %s", counts(atKill))
	figure(t, "after the restart: %s; the user told of %d of %d chick endings (%d of them twice); %d of %d requests answered once by her answer; %d of Mother's own runs resumed; %d duplicate chicks; %d of %d goals done", counts(outcome), told, total(outcome), toldTwice, answeredOnce, rounds, resumedRuns, duplicates, goalsDone, rounds)
	figure(t, "store: %d JSONL lines, all parse; torn tails repaired at start in %d restarts; no log line lost; 0 containers left", storeLines, repaired)
}

// realAnswer reports whether text is Mother's answer to a request of this
// scenario (what spawner's model says, after a late or resumed run's
// note), not an error, a notice or a "Lost".
func realAnswer(text string) bool {
	return strings.HasSuffix(text, startedAnswer) || strings.HasSuffix(text, onItAnswer)
}

// chickStates lists chicks as "id state (reason)".
func chickStates(rs []hatchery.Record) string {
	if len(rs) == 0 {
		return "none"
	}
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%s %s (%s)", r.ID, r.State, r.Reason))
	}
	return strings.Join(parts, ", ")
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
