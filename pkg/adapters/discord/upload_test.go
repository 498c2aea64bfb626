package discord

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/adapters/internal/upload/uploadtest"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/store"
)

// TestUploadArrivesWhole: a 25 MiB file, its title and no mentions reach
// the fake's channel intact, through a rate limit on the way.
func TestUploadArrivesWhole(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{})
	f.start()
	paths, sums := uploadtest.Make(t, t.TempDir(), 1, UploadLimit)
	fake.RateLimit("POST", "/api/v9/channels/"+general+"/messages", 0.05, 1)
	if err := f.a.Upload(t.Context(), general, paths[0], "the <@"+mario.ID+"> plot"); err != nil {
		t.Fatalf("Upload: %v", err)
	}
	ms := fake.Messages(general)
	if len(ms) != 1 || len(ms[0].Files) != 1 {
		t.Fatalf("channel got %d messages (%+v), want one with one file", len(ms), ms)
	}
	m := ms[0]
	name := filepath.Base(paths[0])
	if got := m.Files[0]; got.Name != name || len(got.Data) != UploadLimit || uploadtest.Sum(got.Data) != sums[name] {
		t.Errorf("file = %s, %d bytes, sum %s; want %s, %d bytes, sum %s", got.Name, len(got.Data), uploadtest.Sum(got.Data), name, UploadLimit, sums[name])
	}
	if m.Content != "the <@"+mario.ID+"> plot" || !strings.Contains(string(m.AllowedMentions), `"parse":[]`) {
		t.Errorf("content %q, allowed_mentions %s; want the title and no mentions parsed", m.Content, m.AllowedMentions)
	}
	big := filepath.Join(t.TempDir(), "big.bin")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, UploadLimit+1); err != nil {
		t.Fatal(err)
	}
	if err := f.a.Upload(t.Context(), general, big, ""); err == nil || !strings.Contains(err.Error(), "over Discord's") {
		t.Errorf("Upload of a file over the limit = %v, want the limit named", err)
	}
	if err := f.a.Upload(t.Context(), "700000000000000404", paths[0], ""); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("Upload to an unknown channel = %v, want Discord's 404", err)
	}
}

// TestUploadMemory: ten 25 MiB uploads at once (three under -race) raise the adapter's peak
// resident set by at most uploadtest.Bound, and every file arrives whole.
// The adapter runs in a child process; the fake, which keeps what it
// receives, runs here.
func TestUploadMemory(t *testing.T) {
	if uploadtest.InChild() {
		uploadMemoryChild(t)
		return
	}
	t.Parallel()
	fake := newFake(t, 0)
	paths, sums := uploadtest.Make(t, t.TempDir(), uploadtest.Files, uploadtest.FileBytes)
	rise := uploadtest.Measure(t, "TestUploadMemory", "UPLOADTEST_URL="+fake.URL, "UPLOADTEST_GUILD="+fake.GuildID(), "UPLOADTEST_FILES="+strings.Join(paths, ","))
	t.Logf("%d uploads of 25 MiB at once: the adapter's peak RSS rose %d MB", uploadtest.Files, rise>>20)
	if rise > uploadtest.Bound {
		t.Errorf("%d uploads of 25 MiB raised the adapter's peak RSS by %d MB, want at most %d MB", uploadtest.Files, rise>>20, uploadtest.Bound>>20)
	}
	got := map[string]string{}
	for _, m := range fake.Messages(general) {
		for _, f := range m.Files {
			got[f.Name] = uploadtest.Sum(f.Data)
		}
	}
	for name, sum := range sums {
		if got[name] != sum {
			t.Errorf("%s arrived with sum %q, want %s", name, got[name], sum)
		}
	}
}

func uploadMemoryChild(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	env := chat.Env{
		Name:   "discord",
		Config: config.Adapter{Type: "discord", Settings: &Settings{BotToken: "test-token", APIURL: os.Getenv("UPLOADTEST_URL"), GuildID: os.Getenv("UPLOADTEST_GUILD")}},
		Logger: slog.New(slog.DiscardHandler),
		Files:  st.AdapterFiles("discord"),
	}
	a, err := New(env, Options{})
	if err != nil {
		t.Fatal(err)
	}
	uploadtest.Uploads(t, strings.Split(os.Getenv("UPLOADTEST_FILES"), ","), func(p string) error {
		return a.Upload(t.Context(), general, p, "")
	})
}
