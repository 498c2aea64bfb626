package discord

import (
	"bytes"
	"encoding/base64"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/discord/discordtest"
	"github.com/mother-chat/mother/pkg/speech/speechtest"
)

// TestVoiceAnswerOut: a voice answer goes as Discord's clients send a
// voice message (the fake refuses anything else): the IS_VOICE_MESSAGE
// flag, no text, one OGG/Opus attachment with duration_secs and a
// waveform, answering the message it is for.
func TestVoiceAnswerOut(t *testing.T) {
	t.Parallel()
	note := speechtest.VoiceNote(t, "Your plants are watered, and the cat is fed.")
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{})
	f.start()
	trig := fake.Say(general, discordtest.User{ID: "300000000000000001", Username: "mario"}, "hello")
	if _, err := f.a.SendVoice(t.Context(), general, trig.ID, bytes.NewReader(note)); err != nil {
		t.Fatal(err)
	}
	var voice *discordtest.Message
	fake.Wait(t, 10*time.Second, "the voice message", func() bool {
		for _, m := range fake.MessagesLocked(general) {
			if m.Flags&(1<<13) != 0 {
				voice = m
				return true
			}
		}
		return false
	})
	if len(voice.Files) != 1 || !bytes.Equal(voice.Files[0].Data, note) || voice.Content != "" || voice.ReplyTo != trig.ID {
		t.Fatalf("voice message = %q, %d files, reply to %q; want the note alone answering %s", voice.Content, len(voice.Files), voice.ReplyTo, trig.ID)
	}
	at := voice.Attachments[0]
	wf, _ := base64.StdEncoding.DecodeString(at.Waveform)
	if at.DurationSecs < 2 || at.DurationSecs > 6 || len(wf) != 256 || bytes.Count(wf, []byte{0}) == len(wf) {
		t.Errorf("attachment: %.2f s, waveform of %d samples (%v); want the note's length and a curve", at.DurationSecs, len(wf), wf[:min(16, len(wf))])
	}
}
