package main

import (
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/mother-chat/mother/pkg/fsync"
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
	// The 4th fsync of a log.jsonl: one message's own, or a later one's
	// that also covers Mother's reply to the one before.
	p := startMother(t, append(env, fsync.PauseEnv+"=log:4"), "--cli", "--log-level", "debug", data)
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
