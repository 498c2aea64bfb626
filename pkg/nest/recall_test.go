package nest_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/recall"
	"github.com/mother-chat/mother/pkg/store"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// recallDesk answers Recall as Mother does: over a real index, in the
// chick's own channel (its Info), never one the request could name.
type recallDesk struct{ r *recall.Indexer }

func (d recallDesk) ChickRecall(ctx context.Context, in hatchery.Info, query string, limit int) (string, error) {
	hits, err := d.r.Search(ctx, in.Adapter, in.ChannelID, query, limit)
	return recall.FormatHits(in.Channel, query, hits, time.UTC), err
}

func (d recallDesk) ChickRecallRead(ctx context.Context, in hatchery.Info, id string, before, after int) (string, error) {
	docs, at, err := d.r.Around(ctx, in.Adapter, in.ChannelID, id, before, after)
	return recall.FormatAround(in.Channel, docs, at, time.UTC), err
}

// TestRecallChickOwnChannel: over the real gRPC socket, a chick's Recall
// searches its own channel's history (cli/local) and reads around a hit;
// another channel's history (slack/C2, with the same words) is never in
// what it gets, and without an index Mother answers FailedPrecondition.
func TestRecallChickOwnChannel(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0)
	id, tok := f.spawn(t)
	ctx := wire.Credentials(t.Context(), id, tok)
	if _, err := f.client.Recall(ctx, &pb.RecallRequest{Query: "zebra"}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Recall without an index: %v, want FailedPrecondition", err)
	}

	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	write := func(adapter, channel string, texts ...string) {
		dir, _ := st.ChannelDir(adapter, channel)
		os.MkdirAll(dir, 0o700)
		var b strings.Builder
		for i, text := range texts {
			line, _ := json.Marshal(chat.ChannelMessage{ID: channel + "-" + string(rune('a'+i)), ChannelID: channel, Timestamp: time.Date(2026, 5, 1, 10, i, 0, 0, time.UTC),
				Sender: chat.Sender{ID: "u", Username: "ann"}, Text: text})
			b.Write(line)
			b.WriteByte('\n')
		}
		os.WriteFile(filepath.Join(dir, "log.jsonl"), []byte(b.String()), 0o600)
	}
	write("cli", "local", "the zebra crossing is repainted", "then lunch")
	write("slack", "C2", "zebra-purple is the secret of slack/C2")
	ix, err := recall.Open(t.Context(), filepath.Join(t.TempDir(), "recall.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	f.srv.SetRecall(recallDesk{recall.NewIndexer(ix, st, recall.IndexerOptions{})})

	resp, err := f.client.Recall(ctx, &pb.RecallRequest{Query: "zebra purple secret slack/C2", Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetResult(); !strings.Contains(got, "[local-a]") || !strings.Contains(got, "history of cli/local") || strings.Contains(got, "zebra-purple") {
		t.Errorf("Recall = %q, want the chick's own channel's hit only", got)
	}
	resp, err = f.client.Recall(ctx, &pb.RecallRequest{ReadId: "local-a", After: 1})
	if err != nil || !strings.Contains(resp.GetResult(), "→ [local-a]") || !strings.Contains(resp.GetResult(), "then lunch") {
		t.Errorf("Recall(read) = %v, %v", resp, err)
	}
	if _, err := f.client.Recall(ctx, &pb.RecallRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Recall without query: %v, want InvalidArgument", err)
	}
}
