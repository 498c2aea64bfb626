package slack

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mother-chat/mother/pkg/chat"
)

var _ chat.VoiceSender = (*Adapter)(nil)

// maxVoiceOut bounds a voice answer.
const maxVoiceOut = 20 << 20

// SendVoice implements chat.VoiceSender: Slack has no voice-note upload
// for bots, so the OGG/Opus audio goes as a file, answer.ogg, through
// files.uploadV2 into the channel (Slack's clients play it inline).
func (a *Adapter) SendVoice(ctx context.Context, channelID, _ string, audio io.Reader) (string, error) {
	dir, err := os.MkdirTemp("", "mother-slack-voice-*")
	if err != nil {
		return "", fmt.Errorf("slack: send voice: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "answer.ogg")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("slack: send voice: %w", err)
	}
	n, err := io.Copy(f, io.LimitReader(audio, maxVoiceOut+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("slack: send voice: %w", err)
	}
	if n > maxVoiceOut {
		return "", fmt.Errorf("slack: send voice: over %d bytes", maxVoiceOut)
	}
	return "", a.Upload(ctx, channelID, path, "answer.ogg")
}
