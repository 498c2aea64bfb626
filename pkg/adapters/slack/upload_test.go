package slack

import (
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/adapters/internal/upload/uploadtest"
	"github.com/mother-chat/mother/pkg/adapters/slack/slacktest"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/store"
)

// TestUploadMemory: ten 25 MiB uploads at once (three under -race) (files.uploadV2) raise
// the adapter's peak resident set by at most uploadtest.Bound, and every
// file arrives whole. The adapter runs in a child process; the fake,
// which keeps what it receives, runs here.
func TestUploadMemory(t *testing.T) {
	if uploadtest.InChild() {
		uploadMemoryChild(t)
		return
	}
	t.Parallel()
	fake := newFake(t, 0)
	paths, sums := uploadtest.Make(t, t.TempDir(), uploadtest.Files, uploadtest.FileBytes)
	rise := uploadtest.Measure(t, "TestUploadMemory", "UPLOADTEST_URL="+fake.APIURL(), "UPLOADTEST_FILES="+strings.Join(paths, ","))
	t.Logf("%d uploads of 25 MiB at once: the adapter's peak RSS rose %d MB", uploadtest.Files, rise>>20)
	if rise > uploadtest.Bound {
		t.Errorf("%d uploads of 25 MiB raised the adapter's peak RSS by %d MB, want at most %d MB", uploadtest.Files, rise>>20, uploadtest.Bound>>20)
	}
	got := map[string]string{}
	for _, f := range fake.Files() {
		if f.Channel == general {
			got[f.Name] = uploadtest.Sum(f.Data)
		}
	}
	for name, sum := range sums {
		if got[name] != sum {
			t.Errorf("%s arrived in %s with sum %q, want %s", name, general, got[name], sum)
		}
	}
}

func uploadMemoryChild(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a, err := New(chat.Env{
		Name:   "slack",
		Config: config.Adapter{Type: "slack", Settings: &Settings{BotToken: slacktest.BotToken, AppToken: slacktest.AppToken, APIURL: os.Getenv("UPLOADTEST_URL")}},
		Logger: slog.New(slog.DiscardHandler),
		Files:  st.AdapterFiles("slack"),
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	uploadtest.Uploads(t, strings.Split(os.Getenv("UPLOADTEST_FILES"), ","), func(p string) error {
		return a.Upload(t.Context(), general, p, "")
	})
}
