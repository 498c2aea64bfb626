package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// recallHistory is a channel's history of months ago: the backup decision
// of March 2026, then 400 lines of other talk.
func recallHistory() []chat.ChannelMessage {
	t0 := time.Date(2026, 3, 12, 9, 0, 0, 0, time.UTC)
	user := func(name string) chat.Sender { return chat.Sender{ID: "u-" + name, Username: name} }
	msgs := []chat.ChannelMessage{
		{ID: "h-1", ChannelID: "local", Timestamp: t0, Sender: user("alice"), Text: "Which way do we do the backups of the shared files?"},
		{ID: "h-2", ChannelID: "local", Timestamp: t0.Add(time.Minute), Sender: user("bob"), Text: "Decided: the backup runs nightly at 02:30 to the NAS in the cellar, kept for 14 days."},
		{ID: "h-3", ChannelID: "local", Timestamp: t0.Add(2 * time.Minute), Sender: user("alice"), Text: "Good, and the old USB disk goes to recycling."},
	}
	topics := []string{"lunch on Friday", "the printer jam", "holiday rota", "the new kettle", "the wifi in room 3", "the garden party"}
	for i := range 400 {
		msgs = append(msgs, chat.ChannelMessage{ID: fmt.Sprintf("f-%d", i), ChannelID: "local", Timestamp: t0.Add(time.Duration(i+1) * 6 * time.Hour),
			Sender: user([]string{"alice", "bob", "carol"}[i%3]), Text: fmt.Sprintf("About %s: note %d.", topics[i%len(topics)], i)})
	}
	return msgs
}

// TestRecallTerminal: through the real binary, with months of history in
// the channel's log.jsonl (long out of her context), Mother answers
// "what did we say about the backup?" through her recall tool: the tool
// result carries the decision of March with its date, who said it and its
// id, recall_read reads around it, and the index lives in
// state/recall.db. Deleting the index loses nothing: the next start
// rebuilds it and finds the same.
func TestRecallTerminal(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	first := ollamatest.New(ollamatest.Turn{Text: "Hello."})
	defer first.Close()
	if r := runMother(t, "hi\n", []string{"MOTHER_OLLAMA_URL=" + first.URL}, "--cli", data); r.code != 0 {
		t.Fatalf("first run: exit %d\n%s", r.code, r.stderr)
	}
	// The old history goes before what the first run logged.
	logPath := filepath.Join(data, "workspace/channels/cli/local/log.jsonl")
	now, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, m := range recallHistory() {
		line, _ := json.Marshal(m)
		b.Write(line)
		b.WriteByte('\n')
	}
	b.Write(now)
	if err := os.WriteFile(logPath, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	ask := func(t *testing.T) []ollamatest.Request {
		fake := ollamatest.New(
			ollamatest.Turn{Calls: []ollamatest.Call{{Name: "recall", Args: map[string]any{"query": "what did we say about the backup?"}}}},
			ollamatest.Turn{Calls: []ollamatest.Call{{Name: "recall_read", Args: map[string]any{"id": "h-2", "before": 1, "after": 1}}}},
			ollamatest.Turn{Text: "In March bob said the backup runs nightly at 02:30 to the NAS, kept 14 days."},
		)
		defer fake.Close()
		r := runMother(t, "what did we say about the backup?\n", []string{"MOTHER_OLLAMA_URL=" + fake.URL}, "--cli", data)
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		if !strings.Contains(r.stdout, "In March bob said the backup runs nightly") {
			t.Errorf("stdout = %q", r.stdout)
		}
		reqs := fake.Requests()
		if len(reqs) != 3 {
			t.Fatalf("%d model calls, want 3", len(reqs))
		}
		return reqs
	}
	reqs := ask(t)
	// The decision is not in what her model saw before the tool.
	for _, m := range reqs[0].Messages {
		if strings.Contains(m.Content, "02:30") {
			t.Fatalf("the decision is in the model's context already (%s): the test shows nothing", m.Role)
		}
	}
	hit := "[h-2] 2026-03-12 09:01 bob (user): Decided: the backup runs nightly at 02:30 to the NAS in the cellar, kept for 14 days."
	got := toolResult(reqs[1])
	if !strings.Contains(got, hit) || !strings.Contains(got, "in the history of cli/local") {
		t.Errorf("recall result = %q, want it to hold %q", got, hit)
	}
	if i := strings.Index(got, "\n"); i < 0 || !strings.HasPrefix(got[i+1:], "[h-") {
		t.Errorf("recall result's best hit is not of the backup talk: %q", got)
	}
	read := toolResult(reqs[2])
	want := "From the history of cli/local:\n" +
		"  [h-1] 2026-03-12 09:00 alice (user): Which way do we do the backups of the shared files?\n" +
		"→ " + hit + "\n" +
		"  [h-3] 2026-03-12 09:02 alice (user): Good, and the old USB disk goes to recycling."
	if read != want {
		t.Errorf("recall_read result =\n%s\nwant\n%s", read, want)
	}
	index := filepath.Join(data, "state", "recall.db")
	if _, err := os.Stat(index); err != nil {
		t.Fatalf("no index: %v", err)
	}

	// The index is derived: deleted, it is rebuilt and finds the same.
	for _, p := range []string{index, index + "-wal", index + "-shm"} {
		os.Remove(p)
	}
	reqs = ask(t)
	if got := toolResult(reqs[1]); !strings.Contains(got, hit) {
		t.Errorf("after deleting the index, recall result = %q, want it to hold %q", got, hit)
	}
}
