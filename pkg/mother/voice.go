package mother

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/speech"
)

// Ears hear voice messages: the broker's metered transcription
// (speech.transcribe with its fallbacks), charged to the channel's and
// the person's caps as Mother's own calls are.
type Ears interface {
	// Transcribe returns the text of req for a message in channel
	// (qualified) from user (the adapter's user id); an error matching
	// model.ErrBudgetExhausted when a cap refuses it.
	Transcribe(ctx context.Context, channel, adapter, user string, req model.TranscribeRequest) (string, error)
	// Speak says text through speech.speak as OGG/Opus, metered the
	// same way.
	Speak(ctx context.Context, channel, adapter, user, text string) (io.ReadCloser, error)
}

// errNoEars: no speech server is configured (Options.Ears nil or config
// without speech.transcribe).
var errNoEars = errors.New("no speech server is configured")

// hear turns each voice attachment of msg (a voice message or an audio
// file a person sent) into words the model reads as the user's: the
// transcript, marked "[voice 0:42] …", goes into the message's text
// before it is logged, so history and search find it; the audio stays
// under attachments/. A voice message Mother cannot hear (no speech
// server, the server down, a cap reached, longer than
// speech.maxDuration) is named instead, with why, so the model can tell
// the person. Bots' messages are not heard; Deliver does not ask for
// refused DMs or people who may not talk. dir is the channel's directory.
func (m *Mother) hear(ctx context.Context, adapter, dir string, msg *chat.ChannelMessage, lg *slog.Logger) {
	if msg.Sender.IsBot {
		return
	}
	for _, att := range msg.Attachments {
		if !att.Voice {
			continue
		}
		words := m.hearOne(ctx, adapter, dir, msg, att, lg)
		if strings.TrimSpace(msg.Text) == "" {
			msg.Text = words
		} else {
			msg.Text += "\n" + words
		}
	}
}

// hearOne is what the model reads of one voice attachment.
func (m *Mother) hearOne(ctx context.Context, adapter, dir string, msg *chat.ChannelMessage, att chat.ChannelAttachment, lg *slog.Logger) string {
	audio, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(att.LocalPath)))
	if err != nil {
		lg.Warn("cannot read a voice message", "path", att.LocalPath, "err", err)
		return speech.CannotHear(seconds(att.Seconds), "its file could not be read")
	}
	// shown is the length the model reads (0: unknown); d what the call
	// is reserved and charged for.
	shown := seconds(att.Seconds)
	if od, err := speech.OggDuration(audio); err == nil && od > shown {
		// The stream's own length: what the server bills, whatever the
		// platform said.
		shown = od
	}
	d := shown
	if d == 0 {
		// Neither the platform nor the file says: bound it by its size
		// (the codecs of voice notes carry at least 8 kbit/s, 1 KB a
		// second), and show no length.
		d = time.Duration(len(audio)/1000+1) * time.Second
	}
	limit := m.cfg.Speech.MaxDuration.Duration
	if limit > 0 && d > limit {
		lg.Info("voice message over speech.maxDuration not transcribed", "seconds", d.Seconds())
		return speech.CannotHear(shown, fmt.Sprintf("it is longer than the %s limit (speech.maxDuration)", speech.Format(limit)))
	}
	if m.ears == nil || !m.cfg.Speech.Hears() {
		return speech.CannotHear(shown, errNoEars.Error())
	}
	qid := chat.QualifiedID(adapter, msg.ChannelID)
	req := model.TranscribeRequest{
		Filename: strings.TrimSuffix(att.Filename, filepath.Ext(att.Filename)) + speech.Ext(att.Filename, att.MimeType),
		Audio:    audio,
		Language: m.cfg.Speech.Channel(qid).Language,
		Duration: d,
	}
	text, err := m.ears.Transcribe(ctx, qid, adapter, msg.Sender.ID, req)
	if err != nil {
		lg.Warn("voice message not transcribed", "err", err)
		return speech.CannotHear(shown, cannotHearWhy(err))
	}
	if text == "" {
		text = "(no words heard)"
	}
	return speech.Heard(shown, text)
}

// cannotHearWhy says why a transcription failed, for the model and so for
// the person: plain words, no error chain.
func cannotHearWhy(err error) string {
	var s model.Sentencer
	switch {
	case errors.Is(err, errNoEars) || strings.Contains(err.Error(), errNoEars.Error()):
		return errNoEars.Error()
	case errors.Is(err, model.ErrBudgetExhausted) && errors.As(err, &s):
		return strings.TrimSuffix(s.Sentence(), ".")
	case errors.Is(err, model.ErrBusy):
		return "calls in flight hold what is left of the budget"
	case errors.Is(err, model.ErrUnreachable):
		return "the speech server cannot be reached (it may be down)"
	case errors.Is(err, model.ErrOverloaded):
		return "the speech server is overloaded"
	case errors.Is(err, model.ErrModelNotFound):
		return "the speech server does not have the configured model"
	case errors.Is(err, context.DeadlineExceeded):
		return "the speech server took too long"
	}
	return "the speech server failed (the details are in Mother's log)"
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// speak also sends the answer final to a voice message as a voice message,
// where the channel has speech.channels.<id>.voiceOut and the adapter can
// (chat.VoiceSender). The text answer is posted already: a voice answer
// that fails is logged, and the person has the text.
func (m *Mother) speak(ctx context.Context, a chat.Adapter, job Job, final string, lg *slog.Logger) {
	if job.kind() != KindMessage || m.ears == nil || !m.cfg.Speech.Speaks() {
		return
	}
	qid := chat.QualifiedID(a.Name(), job.Trigger.ChannelID)
	if !m.cfg.Speech.Channel(qid).VoiceOut || !hasVoice(job.Trigger) {
		return
	}
	vs, ok := a.(chat.VoiceSender)
	if !ok {
		lg.Warn("speech.channels voiceOut is set, but this adapter cannot send voice messages")
		return
	}
	text := plainSpeech(final)
	if text == "" {
		return
	}
	audio, err := m.ears.Speak(ctx, qid, a.Name(), job.Trigger.Sender.ID, text)
	if err != nil {
		lg.Warn("voice answer not made", "err", err)
		return
	}
	defer audio.Close()
	if _, err := vs.SendVoice(ctx, job.Trigger.ChannelID, job.Trigger.ID, audio); err != nil {
		lg.Warn("voice answer not sent", "err", err)
		return
	}
	lg.Info("voice answer sent", "chars", len(text))
}

func hasVoice(msg chat.ChannelMessage) bool {
	for _, att := range msg.Attachments {
		if att.Voice {
			return true
		}
	}
	return false
}

// plainSpeech is markdown as it is read aloud: no emphasis marks, code
// fences, heading marks or link targets.
func plainSpeech(md string) string {
	var out []string
	for _, line := range strings.Split(md, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "```") {
			continue
		}
		t = strings.TrimLeft(t, "#>-* ")
		out = append(out, t)
	}
	s := strings.Join(out, "\n")
	s = linkRe.ReplaceAllString(s, "$1")
	s = strings.NewReplacer("**", "", "__", "", "`", "", "~~", "").Replace(s)
	return strings.TrimSpace(s)
}

var linkRe = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
