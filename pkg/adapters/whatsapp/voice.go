package whatsapp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"google.golang.org/protobuf/proto"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/speech"
)

var _ chat.VoiceSender = (*Adapter)(nil)

// maxVoiceOut bounds a voice answer.
const maxVoiceOut = 16 << 20

// SendVoice implements chat.VoiceSender: the OGG/Opus audio as a voice
// note (PTT, "audio/ogg; codecs=opus", with its seconds read from the
// stream), encrypted and uploaded by the library as its images are.
// replyTo is not quoted (a quote needs the quoted message's sender).
func (a *Adapter) SendVoice(ctx context.Context, channelID, _ string, audio io.Reader) (string, error) {
	to, err := parseChannel(channelID)
	if err != nil {
		return "", fmt.Errorf("whatsapp: send voice: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(audio, maxVoiceOut+1))
	if err != nil {
		return "", fmt.Errorf("whatsapp: send voice: %w", err)
	}
	if len(data) > maxVoiceOut {
		return "", fmt.Errorf("whatsapp: send voice: over %d bytes", maxVoiceOut)
	}
	var secs uint32
	if d, err := speech.OggDuration(data); err == nil {
		secs = uint32(max(int(d.Seconds()+0.5), 1))
	}
	a.mu.Lock()
	cli := a.client
	a.mu.Unlock()
	if cli == nil {
		return "", errors.New("whatsapp: not started")
	}
	var id string
	err = a.retry(ctx, func() error {
		tmp, err := os.CreateTemp("", "mother-whatsapp-voice-*")
		if err != nil {
			return err
		}
		defer os.Remove(tmp.Name())
		defer tmp.Close()
		up, err := cli.UploadReader(ctx, bytes.NewReader(data), tmp, whatsmeow.MediaAudio)
		if err != nil {
			return a.rateLimited(fmt.Errorf("whatsapp: send voice: %w", err))
		}
		msg := &waE2E.Message{AudioMessage: &waE2E.AudioMessage{
			PTT: proto.Bool(true), Mimetype: proto.String("audio/ogg; codecs=opus"), Seconds: proto.Uint32(secs),
			URL: proto.String(up.URL), DirectPath: proto.String(up.DirectPath), MediaKey: up.MediaKey,
			FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: proto.Uint64(up.FileLength),
		}}
		id, err = a.sendMessage(ctx, to, msg)
		if err != nil {
			return fmt.Errorf("whatsapp: send voice to %s: %w", channelID, err)
		}
		return nil
	})
	return id, err
}
