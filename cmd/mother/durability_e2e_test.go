package main

import (
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// TestKilledBetweenWriteAndFsyncKeepsEveryAcknowledgedRecord kills the real
// process (SIGKILL) while it is stopped between writing a message to
// log.jsonl and the fsync that covers it (the fsync test hook), and checks
// that the message was not acknowledged (its model request went out, but
// nothing was shown, so it has no answer) while every acknowledged one is
// in the log, before and after a restart.
func TestKilledBetweenWriteAndFsyncKeepsEveryAcknowledgedRecord(t *testing.T) {
	t.Parallel()
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		f := strings.Fields(r.LastUser())
		return ollamatest.Turn{Text: "answer to " + f[len(f)-1]}
	})
	defer fake.Close()
	data := t.TempDir()
	env := []string{"MOTHER_OLLAMA_URL=" + fake.URL}
	// The 5th fsync of a log.jsonl: m3's line (each message's line is
	// fsynced, then Mother's answer's, before the next message comes).
	p := startMother(t, append(env, fsync.PauseEnv+"=log:5"), "--cli", "--log-level", "debug", data)
	t.Cleanup(func() { t.Log(p.stderr.String()) })
	paused := 0
	for i := 1; i <= 20 && paused == 0; i++ {
		io.WriteString(p.stdin, fmt.Sprintf("message m%d\n", i))
		waitUntil(t, fmt.Sprintf("the answer to m%d or the pause", i), func() bool {
			return strings.Contains(p.stdout.String(), fmt.Sprintf("answer to m%d\n", i)) || strings.Contains(p.stderr.String(), "fsync paused: log")
		})
		if strings.Contains(p.stderr.String(), "fsync paused: log") {
			paused = i
		}
	}
	if paused == 0 {
		t.Fatalf("the fsync hook never paused Mother\n%s", p.stderr.String())
	}
	// The model request for the paused message goes out while its log
	// line's fsync is in flight (the two overlap); only what would show
	// waits for the fsync.
	waitUntil(t, fmt.Sprintf("the model request for m%d during the paused fsync", paused), func() bool {
		for _, r := range fake.Requests() {
			if strings.HasSuffix(r.LastUser(), fmt.Sprintf("message m%d", paused)) {
				return true
			}
		}
		return false
	})
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.wait()
	out := p.stdout.String()
	if strings.Contains(out, fmt.Sprintf("answer to m%d\n", paused)) {
		t.Errorf("m%d was answered though the fsync of its log line had not run:\n%s", paused, out)
	}
	acked := map[string]bool{}
	for i := 1; i < paused; i++ {
		if !strings.Contains(out, fmt.Sprintf("answer to m%d\n", i)) {
			t.Fatalf("m%d was not answered before the pause:\n%s", i, out)
		}
		acked[fmt.Sprintf("message m%d", i)] = true
	}
	inLog := func() map[string]bool {
		got := map[string]bool{}
		for _, m := range readLog(t, data) {
			got[m.Text] = true
		}
		return got
	}
	for text := range acked {
		if !inLog()[text] {
			t.Errorf("acknowledged %q missing from log.jsonl after the kill", text)
		}
	}

	// A restart repairs what it must and keeps every acknowledged message.
	r := runMother(t, "message after\n", env, "--cli", data)
	if r.code != 0 || !strings.Contains(r.stdout, "answer to after") {
		t.Fatalf("restart: code %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	after := inLog()
	for text := range acked {
		if !after[text] {
			t.Errorf("acknowledged %q missing from log.jsonl after the restart", text)
		}
	}
	if !after["message after"] {
		t.Error("the message after the restart is not logged")
	}
}

// TestHeartbeatsHeardWhileEventsWaitForTheDisk: a chick's events wait for
// an fsync that does not return (the fsync hook holds the first fsync of
// chick events, as a saturated SD card holds one for seconds), and its
// heartbeats, every 500 ms, still keep it alive: Mother does not take it
// for hung (three missed heartbeats) while its events wait for the disk.
func TestHeartbeatsHeardWhileEventsWaitForTheDisk(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	data, _ := chickData(t, api, nil)
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if r.Model == motherModel {
			if !hasToolResult(r) {
				return motherTurn("Think for a very long time.")
			}
			return ollamatest.Turn{Text: "Started."}
		}
		return ollamatest.Turn{Text: "never", Delay: 5 * time.Minute}
	})
	defer fake.Close()
	p := startChickMother(t, data, append(chickEnv(fake), fsync.PauseEnv+"="+fsync.KindChickEvents+":1"))
	io.WriteString(p.stdin, "think hard\n")
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(p.errs(), "fsync paused: "+fsync.KindChickEvents+" #1") {
		if time.Now().After(deadline) {
			t.Fatalf("the chick's events never reached their fsync; stderr:\n%s", p.errs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Ten heartbeat intervals; hung is three missed.
	time.Sleep(5 * time.Second)
	if strings.Contains(p.errs(), "missed its heartbeats") {
		t.Errorf("a chick whose events wait for the disk was taken for hung:\n%s", p.errs())
	}
	if c := waitRunning(t, data, 10*time.Second); c.State != "running" {
		t.Errorf("the chick is %s, want running", c.State)
	}
	// The process is held in its fsync for good: SIGKILL (the test's
	// cleanup removes the chick's container).
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

// TestChickEventsShownWhileTheFsyncBeforeThemWaits: the fsync of a
// chick's first batch of events does not return (the fsync hook holds it,
// as a saturated SD card holds one for seconds); the chick's later events
// are still shown in the channel as they come, and none is acknowledged
// (the chick resends them; its result is not stored) until the disk has
// them.
func TestChickEventsShownWhileTheFsyncBeforeThemWaits(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	data, _ := chickData(t, api, nil)
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if r.Model == motherModel {
			if !hasToolResult(r) {
				return motherTurn("Step through it.")
			}
			return ollamatest.Turn{Text: "Started."}
		}
		done := 0
		for _, m := range r.Messages {
			if m.Role == "tool" {
				done++
			}
		}
		if done < 4 {
			label := fmt.Sprintf("step-%d", done+1)
			return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "bash", Args: map[string]any{"label": label, "command": "true"}}}}
		}
		return ollamatest.Turn{Text: "All steps done."}
	})
	defer fake.Close()
	p := startChickMother(t, data, append(chickEnv(fake), fsync.PauseEnv+"="+fsync.KindChickEvents+":1"))
	io.WriteString(p.stdin, "step through it\n")
	// The first batch waits in its fsync for good; the steps after it are
	// shown all the same.
	p.waitOut(t, "step-4", 2*time.Minute)
	if !strings.Contains(p.errs(), "fsync paused: "+fsync.KindChickEvents+" #1") {
		t.Fatalf("the events' first fsync was not the one held; stderr:\n%s", p.errs())
	}
	// The chick has its answer and sends its result; it is not stored
	// while the events before it wait for the disk.
	time.Sleep(2 * time.Second)
	if c := waitRunning(t, data, 10*time.Second); c.State != "running" {
		t.Errorf("the chick is %s, want running (its result waits for its events' fsync)", c.State)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
}
