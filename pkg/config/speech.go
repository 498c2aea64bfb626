package config

import (
	"fmt"
	"strings"
	"time"
)

// Speech is how Mother hears voice messages and, where a channel wants it,
// answers them aloud: a speech server that speaks OpenAI's audio API
// (POST /v1/audio/transcriptions and /v1/audio/speech: whisper.cpp's
// server, faster-whisper behind an OpenAI-compatible API, vLLM, OpenAI),
// named as an endpoint of providers.openai. docs/configuration.md#voice-messages
// says more.
type Speech struct {
	// Transcribe is the speech-to-text model; without one, a voice
	// message is named to the model ("a voice message of 0:42 that I
	// could not transcribe: no speech server is configured").
	Transcribe SpeechModel `json:"transcribe"`
	// Speak is the text-to-speech model of voice answers (channels with
	// voiceOut).
	Speak SpeechVoice `json:"speak"`
	// MaxDuration is the longest voice message transcribed (default 5m);
	// a longer one is named, not sent.
	MaxDuration Duration `json:"maxDuration"`
	// Channels are per-channel settings, keyed by the qualified channel
	// id ("telegram/-1009876543210").
	Channels map[string]SpeechChannel `json:"channels"`
}

// SpeechModel is a transcription model with its fallbacks.
type SpeechModel struct {
	// Provider is "openai:<name>" (or "openai") of providers.openai.
	Provider string `json:"provider"`
	// Model is the server's model id ("whisper-1", "Systran/faster-whisper-small").
	Model string `json:"model"`
	// USDPerMinute is what a minute of audio costs (0: free).
	USDPerMinute USD `json:"usdPerMinute"`
	// Fallbacks are tried in turn when the one before is down.
	Fallbacks []SpeechFallback `json:"fallbacks"`
}

// SpeechFallback is a transcription model that hears when the one before
// it cannot.
type SpeechFallback struct {
	Provider     string `json:"provider"`
	Model        string `json:"model"`
	USDPerMinute USD    `json:"usdPerMinute"`
}

// SpeechVoice is a text-to-speech model.
type SpeechVoice struct {
	// Provider is "openai:<name>" of providers.openai (empty: no voice
	// answers).
	Provider string `json:"provider"`
	// Model is the server's model id ("tts-1", "kokoro").
	Model string `json:"model"`
	// Voice is the server's voice name ("alloy").
	Voice string `json:"voice"`
	// USDPerMillionChars is what a million characters of text cost.
	USDPerMillionChars USD `json:"usdPerMillionChars"`
}

// SpeechChannel is one channel's voice settings.
type SpeechChannel struct {
	// Language is the ISO-639-1 hint sent with its voice messages ("de").
	Language string `json:"language"`
	// VoiceOut also sends an answer to a voice message as a voice message.
	VoiceOut bool `json:"voiceOut"`
}

// DefaultSpeechMaxDuration is speech.maxDuration's default.
const DefaultSpeechMaxDuration = 5 * time.Minute

func (c *Config) setSpeechDefaults() {
	if c.Speech.MaxDuration.Duration == 0 {
		c.Speech.MaxDuration = Dur(DefaultSpeechMaxDuration)
	}
	if c.Speech.Channels == nil {
		c.Speech.Channels = map[string]SpeechChannel{}
	}
}

// Hears reports whether a transcription model is configured.
func (s Speech) Hears() bool { return s.Transcribe.Provider != "" }

// Speaks reports whether a text-to-speech model is configured.
func (s Speech) Speaks() bool { return s.Speak.Provider != "" }

// Channel is the settings of the channel with qualified id qid (zero when
// it has none).
func (s Speech) Channel(qid string) SpeechChannel { return s.Channels[qid] }

// validateSpeech checks the speech table.
func (c *Config) validateSpeech(p *problems) {
	s := c.Speech
	checkEndpoint := func(field, provider string) {
		if !(provider == "openai" || strings.HasPrefix(provider, "openai:")) {
			p.bad(field, "%q: a speech server is an OpenAI-compatible endpoint of providers.openai, named \"openai:<name>\"", provider)
			return
		}
		if _, err := c.Providers.OpenAIEndpoint(provider); err != nil {
			p.bad(field, "%v", err)
		}
	}
	t := s.Transcribe
	if t.Provider != "" || t.Model != "" || len(t.Fallbacks) > 0 {
		checkEndpoint("speech.transcribe.provider", t.Provider)
		if t.Model == "" {
			p.bad("speech.transcribe.model", "missing (the server's model id, e.g. \"whisper-1\")")
		}
		if t.USDPerMinute < 0 {
			p.bad("speech.transcribe.usdPerMinute", "must not be negative")
		}
		for i, fb := range t.Fallbacks {
			f := fmt.Sprintf("speech.transcribe.fallbacks[%d]", i)
			checkEndpoint(f+".provider", fb.Provider)
			if fb.Model == "" {
				p.bad(f+".model", "missing")
			}
			if fb.USDPerMinute < 0 {
				p.bad(f+".usdPerMinute", "must not be negative")
			}
		}
	}
	v := s.Speak
	if v.Provider != "" || v.Model != "" || v.Voice != "" {
		checkEndpoint("speech.speak.provider", v.Provider)
		if v.Model == "" {
			p.bad("speech.speak.model", "missing (the server's model id, e.g. \"tts-1\")")
		}
		if v.Voice == "" {
			p.bad("speech.speak.voice", "missing (the server's voice, e.g. \"alloy\")")
		}
		if v.USDPerMillionChars < 0 {
			p.bad("speech.speak.usdPerMillionChars", "must not be negative")
		}
	}
	for _, qid := range sortedKeys(s.Channels) {
		f := "speech.channels." + qid
		adapter, ch, ok := strings.Cut(qid, "/")
		if !ok || adapter == "" || ch == "" {
			p.bad(f, "the key must be a qualified channel id \"<adapter>/<channel>\" (\"telegram/-1009876543210\")")
			continue
		}
		if _, known := c.Adapters[adapter]; !known {
			p.bad(f, "unknown adapter %q", adapter)
		}
		sc := s.Channels[qid]
		if l := sc.Language; l != "" && !validLanguage(l) {
			p.bad(f+".language", "%q is not an ISO-639-1 code such as \"en\" or \"de\"", l)
		}
		if sc.VoiceOut && !s.Speaks() {
			p.bad(f+".voiceOut", "needs speech.speak (a text-to-speech model)")
		}
	}
}

func validLanguage(l string) bool {
	if len(l) != 2 && len(l) != 3 {
		return false
	}
	for _, r := range l {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}
