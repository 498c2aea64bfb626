package setup

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/openai"
)

// DefaultSpeechModel is the transcription model setup proposes.
const DefaultSpeechModel = "whisper-1"

// speech offers a speech server, as tier offers a model server: an
// OpenAI-compatible endpoint with POST /v1/audio/transcriptions (whisper.cpp's
// server, faster-whisper behind an OpenAI-compatible API, vLLM, OpenAI),
// checked live by transcribing half a second of silence, and written as
// providers.openai.<name> and speech.transcribe.
func (r *run) speech() error {
	base := r.f.SpeechURL
	var err error
	if base == "" {
		if !r.o.Interactive {
			return nil
		}
		r.section("A speech server (optional)")
		add, err := r.p.yes("Add a speech server so Mother hears voice messages (whisper.cpp's server, faster-whisper, vLLM, OpenAI)?", false)
		if err != nil || !add {
			return err
		}
		if base, err = r.p.ask("Base URL, with its /v1", "http://127.0.0.1:8000/v1"); err != nil {
			return err
		}
	} else {
		r.section("A speech server")
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL such as http://127.0.0.1:8000/v1", base)
	}
	name := r.f.SpeechEndpoint
	if name == "" {
		name = "speech"
		if r.o.Interactive {
			if name, err = r.p.ask("A name for this server", name); err != nil {
				return err
			}
		}
	}
	if msg := config.ValidName(name); msg != "" {
		return fmt.Errorf("server name %q %s", name, msg)
	}
	id := r.f.SpeechModel
	if id == "" {
		id = orDefault(r.cfg.str("speech", "transcribe", "model"), DefaultSpeechModel)
		if r.o.Interactive {
			if id, err = r.p.ask("Transcription model (whisper-1, Systran/faster-whisper-small, ...)", id); err != nil {
				return err
			}
		}
	}
	key, keyEnv := r.f.SpeechKey, r.f.SpeechKeyEnv
	if key == "" && keyEnv == "" && r.o.Interactive {
		if key, err = r.p.secret("API key (enter for none: local servers want none)", ""); err != nil {
			return err
		}
	}
	if key == "" && keyEnv != "" {
		key = r.o.Getenv(keyEnv)
	}
	switch err := checkSpeech(r.ctx, name, base, key, id); {
	case err == nil:
		r.say("  ✓ %s at %s transcribes with %s", name, base, id)
	case errors.Is(err, model.ErrAuth):
		r.say("  ✗ %v", err)
		return fmt.Errorf("%s: %v: %w", name, err, ErrNotVerified)
	default:
		r.say("  ✗ %v", err)
		r.say("  ! kept unchecked: start the speech server before Mother")
	}
	// An endpoint that is already a chat server keeps its settings.
	r.put(base, "providers", "openai", name, "baseURL")
	switch {
	case keyEnv != "":
		r.put(keyEnv, "providers", "openai", name, "apiKeyEnv")
	case key != "":
		r.put(key, "providers", "openai", name, "apiKey")
	}
	r.put("openai:"+name, "speech", "transcribe", "provider")
	r.put(id, "speech", "transcribe", "model")
	r.say("  ✓ voice messages heard by openai:%s/%s", name, id)
	return nil
}

// checkSpeech transcribes half a second of silence (a WAV made here) on
// the server: what a voice message will meet, key and model included.
func checkSpeech(ctx context.Context, name, base, key, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	p, err := openai.New(openai.Options{Name: "openai:" + name, BaseURL: base, APIKey: key})
	if err != nil {
		return err
	}
	_, err = p.Transcribe(ctx, model.TranscribeRequest{Model: id, Filename: "silence.wav", Audio: silence(16000, 500*time.Millisecond), Duration: 500 * time.Millisecond})
	if err != nil && strings.Contains(err.Error(), "404") {
		return fmt.Errorf("%w (does the server take POST %s/audio/transcriptions?)", err, strings.TrimRight(base, "/"))
	}
	return err
}

// silence is d of 16-bit mono PCM silence at rate, as a WAV file.
func silence(rate int, d time.Duration) []byte {
	n := int(int64(rate) * int64(d) / int64(time.Second))
	b := make([]byte, 44+2*n)
	copy(b, "RIFF")
	binary.LittleEndian.PutUint32(b[4:], uint32(36+2*n))
	copy(b[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(b[16:], 16)
	binary.LittleEndian.PutUint16(b[20:], 1) // PCM
	binary.LittleEndian.PutUint16(b[22:], 1) // mono
	binary.LittleEndian.PutUint32(b[24:], uint32(rate))
	binary.LittleEndian.PutUint32(b[28:], uint32(2*rate))
	binary.LittleEndian.PutUint16(b[32:], 2)
	binary.LittleEndian.PutUint16(b[34:], 16)
	copy(b[36:], "data")
	binary.LittleEndian.PutUint32(b[40:], uint32(2*n))
	return b
}
