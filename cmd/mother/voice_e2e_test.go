package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/discord/discordtest"
	"github.com/mother-chat/mother/pkg/adapters/slack/slacktest"
	"github.com/mother-chat/mother/pkg/adapters/telegram/telegramtest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/speech/speechtest"
)

const voiceWords = "Please remind me to water the plants tomorrow morning."

// voiceModel answers a voice message by what it heard, or says it could
// not hear it, so the answer shows what reached the model.
func voiceModel() *ollamatest.Server {
	return ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		user := r.LastUser()
		if i := strings.Index(user, "could not transcribe: "); i >= 0 {
			why := user[i+len("could not transcribe: "):]
			why, _, _ = strings.Cut(why, "]")
			return ollamatest.Turn{Text: "Sorry, I could not hear your voice message (" + why + "). Could you type it?"}
		}
		if i := strings.Index(user, "[voice"); i >= 0 {
			heard, _, _ := strings.Cut(user[i:], "\n")
			return ollamatest.Turn{Text: "Heard you: " + heard}
		}
		return ollamatest.Turn{Text: "ok"}
	})
}

// voiceConfig is Telegram with a speech server: whisper-1 at $0.60 a
// minute (a cent a second), Mother's own calls capped at $0.05 a channel a
// day, voice messages up to 20 s, English hinted in the DM.
func voiceConfig(fake *telegramtest.Server, model *ollamatest.Server, sp *speechtest.Server) map[string]any {
	cfg := telegramConfig(fake, model)
	cfg["providers"].(map[string]any)["openai"] = map[string]any{"whisper": map[string]any{"baseURL": sp.BaseURL(), "apiKey": "sk-speech"}}
	cfg["speech"] = map[string]any{
		"transcribe":  map[string]any{"provider": "openai:whisper", "model": "whisper-1", "usdPerMinute": 0.6},
		"maxDuration": "20s",
		"channels":    map[string]any{"telegram/555": map[string]any{"language": "en"}},
	}
	cfg["budgets"] = map[string]any{"mother": map[string]any{"channelDailyUSD": 0.05}}
	return cfg
}

// tgBotSays is the first message of Mother's in chat that answers
// trigger and contains want.
func tgBotSays(fake *telegramtest.Server, chat int64, trigger int, want string) string {
	for _, m := range fake.BotMessages(chat, 0) {
		if m.ReplyTo == trigger && strings.Contains(m.Shown(), want) {
			return m.Shown()
		}
	}
	return ""
}

// TestVoiceTelegram: a Telegram voice note (espeak-ng, OGG/Opus by
// opusenc, served through getFile and the file URL) is transcribed by the
// speech server, reaches the model as "[voice 0:0N] …", is stored in
// log.jsonl with its audio under attachments/, and is metered; then a
// note over speech.maxDuration, one over the channel's cap and one while
// the speech server is down are each named to the model, which tells the
// person.
func TestVoiceTelegram(t *testing.T) {
	t.Parallel()
	note := speechtest.VoiceNote(t, voiceWords)
	sp := speechtest.New()
	defer sp.Close()
	sp.Hears(note, voiceWords)
	model := voiceModel()
	defer model.Close()
	fake := newTelegramFake(t)
	data := t.TempDir()
	startDaemon(t, data, voiceConfig(fake, model, sp))
	waitFor(t, "mother to connect", tgPolling(fake, 1))

	t.Run("heard, stored and metered", func(t *testing.T) {
		// A DM Mother refuses (Luigi is no admin; dm "none") is not heard:
		// it comes first, so the one transcription below is Mario's.
		fake.AddChat(telegramtest.Chat{ID: tgLuigi.ID, Type: "private"})
		fake.Post(tgLuigi.ID, tgLuigi.ID, "", telegramtest.WithVoice(note, 4))
		trig := fake.Post(tgMario.ID, tgMario.ID, "", telegramtest.WithVoice(note, 4))
		var answer string
		waitFor(t, "the answer", func() bool { answer = tgBotSays(fake, tgMario.ID, trig, "Heard you"); return answer != "" })
		if !strings.Contains(answer, "[voice 0:0") || !strings.Contains(answer, voiceWords) {
			t.Errorf("answer = %q, want the model to have read \"[voice 0:0N] %s\"", answer, voiceWords)
		}
		trs := sp.Transcriptions()
		if len(trs) != 1 {
			t.Fatalf("transcriptions = %d, want 1: Mario's, not the refused DM's (problems: %q)", len(trs), sp.Problems())
		}
		tr := trs[0]
		if !strings.HasSuffix(tr.Filename, ".ogg") || tr.Model != "whisper-1" || tr.Language != "en" || tr.ResponseFormat != "json" || tr.Temperature != "0" ||
			tr.Auth != "Bearer sk-speech" || !bytes.Equal(tr.Audio, note) {
			t.Errorf("transcription request = %+v (audio %d bytes), want voice-….ogg, whisper-1, en, json, 0, the key and the note's %d bytes",
				struct{ Filename, Model, Language, ResponseFormat, Temperature, Auth string }{tr.Filename, tr.Model, tr.Language, tr.ResponseFormat, tr.Temperature, tr.Auth}, len(tr.Audio), len(note))
		}
		logged := readChannelLog(t, data, "telegram", "555")
		if len(logged) == 0 || !strings.HasPrefix(logged[0].Text, "[voice 0:0") || !strings.Contains(logged[0].Text, voiceWords) {
			t.Fatalf("log.jsonl = %+v, want the voice message with its transcript first", logged)
		}
		atts := logged[0].Attachments
		if len(atts) != 1 || !atts[0].Voice || atts[0].Seconds != 4 {
			t.Fatalf("attachments = %+v, want the voice note", atts)
		}
		saved, err := os.ReadFile(filepath.Join(data, "workspace/channels/telegram/555", atts[0].LocalPath))
		if err != nil || !bytes.Equal(saved, note) {
			t.Errorf("%s: %d bytes, %v; want the note's %d bytes", atts[0].LocalPath, len(saved), err, len(note))
		}
		var reserved, settled bool
		for _, l := range readLedger(t, data) {
			switch {
			case l.Kind == "transcribe-reserve" && l.Channel == "telegram/555" && l.RCost >= 40000:
				reserved = true
			case l.Kind == "transcribe" && l.Channel == "telegram/555" && l.Model == "whisper-1" && l.Cost >= 40000 && l.Cost <= 50000:
				settled = true
			}
		}
		if !reserved || !settled {
			t.Errorf("ledger = %+v, want a transcribe reservation and its settlement at about $0.04 (4 s at a cent a second)", readLedger(t, data))
		}
	})

	t.Run("over speech.maxDuration", func(t *testing.T) {
		trig := fake.Post(tgMario.ID, tgMario.ID, "", telegramtest.WithVoice(note, 42))
		var answer string
		waitFor(t, "the answer", func() bool { answer = tgBotSays(fake, tgMario.ID, trig, "could not hear"); return answer != "" })
		if !strings.Contains(answer, "longer than the 0:20 limit") {
			t.Errorf("answer = %q, want the limit named", answer)
		}
		if n := len(sp.Transcriptions()); n != 1 {
			t.Errorf("transcriptions = %d, want still 1: a note over the limit is not sent", n)
		}
		// The answer is posted before its line is stored: the voice
		// message's line is there, wherever the answer's is yet.
		const named = "[a voice message of 0:42 that I could not transcribe: it is longer than the 0:20 limit (speech.maxDuration)]"
		found := false
		for _, l := range readChannelLog(t, data, "telegram", "555") {
			found = found || strings.Contains(l.Text, named)
		}
		if !found {
			t.Errorf("log.jsonl = %+v, want the voice message named with why", readChannelLog(t, data, "telegram", "555"))
		}
	})

	t.Run("over the channel's cap", func(t *testing.T) {
		trig := fake.Post(tgMario.ID, tgMario.ID, "", telegramtest.WithVoice(note, 4))
		var answer string
		waitFor(t, "the answer", func() bool { answer = tgBotSays(fake, tgMario.ID, trig, "could not hear"); return answer != "" })
		if !strings.Contains(answer, "spent $0.04 of $0.05 today (budgets.mother.channelDailyUSD)") {
			t.Errorf("answer = %q, want the cap's sentence", answer)
		}
		if n := len(sp.Transcriptions()); n != 1 {
			t.Errorf("transcriptions = %d, want still 1: a refused call is not sent", n)
		}
	})

	t.Run("speech server down", func(t *testing.T) {
		sp.Close()
		trig := fake.Post(tgGroup.ID, tgMario.ID, "@mother_bot", telegramtest.WithVoice(note, 4))
		var answer string
		waitFor(t, "the answer", func() bool { answer = tgBotSays(fake, tgGroup.ID, trig, "could not hear"); return answer != "" })
		if !strings.Contains(answer, "the speech server cannot be reached") {
			t.Errorf("answer = %q, want the server named as down", answer)
		}
		var charged bool
		for _, l := range readLedger(t, data) {
			charged = charged || (l.Kind == "transcribe" && l.Channel == "telegram/"+tgGroupID && l.Cost != 0)
		}
		if charged {
			t.Errorf("a transcription that failed on the server's side was charged")
		}
	})
}

// TestVoiceTelegramNoSpeechServer: without speech.transcribe, the voice
// note is kept and named to the model, which says so.
func TestVoiceTelegramNoSpeechServer(t *testing.T) {
	t.Parallel()
	note := speechtest.VoiceNote(t, voiceWords)
	model := voiceModel()
	defer model.Close()
	fake := newTelegramFake(t)
	data := t.TempDir()
	startDaemon(t, data, telegramConfig(fake, model))
	waitFor(t, "mother to connect", tgPolling(fake, 1))
	trig := fake.Post(tgMario.ID, tgMario.ID, "", telegramtest.WithVoice(note, 4))
	var answer string
	waitFor(t, "the answer", func() bool { answer = tgBotSays(fake, tgMario.ID, trig, "could not hear"); return answer != "" })
	if !strings.Contains(answer, "(no speech server is configured)") {
		t.Errorf("answer = %q, want the reason", answer)
	}
	logged := readChannelLog(t, data, "telegram", "555")
	if len(logged) == 0 || !strings.HasPrefix(logged[0].Text, "[a voice message of 0:0") || !strings.Contains(logged[0].Text, "that I could not transcribe: no speech server is configured]") {
		t.Errorf("log.jsonl = %+v, want the voice message named", logged)
	}
	if len(logged) == 0 || len(logged[0].Attachments) != 1 {
		t.Errorf("the voice note was not kept under attachments/")
	}
}

// withSpeech adds a speech server to cfg: whisper-1 at $0.60 a minute.
func withSpeech(cfg map[string]any, sp *speechtest.Server) map[string]any {
	cfg["providers"].(map[string]any)["openai"] = map[string]any{"whisper": map[string]any{"baseURL": sp.BaseURL()}}
	cfg["speech"] = map[string]any{"transcribe": map[string]any{"provider": "openai:whisper", "model": "whisper-1", "usdPerMinute": 0.6}}
	return cfg
}

// heardIn checks that the logged message with id carries the transcript
// and its audio, and that the speech server got the audio as a file
// named with ext.
func heardIn(t *testing.T, data, adapter, channel, id string, sp *speechtest.Server, audio []byte, ext, marker string) {
	t.Helper()
	var found bool
	for _, m := range readChannelLog(t, data, adapter, channel) {
		if m.ID != id {
			continue
		}
		found = true
		if !strings.Contains(m.Text, marker) || !strings.Contains(m.Text, voiceWords) {
			t.Errorf("logged text = %q, want the transcript marked %s", m.Text, marker)
		}
		if len(m.Attachments) != 1 || !m.Attachments[0].Voice {
			t.Errorf("attachments = %+v, want the audio, marked voice", m.Attachments)
		} else if b, err := os.ReadFile(filepath.Join(data, "workspace/channels", adapter, channel, m.Attachments[0].LocalPath)); err != nil || !bytes.Equal(b, audio) {
			t.Errorf("saved audio: %d bytes, %v; want the %d bytes sent", len(b), err, len(audio))
		}
	}
	if !found {
		t.Fatalf("message %s not in log.jsonl", id)
	}
	var sent bool
	for _, tr := range sp.Transcriptions() {
		sent = sent || (bytes.Equal(tr.Audio, audio) && strings.HasSuffix(tr.Filename, ext))
	}
	if !sent {
		t.Errorf("the speech server did not get the audio as a %s file (problems: %q)", ext, sp.Problems())
	}
}

// TestVoiceDiscord: a Discord voice message (IS_VOICE_MESSAGE, an OGG/Opus
// attachment with duration_secs on the CDN) and an MP3 audio file are
// heard.
func TestVoiceDiscord(t *testing.T) {
	t.Parallel()
	note := speechtest.Encoded(t, voiceWords, "voice-message.ogg")
	mp3 := speechtest.Encoded(t, voiceWords, "memo.mp3")
	sp := speechtest.New()
	defer sp.Close()
	sp.Hears(note, voiceWords)
	sp.Hears(mp3, voiceWords)
	model := voiceModel()
	defer model.Close()
	fake := newDiscordFake(t, 0)
	data := t.TempDir()
	startDaemon(t, data, withSpeech(discordConfig(fake, model), sp))
	fake.Wait(t, 15*time.Second, "mother on the gateway", func() bool { return fake.ConnectedLocked() == 1 })
	for _, c := range []struct {
		name  string
		audio []byte
		opt   discordtest.SayOption
		ext   string
		// marker: a voice message's length is known (duration_secs, the
		// OGG stream); an MP3's is not shown (Mother has no decoder).
		marker string
	}{
		{"voice message", note, discordtest.WithVoiceMessage(note, 4.2), ".ogg", "[voice 0:0"},
		{"audio file", mp3, discordtest.WithAttachment("memo.mp3", "audio/mpeg", mp3), ".mp3", "[voice] "},
	} {
		t.Run(c.name, func(t *testing.T) {
			trig := fake.Say(dDMMario, dMario, "", c.opt)
			fake.Wait(t, 15*time.Second, "the answer", func() bool { return botReplyTo(fake, dDMMario, trig.ID, "Heard you: "+c.marker) != nil })
			heardIn(t, data, "discord", dDMMario, trig.ID, sp, c.audio, c.ext, c.marker)
		})
	}
}

// TestVoiceSlack: a Slack audio clip (media_display_type audio, duration_ms,
// AAC in MP4) downloaded from url_private_download with the bot token is
// heard.
func TestVoiceSlack(t *testing.T) {
	t.Parallel()
	clip := speechtest.Encoded(t, voiceWords, "audio_message.m4a")
	sp := speechtest.New()
	defer sp.Close()
	sp.Hears(clip, voiceWords)
	model := voiceModel()
	defer model.Close()
	fake := newSlackFake(t)
	data := t.TempDir()
	startDaemon(t, data, withSpeech(slackConfig(fake, model), sp))
	fake.Wait(t, 15*time.Second, "mother on the socket", func() bool { return fake.OpensLocked() == 1 })
	trig := fake.Post(sDMMario, sMario.ID, "", slacktest.WithAudioClip("audio_message.m4a", "audio/mp4", clip, 4200))
	fake.Wait(t, 15*time.Second, "the answer", func() bool { return slackAnswer(fake, sDMMario, trig.TS, "Heard you: [voice 0:05]") != nil })
	heardIn(t, data, "slack", sDMMario, trig.TS, sp, clip, ".m4a", "[voice 0:05]")
}

// TestVoiceSetupOffersASpeechServer: mother setup adds a speech server
// as it adds a tier, checked live (half a second of silence transcribed
// with the key and model given); a refused key writes nothing, and the
// configuration written passes --check-config.
func TestVoiceSetupOffersASpeechServer(t *testing.T) {
	t.Parallel()
	ol := ollamatest.New()
	defer ol.Close()
	ol.SetModels("qwen3:30b-a3b", "qwen3:14b")
	sp := speechtest.New()
	defer sp.Close()
	sp.SetKey("sk-speech-GOODKEY-1")
	base := []string{"setup", "--non-interactive", "--platforms", "none", "--ollama-url", ol.URL, "--speech-url", sp.BaseURL(), "--speech-endpoint", "whisper", "--speech-model", "Systran/faster-whisper-small"}
	data := t.TempDir()
	r := runMother(t, "", nil, append(base, "--speech-key", "sk-wrong", data)...)
	if r.code == 0 || !strings.Contains(r.stdout, "refused") {
		t.Errorf("a refused key: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(data, "config.json")); err == nil {
		t.Error("config.json written despite the refused key")
	}
	r = runMother(t, "", []string{"SPEECH_KEY=sk-speech-GOODKEY-1"}, append(base, "--speech-key-env", "SPEECH_KEY", data)...)
	if r.code != 0 || !strings.Contains(r.stdout, "✓ whisper at "+sp.BaseURL()+" transcribes with Systran/faster-whisper-small") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	trs := sp.Transcriptions()
	if len(trs) != 1 || trs[0].Filename != "silence.wav" || trs[0].Model != "Systran/faster-whisper-small" {
		t.Errorf("the check sent %+v (problems %q), want silence.wav to the model", trs, sp.Problems())
	}
	cfg := readJSON(t, filepath.Join(data, "config.json"))
	if get(cfg, "providers", "openai", "whisper", "baseURL") != sp.BaseURL() || get(cfg, "providers", "openai", "whisper", "apiKeyEnv") != "SPEECH_KEY" ||
		get(cfg, "speech", "transcribe", "provider") != "openai:whisper" || get(cfg, "speech", "transcribe", "model") != "Systran/faster-whisper-small" {
		t.Errorf("config: %v", cfg)
	}
	if r := runMother(t, "", []string{"SPEECH_KEY=x"}, "--check-config", data); r.code != 0 {
		t.Fatalf("mother --check-config = %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestVoiceTelegramAnswersAloud: in a channel with voiceOut, the answer
// to a voice message is also sent with sendVoice, as the OGG/Opus audio
// the speech server made from the answer's words (response_format
// opus), metered as kind speech; a typed message gets text only.
func TestVoiceTelegramAnswersAloud(t *testing.T) {
	t.Parallel()
	note := speechtest.VoiceNote(t, voiceWords)
	aloud := speechtest.VoiceNote(t, "Heard you.")
	sp := speechtest.New()
	defer sp.Close()
	sp.Hears(note, voiceWords)
	sp.Speaks(aloud)
	model := voiceModel()
	defer model.Close()
	fake := newTelegramFake(t)
	data := t.TempDir()
	cfg := withSpeech(telegramConfig(fake, model), sp)
	sc := cfg["speech"].(map[string]any)
	sc["speak"] = map[string]any{"provider": "openai:whisper", "model": "tts-1", "voice": "alloy", "usdPerMillionChars": 15}
	sc["channels"] = map[string]any{"telegram/555": map[string]any{"voiceOut": true}}
	startDaemon(t, data, cfg)
	waitFor(t, "mother to connect", tgPolling(fake, 1))

	typed := fake.Post(tgMario.ID, tgMario.ID, "hello in writing")
	waitFor(t, "the typed answer", func() bool { return tgBotSays(fake, tgMario.ID, typed, "ok") != "" })
	trig := fake.Post(tgMario.ID, tgMario.ID, "", telegramtest.WithVoice(note, 4))
	var voice *telegramtest.Upload
	waitFor(t, "the voice answer", func() bool {
		for _, u := range fake.Uploads() {
			if u.Method == "sendVoice" && u.Chat == tgMario.ID {
				voice = &u
				return true
			}
		}
		return false
	})
	if tgBotSays(fake, tgMario.ID, trig, "Heard you") == "" {
		t.Errorf("no text answer beside the voice answer")
	}
	if !bytes.Equal(voice.Data, aloud) || voice.ReplyTo != trig || voice.Duration < 1 {
		t.Errorf("sendVoice: %d bytes, reply to %d, duration %d; want the server's %d bytes answering %d with its length", len(voice.Data), voice.ReplyTo, voice.Duration, len(aloud), trig)
	}
	calls := sp.SpeechCalls()
	if len(calls) != 1 || calls[0].Format != "opus" || calls[0].Voice != "alloy" || calls[0].Model != "tts-1" || !strings.HasPrefix(calls[0].Input, "Heard you: [voice 0:0") {
		t.Errorf("speech calls = %+v, want one: the answer's words, opus, alloy, tts-1 (the typed message gets none)", calls)
	}
	var metered bool
	for _, l := range readLedger(t, data) {
		metered = metered || (l.Kind == "speech" && l.Channel == "telegram/555" && l.Model == "tts-1" && l.Cost > 0)
	}
	if !metered {
		t.Errorf("ledger = %+v, want a speech settlement", readLedger(t, data))
	}
}
