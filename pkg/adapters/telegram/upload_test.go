package telegram

import (
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/internal/upload/uploadtest"
	"github.com/mother-chat/mother/pkg/adapters/telegram/telegramtest"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/store"
)

// TestUploadMemory: ten 25 MiB documents at once (three under -race) raise the adapter's peak
// resident set by at most uploadtest.Bound, and every file arrives whole.
// The adapter runs in a child process; the fake, which keeps what it
// receives, runs here.
func TestUploadMemory(t *testing.T) {
	if uploadtest.InChild() {
		uploadMemoryChild(t)
		return
	}
	t.Parallel()
	fake := newFake(t)
	paths, sums := uploadtest.Make(t, t.TempDir(), uploadtest.Files, uploadtest.FileBytes)
	rise := uploadtest.Measure(t, "TestUploadMemory", "UPLOADTEST_URL="+fake.APIURL(), "UPLOADTEST_FILES="+strings.Join(paths, ","))
	t.Logf("%d uploads of 25 MiB at once: the adapter's peak RSS rose %d MB", uploadtest.Files, rise>>20)
	if rise > uploadtest.Bound {
		t.Errorf("%d uploads of 25 MiB raised the adapter's peak RSS by %d MB, want at most %d MB", uploadtest.Files, rise>>20, uploadtest.Bound>>20)
	}
	got := map[string]string{}
	for _, u := range fake.Uploads() {
		if u.Chat == dmChat.ID && u.Method == "sendDocument" {
			got[u.Name] = uploadtest.Sum(u.Data)
		}
	}
	for _, p := range paths {
		name := filepath.Base(p)
		if got[name] != sums[name] {
			t.Errorf("%s arrived with sum %q, want %s", name, got[name], sums[name])
		}
	}
}

// uploadMemoryChild uploads with a client timeout longer than the
// default's 55 s: under the race detector the fake in the parent can take
// that long to read three forms of 25 MiB.
func uploadMemoryChild(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a, err := New(chat.Env{
		Name:   "telegram",
		Config: config.Adapter{Type: "telegram", Settings: &Settings{BotToken: telegramtest.BotToken, APIURL: os.Getenv("UPLOADTEST_URL")}},
		Logger: slog.New(slog.DiscardHandler),
		Files:  st.AdapterFiles("telegram"),
	}, Options{Client: &http.Client{Timeout: 5 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	uploadtest.Uploads(t, strings.Split(os.Getenv("UPLOADTEST_FILES"), ","), func(p string) error {
		return a.Upload(t.Context(), strconv.FormatInt(dmChat.ID, 10), p, "")
	})
}
