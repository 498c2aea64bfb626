package recall

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mother-chat/mother/internal/recalldata"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/model/ollama"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/store"
)

// labelledChannel writes recalldata's history into a real store's channel
// cli/local as Mother keeps it: people's, Mother's, the chicks' and the
// daily notes' lines in log.jsonl (a daily log is derived from log.jsonl,
// so its lines reach the index through it), the memory lines as the
// items of MEMORY.md. It returns the store, the questions, and the data
// set's id of each document id that differs (memory:<n>).
func labelledChannel(t testing.TB) (*store.Store, []recalldata.Question, map[string]string) {
	t.Helper()
	msgs, qs := recalldata.History(46)
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ch, err := st.Channel("cli", "local")
	if err != nil {
		t.Fatal(err)
	}
	var log, mem strings.Builder
	ids := map[string]string{}
	n := 0
	for _, m := range msgs {
		text := strings.Join(strings.Fields(m.Text), " ")
		if m.Kind == "memory" {
			n++
			ids[fmt.Sprintf("memory:%d", n)] = m.ID
			fmt.Fprintf(&mem, "- %s\n", text)
			continue
		}
		sender := chat.Sender{ID: "u-" + m.User, Username: m.User}
		switch m.Kind {
		case "mother":
			sender = chat.Sender{ID: "bot", Username: ownUsername, IsBot: true}
		case "chick":
			sender = chat.Sender{ID: "bot", Username: ownUsername, IsBot: true}
			text = "[chick " + m.User + ", goal: a job]\n" + m.Text
		}
		line, _ := json.Marshal(chat.ChannelMessage{ID: m.ID, ChannelID: "local", Timestamp: m.Time, Sender: sender, Text: text})
		log.Write(line)
		log.WriteByte('\n')
	}
	if err := ch.ReplaceLog([]byte(log.String())); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ch.Dir(), "MEMORY.md"), []byte(mem.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return st, qs, ids
}

// embedVia is a recall Embedder over the real Ollama client.
type embedVia struct {
	p     *ollama.Provider
	model string
}

func (e embedVia) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	v, _, err := e.p.Embed(ctx, e.model, texts)
	return v, err
}

// TestRecallQuality: over recalldata's six months of a family's chat
// (3,300 messages, 220 questions with the message that answers each),
// the question's answer is among the first 5 hits for at least 75% of
// the questions by full text alone, and for at least 90% with embeddings
// (served by the Ollama wire fake's deterministic embedding, through the
// real client) fused with it.
func TestRecallQuality(t *testing.T) {
	st, qs, ids := labelledChannel(t)
	ctx := t.Context()
	fake := ollamatest.New()
	defer fake.Close()
	p, err := ollama.New(fake.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		embed Embedder
		want  float64
	}{
		{"full text", nil, 0.75},
		{"with embeddings", embedVia{p, "embed-fake"}, 0.9},
	} {
		t.Run(c.name, func(t *testing.T) {
			ix, err := Open(ctx, filepath.Join(t.TempDir(), "recall.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ix.Close()
			r := NewIndexer(ix, st, IndexerOptions{Embedder: c.embed, EmbedModel: "ollama/embed-fake"})
			r.catchUp(ctx)
			if r.embed != nil {
				r.embedSome(ctx)
				if s := r.Status(); s.Embedded != s.Docs {
					t.Fatalf("%d of %d documents embedded (%s)", s.Embedded, s.Docs, s.Err)
				}
			}
			got, missed, err := recalldata.RecallAt(5, qs, func(q string, k int) ([]string, error) {
				hits, err := r.Search(ctx, "cli", "local", q, k)
				var out []string
				for _, h := range hits {
					if id, ok := ids[h.ID]; ok {
						out = append(out, id)
					} else {
						out = append(out, h.ID)
					}
				}
				return out, err
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("recall@5 %s: %.3f over %d questions", c.name, got, len(qs))
			if got < c.want {
				for i, q := range missed {
					if i == 10 {
						break
					}
					t.Logf("missed: %q (answer %s)", q.Text, q.Answer)
				}
				t.Errorf("recall@5 %s = %.3f, want at least %.2f", c.name, got, c.want)
			}
		})
	}
}
