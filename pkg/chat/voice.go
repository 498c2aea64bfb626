package chat

import (
	"context"
	"io"
)

// VoiceSender is an adapter that can post a voice message: audio in
// OGG/Opus (what a speech server gives for response_format "opus", and
// what voice notes are on Telegram and WhatsApp), as an answer to the
// message replyTo (empty: none). Mother uses it for the voice answers of
// channels with speech.channels.<id>.voiceOut.
type VoiceSender interface {
	SendVoice(ctx context.Context, channelID, replyTo string, audio io.Reader) (string, error)
}
