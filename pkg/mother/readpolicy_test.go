package mother

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/tools"
)

func TestReadPolicyKeepsRunsInTheirChannel(t *testing.T) {
	ws := t.TempDir()
	own := filepath.Join(ws, "channels", "slack", "C1")
	other := filepath.Join(ws, "channels", "slack", "C2")
	for _, d := range []string{own, other} {
		os.MkdirAll(d, 0o700)
		os.WriteFile(filepath.Join(d, "log.jsonl"), []byte("log of "+filepath.Base(d)), 0o600)
	}
	os.WriteFile(filepath.Join(ws, "MOTHER.md"), []byte("guide"), 0o600)
	// A link in Mother's own channel pointing at another channel.
	os.Symlink(filepath.Join(other, "log.jsonl"), filepath.Join(own, "sneaky"))
	ts, err := tools.ReadOnly(ws, ReadPolicy(ws))
	if err != nil {
		t.Fatal(err)
	}
	read := ts[0]
	ctx := chat.WithRunInfo(context.Background(), chat.RunInfo{Adapter: "slack", ChannelID: "C1", ChannelDir: own})
	cases := []struct {
		ctx  context.Context
		path string
		ok   bool
	}{
		{ctx, "MOTHER.md", true},
		{ctx, "channels/slack/C1/log.jsonl", true},
		{ctx, "channels/slack/C2/log.jsonl", false},
		{ctx, "channels/slack/C1/sneaky", false},
		{ctx, "channels/slack/C1/../C2/log.jsonl", false},
		{context.Background(), "channels/slack/C1/log.jsonl", false},
		{context.Background(), "MOTHER.md", true},
	}
	for _, c := range cases {
		_, err := read.Run(c.ctx, []byte(`{"label":"x","path":"`+c.path+`"}`))
		if (err == nil) != c.ok {
			t.Errorf("read %s: err = %v, want ok=%v", c.path, err, c.ok)
		}
	}
}
