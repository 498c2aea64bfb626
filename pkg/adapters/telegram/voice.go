package telegram

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/speech"
)

var _ chat.VoiceSender = (*Adapter)(nil)

// maxVoiceOut bounds a voice answer (Telegram plays voice notes up to
// 1 MB inline; larger ones still go, up to this).
const maxVoiceOut = 20 << 20

// SendVoice implements chat.VoiceSender: sendVoice with the OGG/Opus
// audio as a voice note (with its length, read from the stream), in
// answer to replyTo.
func (a *Adapter) SendVoice(ctx context.Context, channelID, replyTo string, audio io.Reader) (string, error) {
	chatID, topic, err := parseChannel(channelID)
	if err != nil {
		return "", fmt.Errorf("telegram: send voice: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(audio, maxVoiceOut+1))
	if err != nil {
		return "", fmt.Errorf("telegram: send voice: %w", err)
	}
	if len(data) > maxVoiceOut {
		return "", fmt.Errorf("telegram: send voice: over %d bytes", maxVoiceOut)
	}
	p := &bot.SendVoiceParams{ChatID: chatID, MessageThreadID: topic}
	if d, err := speech.OggDuration(data); err == nil {
		p.Duration = max(int(d.Seconds()+0.5), 1)
	}
	if id, err := strconv.Atoi(replyTo); err == nil && id > 0 {
		p.ReplyParameters = &models.ReplyParameters{MessageID: id, AllowSendingWithoutReply: true}
	}
	var sent *models.Message
	err = a.retry(ctx, func() error {
		if err := a.groups.wait(ctx, chatID); err != nil {
			return err
		}
		p.Voice = &models.InputFileUpload{Filename: "answer.ogg", Data: bytes.NewReader(data)}
		m, err := a.bot.SendVoice(ctx, p)
		if err != nil {
			return rateLimited(fmt.Errorf("telegram: send voice to %s: %w", channelID, err))
		}
		sent = m
		return nil
	})
	if err != nil || sent == nil {
		return "", err
	}
	return strconv.Itoa(sent.ID), nil
}
