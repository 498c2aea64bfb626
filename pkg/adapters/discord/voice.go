package discord

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/textproto"
	"os"

	"github.com/bwmarrin/discordgo"

	"github.com/mother-chat/mother/pkg/adapters/internal/upload"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/speech"
)

var _ chat.VoiceSender = (*Adapter)(nil)

// maxVoiceOut bounds a voice answer.
const maxVoiceOut = 10 << 20

// voiceAttachment is a voice message's one attachment, as Discord's
// clients send it in payload_json.
type voiceAttachment struct {
	ID           string  `json:"id"`
	Filename     string  `json:"filename"`
	DurationSecs float64 `json:"duration_secs"`
	Waveform     string  `json:"waveform"`
}

// SendVoice implements chat.VoiceSender: a voice message as Discord's
// clients send one, the IS_VOICE_MESSAGE flag (1<<13), no text and one
// OGG/Opus attachment, voice-message.ogg, with its duration and a
// waveform (256 samples: speech.OpusWaveform), answering replyTo.
func (a *Adapter) SendVoice(ctx context.Context, channelID, replyTo string, audio io.Reader) (string, error) {
	tmp, err := os.CreateTemp("", "mother-discord-voice-*.ogg")
	if err != nil {
		return "", fmt.Errorf("discord: send voice: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	n, err := io.Copy(tmp, io.LimitReader(audio, maxVoiceOut+1))
	if err != nil {
		return "", fmt.Errorf("discord: send voice: %w", err)
	}
	if n > maxVoiceOut {
		return "", fmt.Errorf("discord: send voice: over %d bytes", maxVoiceOut)
	}
	data := make([]byte, n)
	if _, err := tmp.ReadAt(data, 0); err != nil {
		return "", fmt.Errorf("discord: send voice: %w", err)
	}
	d, err := speech.OggDuration(data)
	if err != nil {
		return "", fmt.Errorf("discord: send voice: %w", err)
	}
	payload := map[string]any{
		"flags":            discordgo.MessageFlagsIsVoiceMessage,
		"allowed_mentions": allowNone(),
		"attachments": []voiceAttachment{{ID: "0", Filename: "voice-message.ogg", DurationSecs: d.Seconds(),
			Waveform: base64.StdEncoding.EncodeToString(speech.OpusWaveform(data, 256))}},
	}
	if replyTo != "" {
		payload["message_reference"] = map[string]any{"message_id": replyTo, "fail_if_not_exists": false}
	}
	pj, err := discordgo.Marshal(payload)
	if err != nil {
		return "", err
	}
	ph := textproto.MIMEHeader{}
	ph.Set("Content-Disposition", `form-data; name="payload_json"`)
	ph.Set("Content-Type", "application/json")
	fh := textproto.MIMEHeader{}
	fh.Set("Content-Disposition", `form-data; name="files[0]"; filename="voice-message.ogg"`)
	fh.Set("Content-Type", "audio/ogg")
	body, err := upload.NewBody([]upload.Part{{Header: ph, Data: pj}}, fh, tmp, n)
	if err != nil {
		return "", fmt.Errorf("discord: send voice: %w", err)
	}
	err = a.retry(ctx, func() error { return rateLimited(a.sendBody(ctx, channelID, body)) })
	if err != nil {
		return "", fmt.Errorf("discord: send voice to %s: %w", channelID, err)
	}
	return "", nil
}
