package slack

import (
	"bytes"
	"testing"

	"github.com/mother-chat/mother/pkg/speech/speechtest"
)

// TestVoiceAnswerOut: a voice answer (OGG/Opus) is uploaded into the
// channel as answer.ogg through files.uploadV2.
func TestVoiceAnswerOut(t *testing.T) {
	t.Parallel()
	note := speechtest.VoiceNote(t, "Your plants are watered.")
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{})
	f.start()
	if _, err := f.a.SendVoice(t.Context(), general, "", bytes.NewReader(note)); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, up := range fake.Files() {
		found = found || (up.Channel == general && up.Name == "answer.ogg" && bytes.Equal(up.Data, note))
	}
	if !found {
		t.Errorf("files = %+v, want answer.ogg with the audio in %s", fake.Files(), general)
	}
}
