package session_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/model/ollama"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/session"
	"github.com/mother-chat/mother/pkg/store"
)

var png = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")

func openChannel(t *testing.T, dir string) (*store.Store, *store.Channel) {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ch, err := st.Channel("test", "C1")
	if err != nil {
		t.Fatal(err)
	}
	return st, ch
}

func TestUserMessagesAndImages(t *testing.T) {
	_, ch := openChannel(t, t.TempDir())
	os.WriteFile(filepath.Join(ch.Dir(), "attachments", "cat.png"), png, 0o600)
	loc := time.FixedZone("", 2*3600)
	ts := time.Date(2025, 3, 4, 5, 6, 7, 0, loc)
	msg := chat.ChannelMessage{ID: "m1", ChannelID: "C1", Timestamp: ts, Sender: chat.Sender{ID: "U1", Username: "mario"}, Text: "look at these",
		Attachments: []chat.ChannelAttachment{
			{Filename: "cat.png", LocalPath: "attachments/cat.png"},
			{Filename: "gone.jpg", LocalPath: "attachments/gone.jpg"},
			{Filename: "report.pdf", LocalPath: "attachments/report.pdf"},
			{Filename: "evil.png", LocalPath: "../../../../etc/passwd.png"},
		}}
	if _, err := ch.AppendMessage(msg); err != nil {
		t.Fatal(err)
	}
	s, err := session.Load(ch, "BOT")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync(0); err != nil {
		t.Fatal(err)
	}
	h := s.History()
	if len(h) != 1 {
		t.Fatalf("history = %+v", h)
	}
	want := "[" + ts.Local().Format("2006-01-02 15:04:05-07:00") + "] [mario]: look at these\n<attachments>\nattachments/cat.png\nattachments/gone.jpg\nattachments/report.pdf\n../../../../etc/passwd.png\n</attachments>"
	if !strings.HasPrefix(h[0].Content, want) {
		t.Errorf("content =\n%s\nwant prefix\n%s", h[0].Content, want)
	}
	if len(h[0].Images) != 1 || h[0].Images[0].MimeType != "image/png" || string(h[0].Images[0].Data) != string(png) {
		t.Errorf("images = %+v", h[0].Images)
	}
	for _, note := range []string{"[image attachments/gone.jpg is no longer available]", "outside the channel directory"} {
		if !strings.Contains(h[0].Content, note) {
			t.Errorf("content lacks %q", note)
		}
	}
	// context.jsonl holds the reference, not the image bytes.
	raw, _ := os.ReadFile(ch.ContextPath())
	if strings.Contains(string(raw), "iVBOR") || !strings.Contains(string(raw), `"images":["attachments/cat.png"`) {
		t.Errorf("context.jsonl = %s", raw)
	}
}

// TestCompactionThroughTheAgent: a session whose context nears the
// model's window is compacted by a real agent run over the Ollama wire;
// context.jsonl is rewritten atomically with the summary and the kept
// turns, the old records are archived, and a reload sees the same.
func TestCompactionThroughTheAgent(t *testing.T) {
	dir := t.TempDir()
	_, ch := openChannel(t, dir)
	os.WriteFile(filepath.Join(ch.Dir(), "attachments", "cat.png"), png, 0o600)
	base := time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)
	var last store.LoggedMessage
	for i := range 30 {
		m := chat.ChannelMessage{ID: fmt.Sprintf("m%02d", i), ChannelID: "C1", Timestamp: base.Add(time.Duration(i) * time.Minute),
			Sender: chat.Sender{ID: "U1", Username: "mario"}, Text: fmt.Sprintf("message %d %s", i, strings.Repeat("blah ", 60))}
		if i == 29 {
			m.Text = "what did we say?"
			m.Attachments = []chat.ChannelAttachment{{Filename: "cat.png", LocalPath: "attachments/cat.png"}}
		}
		lm, err := ch.AppendMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		last = lm
	}
	s, err := session.Load(ch, "BOT")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync(last.End); err != nil {
		t.Fatal(err)
	}

	fake := ollamatest.New(ollamatest.Turn{Text: "- mario sent 29 messages of blah"}, ollamatest.Turn{Text: "You said blah, 29 times."})
	defer fake.Close()
	fake.SetContextLength(4000)
	fake.SetCapabilities("completion", "tools", "vision")
	p, _ := ollama.New(fake.URL, nil)
	a, err := agent.New(agent.Config{Provider: p, Model: "m", ReserveTokens: 1000, KeepRecentTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	var events []agent.EventType
	out := a.Run(t.Context(), agent.Input{System: "sys", History: s.History(), OnMessage: s.Append, OnCompact: s.Compacted,
		Emit: func(ev agent.Event) { events = append(events, ev.Type) }})
	if out.StopReason != agent.StopDone || out.Compactions != 1 {
		t.Fatalf("run = %s %v, %d compactions", out.StopReason, out.Err, out.Compactions)
	}
	if events[0] != agent.EventCompactionStart || events[1] != agent.EventCompactionEnd {
		t.Errorf("events = %v", events)
	}
	// The answer request carried the summary, the kept message and its image.
	req := fake.Requests()[1]
	if !strings.Contains(req.Messages[1].Content, "mario sent 29 messages") || req.LastUser() == "" || !strings.Contains(req.LastUser(), "what did we say?") {
		t.Errorf("answer request = %+v", req.Messages)
	}
	if n := len(req.Messages[len(req.Messages)-1].Images); n != 1 {
		t.Errorf("kept message lost its image: %d", n)
	}

	// Reload from disk: summary, the kept user message (with its image
	// reference), then the answer.
	recs := readRecords(t, ch.ContextPath())
	if recs[0].Type != store.RecordSession || recs[1].Type != store.RecordCompaction || recs[1].Summary != "- mario sent 29 messages of blah" || recs[1].LogEnd != last.End {
		t.Errorf("rewritten head = %+v %+v", recs[0], recs[1])
	}
	if recs[2].MsgID != "m29" || len(recs[2].Images) != 1 || recs[2].LogEnd != 0 {
		t.Errorf("kept record = %+v", recs[2])
	}
	arch := readRecords(t, filepath.Join(ch.Dir(), "context.archive.jsonl"))
	if len(arch) != 30 {
		t.Errorf("archive holds %d records, want the 30 old ones", len(arch))
	}
	s2, err := session.Load(ch, "BOT")
	if err != nil {
		t.Fatal(err)
	}
	h := s2.History()
	if len(h) != 3 || !agent.IsSummary(h[0]) || !strings.Contains(h[1].Content, "what did we say?") || len(h[1].Images) != 1 || h[2].Content != "You said blah, 29 times." {
		t.Errorf("reloaded history = %d messages: %+v", len(h), h)
	}
	// Nothing old comes back on the next sync.
	if got, err := s2.Sync(0); err != nil || len(got) != 0 {
		t.Errorf("sync after compaction = %d messages, %v", len(got), err)
	}
}

func readRecords(t *testing.T, path string) []store.ContextRecord {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []store.ContextRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r store.ContextRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}
