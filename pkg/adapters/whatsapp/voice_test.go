package whatsapp

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.mau.fi/whatsmeow/proto/waE2E"
	"google.golang.org/protobuf/proto"

	"github.com/mother-chat/mother/pkg/speech/speechtest"
)

// TestVoiceNoteIn: a WhatsApp voice note (PTT, OGG/Opus made by espeak-ng
// and opusenc, downloaded and checked as the library does) is kept under
// attachments/ and marked as voice with its seconds, for Mother to hear.
func TestVoiceNoteIn(t *testing.T) {
	t.Parallel()
	note := speechtest.VoiceNote(t, "Please call me back after lunch.")
	a, f, st := newTestAdapter(t, nil)
	in := start(t, a)
	path, sum := f.addMedia(note)
	f.post(userMsg(mario, mario, &waE2E.Message{AudioMessage: &waE2E.AudioMessage{
		PTT: proto.Bool(true), Seconds: proto.Uint32(3), Mimetype: proto.String("audio/ogg; codecs=opus"),
		DirectPath: proto.String(path), FileSHA256: sum, FileLength: proto.Uint64(uint64(len(note))), MediaKey: make([]byte, 32),
	}}), false)
	m, _ := in.wait(t, "")
	if len(m.Attachments) != 1 {
		t.Fatalf("voice note delivered as %q, %+v; want one attachment", m.Text, m.Attachments)
	}
	att := m.Attachments[0]
	if !att.Voice || att.Seconds != 3 || !strings.HasPrefix(att.Filename, "voice-") || !strings.HasSuffix(att.Filename, ".ogg") {
		t.Errorf("attachment = %+v, want voice-….ogg marked voice, 3 s", att)
	}
	if strings.Contains(m.Text, "voice message") {
		t.Errorf("text = %q, want no note: the voice note was kept", m.Text)
	}
	dir, _ := st.AdapterFiles("wa").ChannelDir(ChannelID(mario))
	if got, err := os.ReadFile(filepath.Join(dir, att.LocalPath)); err != nil || !bytes.Equal(got, note) {
		t.Errorf("saved voice note = %d bytes, %v; want the note's %d", len(got), err, len(note))
	}
}

// TestVoiceAnswerOut: a voice answer goes as a voice note (PTT, OGG/Opus,
// with its seconds), uploaded through the library's encrypted media flow.
func TestVoiceAnswerOut(t *testing.T) {
	t.Parallel()
	note := speechtest.VoiceNote(t, "Your plants are watered.")
	a, f, _ := newTestAdapter(t, nil)
	start(t, a)
	if _, err := a.SendVoice(t.Context(), ChannelID(mario), "", bytes.NewReader(note)); err != nil {
		t.Fatal(err)
	}
	sent := f.chat(mario)
	if len(sent) != 1 || sent[0].Msg.GetAudioMessage() == nil {
		t.Fatalf("sent %+v, want one audio message", sent)
	}
	au := sent[0].Msg.GetAudioMessage()
	if !au.GetPTT() || au.GetMimetype() != "audio/ogg; codecs=opus" || au.GetSeconds() < 1 || au.GetFileLength() != uint64(len(note)) || len(au.GetMediaKey()) != 32 {
		t.Errorf("voice note sent as %v", au)
	}
	f.mu.Lock()
	uploaded := f.media[au.GetDirectPath()]
	f.mu.Unlock()
	if !bytes.Equal(uploaded, note) {
		t.Errorf("uploaded %d bytes, want the note's %d", len(uploaded), len(note))
	}
}
