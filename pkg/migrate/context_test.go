package migrate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/session"
	"github.com/mother-chat/mother/pkg/store"
)

// TestMigratedContextLoads reads the migrated fixture channel back through
// the session package, as Mother does on her first run: the old summary
// and the turns after it come first, then the message logged after the
// old context's last run, once.
func TestMigratedContextLoads(t *testing.T) {
	t.Parallel()
	old := copyFixture(t)
	newDir := filepath.Join(t.TempDir(), "new")
	if _, err := Run(Options{OldDir: old, NewDir: newDir, Adapter: "discord-mybot"}); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(newDir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ch, err := st.Channel("discord-mybot", "1234567890")
	if err != nil {
		t.Fatal(err)
	}
	s, err := session.Load(ch, "bot")
	if err != nil {
		t.Fatal(err)
	}
	synced, err := s.Sync(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(synced) != 1 || synced[0].Msg.Text != "yes" {
		t.Fatalf("first sync brought in %d messages (%+v), want only the one logged after the old context's last run", len(synced), synced)
	}
	want := []struct {
		role model.Role
		has  []string
	}{
		{model.RoleUser, []string{session.SummaryPrefix + "- mario said deploys happen on Fridays"}},
		{model.RoleUser, []string{"[mario]: what is the staging server called?"}},
		{model.RoleAssistant, []string{"Let me check.\n[used bash: {\"command\":\"cat /workspace/servers.txt\"}]\n[bash result: staging: kiwi\nproduction: mango]\nThe staging server is called kiwi."}},
		{model.RoleUser, []string{"[2025-12-14 10:00:00+00:00] [mario]: hello mother"}},
		{model.RoleAssistant, []string{"Hello Mario!"}},
		{model.RoleUser, []string{"[mario]: look at this", "1 image(s) were attached here; not carried over"}},
		{model.RoleAssistant, []string{"A nice photo of the office."}},
		{model.RoleUser, []string{"[mario]: yes"}},
	}
	h := s.History()
	if len(h) != len(want) {
		for i, m := range h {
			t.Logf("history[%d] %s: %q", i, m.Role, m.Content)
		}
		t.Fatalf("history has %d messages, want %d", len(h), len(want))
	}
	for i, w := range want {
		if h[i].Role != w.role {
			t.Errorf("history[%d].Role = %s, want %s", i, h[i].Role, w.role)
		}
		for _, sub := range w.has {
			if !strings.Contains(h[i].Content, sub) {
				t.Errorf("history[%d] = %q, want it to contain %q", i, h[i].Content, sub)
			}
		}
	}
	if strings.Contains(h[2].Content, "I should look it up") {
		t.Error("the old model's thinking was carried")
	}
	// The old file is kept beside the new context, byte for byte.
	a, _ := os.ReadFile(filepath.Join(old, "1234567890/context.jsonl"))
	b, err := os.ReadFile(filepath.Join(ch.Dir(), OldContextFile))
	if err != nil || !bytes.Equal(a, b) {
		t.Errorf("%s not kept as is (%v)", OldContextFile, err)
	}
}

func writeLines(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "context.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func contents(oc *oldContext) []string {
	var out []string
	for _, m := range oc.Messages {
		out = append(out, string(m.Msg.Role)+":"+m.Msg.Content)
	}
	return out
}

func TestReadOldContextVersions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		lines       []string
		wantSummary string
		wantEarlier int
		want        []string
		wantProblem string
	}{
		{
			name: "v1: index-based compactions, the latest one wins",
			lines: []string{
				`{"type":"session","id":"s","timestamp":"2025-01-01T00:00:00Z","provider":"anthropic","modelId":"claude"}`,
				`{"type":"message","timestamp":"2025-01-01T00:00:01Z","message":{"role":"user","content":"[a]: one"}}`,
				`{"type":"message","timestamp":"2025-01-01T00:00:02Z","message":{"role":"assistant","content":[{"type":"text","text":"1"}]}}`,
				`{"type":"compaction","timestamp":"2025-01-01T00:00:03Z","summary":"first summary","firstKeptEntryIndex":2,"tokensBefore":10}`,
				`{"type":"message","timestamp":"2025-01-01T00:00:04Z","message":{"role":"user","content":"[a]: two"}}`,
				`{"type":"message","timestamp":"2025-01-01T00:00:05Z","message":{"role":"assistant","content":[{"type":"text","text":"2"}]}}`,
				`{"type":"compaction","timestamp":"2025-01-01T00:00:06Z","summary":"second summary","firstKeptEntryIndex":4,"tokensBefore":10}`,
				`{"type":"message","timestamp":"2025-01-01T00:00:07Z","message":{"role":"user","content":"[a]: three"}}`,
			},
			wantSummary: "second summary",
			wantEarlier: 1,
			want:        []string{"user:[a]: two", "assistant:2", "user:[a]: three"},
		},
		{
			name: "v3: only the branch the last entry is on",
			lines: []string{
				`{"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00Z","cwd":"/"}`,
				`{"type":"message","id":"a","parentId":null,"timestamp":"2025-01-01T00:00:01Z","message":{"role":"user","content":"[a]: root"}}`,
				`{"type":"message","id":"b","parentId":"a","timestamp":"2025-01-01T00:00:02Z","message":{"role":"assistant","content":[{"type":"text","text":"abandoned"}]}}`,
				`{"type":"message","id":"c","parentId":"a","timestamp":"2025-01-01T00:00:03Z","message":{"role":"assistant","content":[{"type":"text","text":"kept"}]}}`,
				`{"type":"branch_summary","id":"d","parentId":"c","timestamp":"2025-01-01T00:00:04Z","fromId":"b","summary":"tried another way"}`,
			},
			want: []string{"user:[a]: root", "assistant:kept", "user:[Summary of a branch of the earlier conversation]\ntried another way"},
		},
		{
			name: "tool errors, failed answers, unknown roles and bad lines",
			lines: []string{
				`{"type":"session","id":"s","timestamp":"2025-01-01T00:00:00Z"}`,
				`{"type":"message","timestamp":"2025-01-01T00:00:01Z","message":{"role":"user","content":"[a]: run it"}}`,
				`{"type":"message","timestamp":"2025-01-01T00:00:02Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"1","name":"bash","arguments":{"command":"false"}}]}}`,
				`{"type":"message","timestamp":"2025-01-01T00:00:03Z","message":{"role":"toolResult","toolCallId":"1","toolName":"bash","content":[{"type":"text","text":"exit 1"}],"isError":true}}`,
				`{"type":"message","timestamp":"2025-01-01T00:00:04Z","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"overloaded"}}`,
				`{"type":"message","timestamp":"2025-01-01T00:00:05Z","message":{"role":"wizard","content":"?"}}`,
				`{"nope"`,
			},
			want:        []string{"user:[a]: run it", "assistant:[used bash: {\"command\":\"false\"}]\n[bash error: exit 1]\n[the answer failed: overloaded]"},
			wantProblem: "ctx:6: message role \"wizard\" not carried|ctx:7: not JSON",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			oc, err := readOldContext(writeLines(t, tc.lines...), "ctx")
			if err != nil {
				t.Fatal(err)
			}
			if oc.Summary != tc.wantSummary || oc.Earlier != tc.wantEarlier {
				t.Errorf("summary %q (earlier %d), want %q (earlier %d)", oc.Summary, oc.Earlier, tc.wantSummary, tc.wantEarlier)
			}
			if got := contents(oc); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("messages:\n got %q\nwant %q", got, tc.want)
			}
			problems := strings.Join(oc.Problems, "\n")
			for _, p := range strings.Split(tc.wantProblem, "|") {
				if p != "" && !strings.Contains(problems, p) {
					t.Errorf("problems %q lack %q", oc.Problems, p)
				}
			}
			if tc.wantProblem == "" && len(oc.Problems) > 0 {
				t.Errorf("unexpected problems %q", oc.Problems)
			}
		})
	}
}

func TestReadOldContextKeepsMostRecent(t *testing.T) {
	t.Parallel()
	lines := []string{`{"type":"session","id":"s","timestamp":"2025-01-01T00:00:00Z"}`}
	for i := range MaxCarriedMessages {
		lines = append(lines,
			fmt.Sprintf(`{"type":"message","timestamp":"2025-01-01T00:00:01Z","message":{"role":"user","content":"[a]: q%d"}}`, i),
			fmt.Sprintf(`{"type":"message","timestamp":"2025-01-01T00:00:02Z","message":{"role":"assistant","content":[{"type":"text","text":"a%d"}]}}`, i))
	}
	oc, err := readOldContext(writeLines(t, lines...), "ctx")
	if err != nil {
		t.Fatal(err)
	}
	if len(oc.Messages) != MaxCarriedMessages || oc.Dropped != MaxCarriedMessages {
		t.Fatalf("carried %d, dropped %d; want %d and %d", len(oc.Messages), oc.Dropped, MaxCarriedMessages, MaxCarriedMessages)
	}
	first, last := oc.Messages[0].Msg, oc.Messages[len(oc.Messages)-1].Msg
	if first.Content != fmt.Sprintf("[a]: q%d", MaxCarriedMessages/2) || last.Content != fmt.Sprintf("a%d", MaxCarriedMessages-1) {
		t.Errorf("carried from %q to %q", first.Content, last.Content)
	}
}

func TestUserKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"[mario]: hi": "[mario]: hi",
		"[2025-12-14 10:00:00+00:00] [mario]: hi":                                               "[mario]: hi",
		"[2025-12-14 10:00:00-0700] [mario]: hi":                                                "[mario]: hi",
		"[mario]: hi\n\n<slack_attachments>\nx\n</slack_attachments>":                           "[mario]: hi",
		"[2025-12-14 10:00:00+01:00] [mario]: hi\n<attachments>\nattachments/x\n</attachments>": "[mario]: hi",
		"[mario]: [2025-12-14 10:00:00+00:00] stays":                                            "[mario]: [2025-12-14 10:00:00+00:00] stays",
	} {
		if got := userKey(in); got != want {
			t.Errorf("userKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func msgAt(id, user string, bot bool, text string, minute int) chat.ChannelMessage {
	return chat.ChannelMessage{ID: id, Timestamp: time.Date(2025, 1, 1, 0, minute, 0, 0, time.UTC), Sender: chat.Sender{ID: user, Username: user, IsBot: bot}, Text: text}
}

func TestPlanContext(t *testing.T) {
	t.Parallel()
	logged := func(ms ...chat.ChannelMessage) []loggedMessage {
		var out []loggedMessage
		for i, m := range ms {
			out = append(out, loggedMessage{Msg: m, End: int64(100 * (i + 1))})
		}
		return out
	}
	oc := &oldContext{
		Summary:  "sum",
		Messages: []carriedMessage{{Msg: model.Message{Role: model.RoleUser, Content: "[a]: two"}}},
		userKeys: map[string]bool{"[a]: one": true, "[a]: two": true},
		botTexts: map[string]bool{"answer one": true},
		Last:     time.Date(2025, 1, 1, 0, 10, 0, 0, time.UTC),
	}
	t.Run("by text, with the reply after the last held message", func(t *testing.T) {
		lg := logged(
			msgAt("1", "a", false, "one", 1),
			msgAt("2", "b", false, "chatter the old context never saw", 2),
			msgAt("3", "a", false, "two", 3),
			msgAt("4", "mom", true, "an answer the old context words differently", 4),
			msgAt("5", "a", false, "three", 20),
		)
		p := planContext(oc, lg)
		if p.Upto != 3 || p.ByTime || p.Missing != 1 {
			t.Errorf("plan = upto %d, byTime %v, missing %d; want 3, false, 1", p.Upto, p.ByTime, p.Missing)
		}
		last := p.Records[len(p.Records)-1]
		if last.Type != store.RecordSeen || last.MsgID != "4" || last.LogEnd != 400 {
			t.Errorf("cursor record = %+v", last)
		}
		if p.Records[1].Type != store.RecordCompaction || p.Records[1].Summary != "sum" {
			t.Errorf("records[1] = %+v", p.Records[1])
		}
	})
	t.Run("by time when no text matches", func(t *testing.T) {
		lg := logged(msgAt("1", "a", false, "ONE", 1), msgAt("2", "a", false, "later", 11))
		p := planContext(oc, lg)
		if p.Upto != 0 || !p.ByTime {
			t.Errorf("plan = upto %d, byTime %v; want 0, true", p.Upto, p.ByTime)
		}
	})
	t.Run("no log", func(t *testing.T) {
		p := planContext(oc, nil)
		if p.Upto != -1 || p.Records[len(p.Records)-1].Type != store.RecordMessage {
			t.Errorf("plan = %+v", p)
		}
	})
}
