package broker_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/openai"
	"github.com/mother-chat/mother/pkg/speech/speechtest"
)

// speechBroker is a broker whose speech.transcribe is whisper-1 on main
// at $0.60 a minute, falling back to backup at $1.20, with Mother's calls
// in a channel capped at $0.20 a day.
func speechBroker(t *testing.T, dir string, clk *clock.Fake, main, backup *speechtest.Server) *broker.Broker {
	t.Helper()
	cfg := &config.Config{}
	cfg.SetDefaults("")
	cfg.Providers.OpenAI = map[string]config.OpenAI{"main": {BaseURL: main.BaseURL()}, "backup": {BaseURL: backup.BaseURL()}}
	cfg.Speech.Transcribe = config.SpeechModel{Provider: "openai:main", Model: "whisper-1", USDPerMinute: config.Dollars(0.6),
		Fallbacks: []config.SpeechFallback{{Provider: "openai:backup", Model: "whisper-large", USDPerMinute: config.Dollars(1.2)}}}
	cfg.Budgets.Mother.ChannelDailyUSD = config.Dollars(0.2)
	b, err := broker.New(broker.Options{Config: cfg, Dir: dir, Clock: clk, Providers: func(name string) (model.Provider, error) {
		ep, err := cfg.Providers.OpenAIEndpoint(name)
		if err != nil {
			return nil, err
		}
		return openai.New(openai.Options{Name: name, BaseURL: cfg.Providers.OpenAI[ep].BaseURL})
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestVoiceTranscriptionsAreMetered: a transcription reserves its audio's
// cost (seconds at the model's price per minute) against Mother's caps
// before it is sent and settles it after; a fallback that answers is
// charged at its own price and the failed attempt at nothing; a call past
// a cap is refused unsent; and a restart counts the day's transcriptions
// again from the ledger.
func TestVoiceTranscriptionsAreMetered(t *testing.T) {
	t.Parallel()
	main, backup := speechtest.New(), speechtest.New()
	defer main.Close()
	defer backup.Close()
	audio := []byte("RIFF....WAVEfmt a test recording")
	main.Hears(audio, "hello from main")
	backup.Hears(audio, "hello from backup")
	dir := t.TempDir()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.Local))
	c := broker.Caller{Channel: "telegram/555", User: "telegram/555"}
	req := func(secs int) model.TranscribeRequest {
		return model.TranscribeRequest{Filename: "note.wav", Audio: audio, Duration: time.Duration(secs) * time.Second}
	}
	b := speechBroker(t, dir, clk, main, backup)
	if text, err := b.Transcribe(t.Context(), c, req(4)); err != nil || text != "hello from main" {
		t.Fatalf("Transcribe = %q, %v", text, err)
	}
	main.Fail(http.StatusServiceUnavailable)
	if text, err := b.Transcribe(t.Context(), c, req(4)); err != nil || text != "hello from backup" {
		t.Fatalf("with main down, Transcribe = %q, %v; want the fallback's", text, err)
	}
	main.Fail(0)
	// $0.04 + $0.08 spent: 10 s more ($0.10) would pass the $0.20 cap.
	_, err := b.Transcribe(t.Context(), c, req(10))
	var be *model.BudgetError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "budgets.mother.channelDailyUSD") {
		t.Fatalf("past the cap, Transcribe = %v; want the cap's refusal", err)
	}
	if n := len(main.Transcriptions()); n != 1 {
		t.Errorf("main heard %d requests, want 1: a refused call is not sent", n)
	}
	var got []string
	for _, e := range entries(t, dir) {
		if e.Kind == broker.KindTranscribe {
			got = append(got, fmt.Sprintf("%s/%s %d", e.Provider, e.Model, e.Cost))
		}
	}
	if want := "openai:main/whisper-1 40000|openai:main/whisper-1 0|openai:backup/whisper-large 80000"; strings.Join(got, "|") != want {
		t.Errorf("transcribe settlements = %q, want %q", strings.Join(got, "|"), want)
	}
	must(t, b.Close())

	b = speechBroker(t, dir, clk, main, backup)
	if _, err := b.Transcribe(t.Context(), c, req(9)); !errors.Is(err, model.ErrBudgetExhausted) {
		t.Errorf("after a restart, 9 s more ($0.09 on $0.12 of $0.20): %v, want refused", err)
	}
	if _, err := b.Transcribe(t.Context(), c, req(8)); err != nil {
		t.Errorf("after a restart, 8 s more (exactly the cap): %v", err)
	}
}

// entries reads dir's ledger lines.
func entries(t *testing.T, dir string) []broker.Entry {
	t.Helper()
	var out []broker.Entry
	files, err := filepath.Glob(filepath.Join(dir, "usage", "*.jsonl"))
	must(t, err)
	for _, f := range files {
		data, err := os.ReadFile(f)
		must(t, err)
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var e broker.Entry
			if err := json.Unmarshal([]byte(line), &e); err == nil {
				out = append(out, e)
			}
		}
	}
	return out
}
