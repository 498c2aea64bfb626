package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/hatchery/docker/enginetest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// TestRunTerminalWaitsForTheReconcile: stdin ends at once, while the
// reconcile in the background still waits for the Docker host's list of
// containers (the engine holds it). Mother must not exit before she knows
// what became of the chicks a previous Mother left (a resumed chick is
// work in flight): she waits for the reconcile, then for the work, then
// exits. The test lets the engine answer only once she says she waits,
// so the order is the test's, not the scheduler's (she used to exit at
// once and cut the reconcile short).
func TestRunTerminalWaitsForTheReconcile(t *testing.T) {
	fake := ollamatest.New()
	defer fake.Close()
	engine := enginetest.New(t)
	engine.On("GET", "/containers/json", enginetest.Hang())
	data := t.TempDir()
	writeConfig(t, data, `{"chicks": {"hosts": [{"name": "slow", "address": "`+engine.Host+`"}]}}`)
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Run(t.Context(), Options{DataDir: data, CLI: true, Version: "test", Stdin: strings.NewReader(""), Stdout: &syncBuffer{}, Stderr: &stderr,
			Getenv: env(map[string]string{"MOTHER_OLLAMA_URL": fake.URL + "/v1", "MOTHER_MODEL_ID": "tiny"})})
	}()
	const waiting = "waiting for the Docker hosts"
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(stderr.String(), waiting); time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("Run returned (%v) while the reconcile still waited for the Docker host; calls: %q\nstderr:\n%s", err, engine.Calls(), stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("Mother never said she waits for the Docker hosts; stderr:\n%s", stderr.String())
		}
	}
	engine.Close() // the host answers at last: it is gone
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, stderr:\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("Run did not return once the reconcile ended; stderr:\n%s", stderr.String())
	}
	log := stderr.String()
	if w, u := strings.Index(log, waiting), strings.Index(log, "chicks unavailable until the Docker host answers"); u < w {
		t.Errorf("the reconcile's end (%d) was not logged after Mother said she waits for it (%d):\n%s", u, w, log)
	}
}
