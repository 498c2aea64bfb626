package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/jsonl"
	"github.com/mother-chat/mother/pkg/model"
)

func msg(id, text string) chat.ChannelMessage {
	return chat.ChannelMessage{
		ID:        id,
		ChannelID: "C1",
		Timestamp: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		Sender:    chat.Sender{ID: "U1", Username: "mario"},
		Text:      text,
	}
}

func openTest(t testing.TB, dir string) (*Store, *Channel) {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := s.Channel("slack-acme", "C1")
	if err != nil {
		t.Fatal(err)
	}
	return s, ch
}

func TestLayout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, ch := openTest(t, dir)
	defer s.Close()
	want := filepath.Join(dir, "workspace/channels/slack-acme/C1")
	if ch.Dir() != want {
		t.Errorf("Dir() = %q, want %q", ch.Dir(), want)
	}
	for _, p := range []string{"attachments", "skills", "scratch", "daily", "MEMORY.md", "log.jsonl", "context.jsonl"} {
		if _, err := os.Stat(filepath.Join(want, p)); err != nil {
			t.Errorf("channel layout: %v", err)
		}
	}
	for _, p := range []string{"workspace/events", "workspace/skills"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("workspace layout: %v", err)
		}
	}
	refs, err := s.ListChannels()
	if err != nil || len(refs) != 1 || refs[0] != (ChannelRef{"slack-acme", "C1"}) {
		t.Errorf("ListChannels() = %v, %v", refs, err)
	}
}

func TestChannelIDsCannotEscape(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"", "..", "../x", "a/b", ".hidden", "x\x00", strings.Repeat("a", 200)} {
		if _, err := s.Channel("cli", id); err == nil {
			t.Errorf("Channel(cli, %q) = nil error, want refusal", id)
		}
	}
}

func TestTornAppendIsRepairedAndNothingBeforeIsLost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, ch := openTest(t, dir)
	for i := range 10 {
		if _, err := ch.AppendMessage(msg(fmt.Sprint(i), fmt.Sprintf("message %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	// A crash in the middle of the eleventh append: half a line on disk.
	path := filepath.Join(dir, "workspace/channels/slack-acme/C1/log.jsonl")
	line, _ := json.Marshal(msg("10", "message 10"))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(line[:len(line)/2])
	f.Close()

	var logs bytes.Buffer
	s2, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	ch2, err := s2.Channel("slack-acme", "C1")
	if err != nil {
		t.Fatalf("reopen after torn append: %v", err)
	}
	if !strings.Contains(logs.String(), "repaired torn last line") {
		t.Errorf("no repair logged: %s", logs.String())
	}
	torn, err := os.ReadFile(path + ".torn")
	if err != nil || !bytes.Contains(torn, line[:len(line)/2]) {
		t.Errorf("torn bytes not kept in log.jsonl.torn: %q, %v", torn, err)
	}
	// Appends after the repair are whole lines, and all ten survive.
	if _, err := ch2.AppendMessage(msg("11", "after the crash")); err != nil {
		t.Fatal(err)
	}
	got, _, err := ch2.Pending(Cursor{}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 11 || got[9].Msg.Text != "message 9" || got[10].Msg.Text != "after the crash" {
		t.Errorf("after repair the log holds %d messages: %+v", len(got), got)
	}
}

func TestTornContextIsRepaired(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, ch := openTest(t, dir)
	m := model.Message{Role: model.RoleUser, Content: "hi"}
	if err := ch.AppendContext(ContextRecord{Type: RecordMessage, Message: &m, MsgID: "a", LogEnd: 10}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	f, _ := os.OpenFile(filepath.Join(dir, "workspace/channels/slack-acme/C1/context.jsonl"), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"type":"message","ts":"2026-`)
	f.Close()
	s2, ch2 := openTest(t, dir)
	defer s2.Close()
	st, err := ch2.LoadContext()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Records) != 1 || st.Cursor != (Cursor{Offset: 10, LastID: "a"}) {
		t.Errorf("context after repair = %+v", st)
	}
}

func TestPendingIsKeyedByID(t *testing.T) {
	t.Parallel()
	s, ch := openTest(t, t.TempDir())
	defer s.Close()
	var ends []int64
	for i, text := range []string{"yes", "yes", "yes"} {
		lm, err := ch.AppendMessage(msg(fmt.Sprint(i), text))
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, lm.End)
	}
	got, cur, err := ch.Pending(Cursor{}, 0, nil)
	if err != nil || len(got) != 3 {
		t.Fatalf("Pending = %d messages, %v; want all three identical texts", len(got), err)
	}
	if cur != (Cursor{Offset: ends[2], LastID: "2"}) {
		t.Errorf("cursor = %+v", cur)
	}
	// Up to a bound: only the first.
	got, cur, _ = ch.Pending(Cursor{}, ends[0], nil)
	if len(got) != 1 || cur.LastID != "0" {
		t.Errorf("Pending up to the first = %+v, cursor %+v", got, cur)
	}
	// From the cursor, skipping a seen id.
	got, _, _ = ch.Pending(cur, 0, func(id string) bool { return id == "1" })
	if len(got) != 1 || got[0].Msg.ID != "2" {
		t.Errorf("Pending after cursor with 1 seen = %+v", got)
	}
}

func TestPendingFallsBackWhenCursorDoesNotMatch(t *testing.T) {
	t.Parallel()
	s, ch := openTest(t, t.TempDir())
	defer s.Close()
	for i := range 5 {
		ch.AppendMessage(msg(fmt.Sprint(i), "m"))
	}
	// A cursor naming a message that is not at that offset (log replaced).
	lm, _ := ch.AppendMessage(msg("5", "m"))
	got, cur, err := ch.Pending(Cursor{Offset: lm.End, LastID: "other"}, 0, func(id string) bool { return id < "3" })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Msg.ID != "3" || cur.LastID != "5" {
		t.Errorf("fallback = %+v cursor %+v, want 3,4,5", got, cur)
	}
	// A cursor past the end.
	got, _, _ = ch.Pending(Cursor{Offset: lm.End + 1000, LastID: "5"}, 0, func(id string) bool { return id != "5" })
	if len(got) != 1 {
		t.Errorf("cursor past end: %+v", got)
	}
}

func TestFindMessage(t *testing.T) {
	t.Parallel()
	s, ch := openTest(t, t.TempDir())
	defer s.Close()
	ch.AppendMessage(msg("a", "first"))
	from := ch.LogSize()
	lm, err := ch.AppendMessage(msg("b", "second"))
	if err != nil {
		t.Fatal(err)
	}
	ch.AppendMessage(msg("b", "second, delivered again"))
	for _, tc := range []struct {
		name    string
		id      string
		from    int64
		wantEnd int64
	}{
		{"from the size before it", "b", from, lm.End},
		{"from the start", "b", 0, lm.End},
		{"before the offset", "a", from, 0},
		{"from past the end (log replaced)", "a", lm.End + 1000, from},
		{"missing", "c", 0, 0},
	} {
		got, found, err := ch.FindMessage(tc.from, func(m chat.ChannelMessage) bool { return m.ID == tc.id })
		if err != nil || found != (tc.wantEnd > 0) || got.End != tc.wantEnd || (found && got.Msg.ID != tc.id) {
			t.Errorf("%s: FindMessage(%q, %d) = %+v, %v, %v; want end %d", tc.name, tc.id, tc.from, got, found, err, tc.wantEnd)
		}
	}
}

// The normal sync path must not read the log before the cursor. The test
// makes the first 9,000 lines unreadable (bytes overwritten in place): if
// sync read them, it would log a warning per line.
func TestSyncReadsOnlyNewMessages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var logs bytes.Buffer
	s, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ch, _ := s.Channel("slack-acme", "C1")
	var last LoggedMessage
	var cut int64
	for i := range 10000 {
		last, _ = ch.AppendMessage(msg(fmt.Sprint(i), "hello"))
		if i == 8999 {
			cut = last.End
		}
	}
	b, _ := os.ReadFile(ch.LogPath())
	for i := int64(0); i < cut; i++ {
		if b[i] != '\n' {
			b[i] = 'x'
		}
	}
	os.WriteFile(ch.LogPath(), b, 0o600)

	ch.AppendMessage(msg("new", "one new message"))
	got, _, err := ch.Pending(Cursor{Offset: last.End, LastID: last.Msg.ID}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Msg.ID != "new" {
		t.Errorf("Pending = %+v, want only the new message", got)
	}
	if strings.Contains(logs.String(), "unreadable") {
		t.Errorf("sync read lines before the cursor:\n%.500s", logs.String())
	}
}

func TestRewriteContextArchivesAndIsAtomic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, ch := openTest(t, dir)
	defer s.Close()
	for i := range 3 {
		m := model.Message{Role: model.RoleUser, Content: fmt.Sprint("old ", i)}
		ch.AppendContext(ContextRecord{Type: RecordMessage, Message: &m})
	}
	m := model.Message{Role: model.RoleUser, Content: "kept"}
	if err := ch.RewriteContext([]ContextRecord{{Type: RecordCompaction, Summary: "sum"}, {Type: RecordMessage, Message: &m}}); err != nil {
		t.Fatal(err)
	}
	// Appends go to the new file.
	m2 := model.Message{Role: model.RoleAssistant, Content: "after"}
	if err := ch.AppendContext(ContextRecord{Type: RecordMessage, Message: &m2}); err != nil {
		t.Fatal(err)
	}
	st, _ := ch.LoadContext()
	if len(st.Records) != 3 || st.Records[0].Summary != "sum" || st.Records[2].Message.Content != "after" {
		t.Errorf("context after rewrite = %+v", st.Records)
	}
	arch, err := os.ReadFile(filepath.Join(ch.Dir(), "context.archive.jsonl"))
	if err != nil || strings.Count(string(arch), "\n") != 3 || !strings.Contains(string(arch), "old 2") {
		t.Errorf("archive = %q, %v", arch, err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(ch.Dir(), ".context.jsonl.tmp-*"))
	if len(leftovers) != 0 {
		t.Errorf("temp files left: %v", leftovers)
	}
}

func TestReplaceContextKeepsTimesAndCursor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, ch := openTest(t, dir)
	defer s.Close()
	stale := model.Message{Role: model.RoleUser, Content: "stale"}
	ch.AppendContext(ContextRecord{Type: RecordMessage, Message: &stale})
	then := time.Date(2025, 12, 14, 9, 0, 0, 0, time.UTC)
	m := model.Message{Role: model.RoleUser, Content: "carried"}
	err := ch.ReplaceContext([]ContextRecord{
		{Type: RecordCompaction, Time: then, Summary: "sum"},
		{Type: RecordMessage, Time: then, Message: &m},
		{Type: RecordSeen, Time: then, MsgID: "m9", LogEnd: 1234},
	})
	if err != nil {
		t.Fatal(err)
	}
	m2 := model.Message{Role: model.RoleAssistant, Content: "after"}
	if err := ch.AppendContext(ContextRecord{Type: RecordMessage, Message: &m2}); err != nil {
		t.Fatal(err)
	}
	st, err := ch.LoadContext()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Records) != 4 || st.Records[0].Summary != "sum" || !st.Records[1].Time.Equal(then) || st.Records[3].Message.Content != "after" {
		t.Errorf("context after replace = %+v", st.Records)
	}
	if st.Cursor != (Cursor{Offset: 1234, LastID: "m9"}) || !st.Seen["m9"] {
		t.Errorf("cursor %+v, seen %v", st.Cursor, st.Seen)
	}
	if _, err := os.Stat(filepath.Join(ch.Dir(), "context.archive.jsonl")); err == nil {
		t.Error("replacing archived the previous context")
	}
}

func TestConcurrentAppendsStayWholeLines(t *testing.T) {
	t.Parallel()
	s, ch := openTest(t, t.TempDir())
	defer s.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				ch.AppendMessage(msg(fmt.Sprintf("%d-%d", g, i), strings.Repeat("x", 1000)))
			}
		}()
	}
	wg.Wait()
	got, _, err := ch.Pending(Cursor{}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The fallback path caps at MaxFallbackMessages; count lines directly.
	n := 0
	jsonl.Scan(ch.LogPath(), 0, -1, func(line []byte, _, _ int64) error {
		var m chat.ChannelMessage
		if json.Unmarshal(line, &m) != nil {
			t.Errorf("torn line: %.80s", line)
		}
		n++
		return nil
	})
	if n != 400 || len(got) != MaxFallbackMessages {
		t.Errorf("lines = %d (want 400), fallback pending = %d", n, len(got))
	}
}

func TestDailyLog(t *testing.T) {
	t.Parallel()
	s, ch := openTest(t, t.TempDir())
	defer s.Close()
	m := msg("1", "line one\nline two")
	m.Attachments = []chat.ChannelAttachment{{Filename: "a.png", LocalPath: "attachments/1-a.png"}}
	ch.AppendMessage(m)
	day := m.Timestamp.Local().Format("2006-01-02")
	b, err := os.ReadFile(filepath.Join(ch.Dir(), "daily", day+".md"))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("- %s [mario]: line one line two (attached: attachments/1-a.png)\n", m.Timestamp.Local().Format("15:04:05"))
	if string(b) != want {
		t.Errorf("daily log = %q, want %q", b, want)
	}
}

// BenchmarkSyncOneNewMessage shows that syncing one new message costs the
// same whatever the log's size: run with -bench Sync and compare the sizes.
func BenchmarkSyncOneNewMessage(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("log=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			s, _ := openTest(b, dir)
			defer s.Close()
			// Write the log in one go (faster than n fsynced appends).
			var buf bytes.Buffer
			for i := range n {
				line, _ := json.Marshal(msg(fmt.Sprint(i), "a message of ordinary length, like most chat messages are"))
				buf.Write(append(line, '\n'))
			}
			s.Close()
			os.WriteFile(filepath.Join(dir, "workspace/channels/slack-acme/C1/log.jsonl"), buf.Bytes(), 0o600)
			s2, ch := openTest(b, dir)
			defer s2.Close()
			cur := Cursor{Offset: int64(buf.Len()), LastID: fmt.Sprint(n - 1)}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				lm, err := ch.AppendMessage(msg(fmt.Sprint("new-", i), "new"))
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				got, next, err := ch.Pending(cur, 0, nil)
				if err != nil || len(got) != 1 || next.Offset != lm.End {
					b.Fatalf("Pending = %d, %+v, %v", len(got), next, err)
				}
				cur = next
			}
		})
	}
}
