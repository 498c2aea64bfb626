package speech_test

import (
	"errors"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/speech"
	"github.com/mother-chat/mother/pkg/speech/speechtest"
)

// TestVoiceOggDuration times real voice notes (espeak-ng, then opusenc and
// ffmpeg) by their last granule position, as ffprobe would.
func TestVoiceOggDuration(t *testing.T) {
	text := "Hello Mother, please remind me to water the plants tomorrow morning."
	wav := speechtest.Speech(t, text)
	// espeak-ng writes 22050 Hz 16-bit mono: the WAV's data is the truth.
	want := time.Duration(float64(len(wav)-44) / 2 / 22050 * float64(time.Second))
	for name, data := range map[string][]byte{
		"opusenc": speechtest.VoiceNote(t, text),
		"ffmpeg":  speechtest.Encoded(t, text, "voice.ogg"),
	} {
		got, err := speech.OggDuration(data)
		if err != nil {
			t.Fatalf("%s: OggDuration: %v", name, err)
		}
		if diff := got - want; diff < -60*time.Millisecond || diff > 60*time.Millisecond {
			t.Errorf("%s: OggDuration = %v, want %v (the WAV's length)", name, got, want)
		}
	}
	if _, err := speech.OggDuration(wav); !errors.Is(err, speech.ErrNotOgg) {
		t.Errorf("OggDuration(WAV) = %v, want ErrNotOgg", err)
	}
	if _, err := speech.OggDuration(nil); !errors.Is(err, speech.ErrNotOgg) {
		t.Errorf("OggDuration(nil) = %v, want ErrNotOgg", err)
	}
}

func TestVoiceFormat(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0:00", 300 * time.Millisecond: "0:01", 42 * time.Second: "0:42", 12*time.Minute + 5*time.Second: "12:05", time.Hour + 2*time.Minute + 3*time.Second: "1:02:03",
	} {
		if got := speech.Format(d); got != want {
			t.Errorf("Format(%v) = %q, want %q", d, got, want)
		}
	}
}
