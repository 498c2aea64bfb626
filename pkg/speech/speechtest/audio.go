package speechtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// need skips t when a tool is missing, or fails it under CI=true (where
// .ci/ensure-tools installs them).
func need(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is missing (apt-get install -y espeak-ng opus-tools ffmpeg; .ci/ensure-tools installs them)", tool)
			}
			t.Skipf("%s is missing: voice tests need espeak-ng, opus-tools and ffmpeg (.ci/ensure-tools installs them)", tool)
		}
	}
}

// Speech is text said by espeak-ng, as a WAV file.
func Speech(t testing.TB, text string) []byte {
	t.Helper()
	need(t, "espeak-ng")
	dir := t.TempDir()
	wav := filepath.Join(dir, "speech.wav")
	run(t, "espeak-ng", "-v", "en", "-w", wav, text)
	b, err := os.ReadFile(wav)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// VoiceNote is text said by espeak-ng and encoded as the voice notes of
// Telegram and WhatsApp are: OGG/Opus, mono, 48 kHz (opusenc).
func VoiceNote(t testing.TB, text string) []byte {
	t.Helper()
	need(t, "espeak-ng", "opusenc")
	dir := t.TempDir()
	wav := filepath.Join(dir, "speech.wav")
	if err := os.WriteFile(wav, Speech(t, text), 0o600); err != nil {
		t.Fatal(err)
	}
	ogg := filepath.Join(dir, "voice.ogg")
	run(t, "opusenc", "--quiet", "--downmix-mono", "--bitrate", "24", wav, ogg)
	b, err := os.ReadFile(ogg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Encoded is text said by espeak-ng and encoded by ffmpeg into the file
// name's format ("clip.m4a": AAC in MP4, as Slack's and Discord's clients
// record; "voice.ogg": OGG/Opus; "song.mp3").
func Encoded(t testing.TB, text, name string) []byte {
	t.Helper()
	need(t, "espeak-ng", "ffmpeg")
	dir := t.TempDir()
	wav := filepath.Join(dir, "speech.wav")
	if err := os.WriteFile(wav, Speech(t, text), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	args := []string{"-nostdin", "-loglevel", "error", "-i", wav, "-ac", "1"}
	if filepath.Ext(name) == ".ogg" {
		args = append(args, "-c:a", "libopus", "-ar", "48000")
	}
	run(t, "ffmpeg", append(args, out)...)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}
