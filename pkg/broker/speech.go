package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
)

// Ledger kinds of Mother's speech calls: a transcription of a voice
// message and a voice answer, each reserved before it is sent and settled
// after, as her model calls are (older Mothers skip these kinds).
const (
	KindTranscribe        = "transcribe"
	KindTranscribeReserve = "transcribe-reserve"
	KindSpeech            = "speech"
	KindSpeechReserve     = "speech-reserve"
)

// ErrNoSpeechServer: config has no speech.transcribe (or speech.speak).
var ErrNoSpeechServer = errors.New("no speech server is configured")

// transcriptTokensPerSecond bounds a transcript's length in tokens (a
// byte each): speech runs at about 15 characters a second, and the
// whisper models decode at most 224 tokens per 30-second window.
const transcriptTokensPerSecond = 20

// speechKind reports whether kind is a speech call's line and whether it
// is its reservation.
func speechKind(kind string) (speech, reserve bool) {
	switch kind {
	case KindTranscribe, KindSpeech:
		return true, false
	case KindTranscribeReserve, KindSpeechReserve:
		return true, true
	}
	return false, false
}

// settleKind is the kind of the settlement of reservation kind k.
func settleKind(k string) string {
	switch k {
	case KindMotherReserve:
		return KindMother
	case KindTranscribeReserve:
		return KindTranscribe
	case KindSpeechReserve:
		return KindSpeech
	case KindEmbedReserve:
		return KindEmbed
	}
	return ""
}

// audioMicroUSD is what d of audio costs at perMinute, rounded up.
func audioMicroUSD(d time.Duration, perMinute config.USD) int64 {
	if perMinute <= 0 {
		return 0
	}
	return int64(math.Ceil(d.Seconds() * float64(perMinute.Micro()) / 60))
}

// audioSeconds is d in whole seconds, rounded up (servers bill by the
// second).
func audioSeconds(d time.Duration) int64 { return int64(math.Ceil(d.Seconds())) }

// speechTarget is one model a speech call may go to.
type speechTarget struct {
	provider, model string
	perMinute       config.USD
}

// Transcribe hears req.Audio for c (Mother's call: c's channel and
// person) through speech.transcribe and its fallbacks in turn. Each model
// tried reserves the audio's cost (its duration at the model's price per
// minute, and a bound of the transcript in tokens) against Mother's caps
// before it is sent, and settles after: the whole cost when it answered
// (servers bill the audio), nothing when it failed on its side. A cap that
// cannot take it refuses the call with a *model.BudgetError, as for her
// model calls. It fails with ErrNoSpeechServer when none is configured.
func (b *Broker) Transcribe(ctx context.Context, c Caller, req model.TranscribeRequest) (string, error) {
	c.Kind = CallerMother
	t := b.cfg.Speech.Transcribe
	if t.Provider == "" {
		return "", ErrNoSpeechServer
	}
	targets := []speechTarget{{t.Provider, t.Model, t.USDPerMinute}}
	for _, fb := range t.Fallbacks {
		targets = append(targets, speechTarget{fb.Provider, fb.Model, fb.USDPerMinute})
	}
	var errs []error
	for i, tg := range targets {
		text, err := b.transcribeOne(ctx, c, tg, req)
		if err == nil {
			return text, nil
		}
		if ctx.Err() != nil || errors.Is(err, model.ErrBudgetExhausted) || errors.Is(err, model.ErrBusy) {
			return "", err
		}
		errs = append(errs, err)
		if i+1 < len(targets) {
			b.logger.Warn("transcription goes to a fallback", "from", tg.provider+"/"+tg.model, "to", targets[i+1].provider+"/"+targets[i+1].model, "err", err)
		}
	}
	return "", errors.Join(errs...)
}

func (b *Broker) transcribeOne(ctx context.Context, c Caller, tg speechTarget, req model.TranscribeRequest) (string, error) {
	b.mu.Lock()
	p, err := b.providerLocked(tg.provider)
	b.mu.Unlock()
	if err != nil {
		return "", fmt.Errorf("speech server %s: %w", tg.provider, err)
	}
	tr, ok := p.(model.Transcriber)
	if !ok {
		return "", fmt.Errorf("speech server %s cannot transcribe", tg.provider)
	}
	secs := audioSeconds(req.Duration)
	r := amount{secs * transcriptTokensPerSecond, audioMicroUSD(req.Duration, tg.perMinute)}
	line, err := b.reserveSpeech(c, KindTranscribeReserve, tg, r, float64(secs))
	if err != nil {
		return "", err
	}
	req.Model = tg.model
	text, err := tr.Transcribe(ctx, req)
	charged := amount{}
	switch {
	case err == nil:
		charged = amount{min(int64(len(text)), r.tokens), r.micro}
	case ctx.Err() != nil:
		charged = r // abandoned: the server may have heard it all
	}
	b.settleSpeech(c, line, r, charged, err)
	return text, err
}

// Speak says text for c through speech.speak in format ("opus"), metered
// as Transcribe is: its characters at speech.speak.usdPerMillionChars,
// and its bytes as tokens.
func (b *Broker) Speak(ctx context.Context, c Caller, text, format string) (io.ReadCloser, error) {
	c.Kind = CallerMother
	s := b.cfg.Speech.Speak
	if s.Provider == "" {
		return nil, ErrNoSpeechServer
	}
	b.mu.Lock()
	p, err := b.providerLocked(s.Provider)
	b.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("speech server %s: %w", s.Provider, err)
	}
	sp, ok := p.(model.Speaker)
	if !ok {
		return nil, fmt.Errorf("speech server %s cannot speak", s.Provider)
	}
	chars := int64(len([]rune(text)))
	r := amount{int64(len(text)), int64(math.Ceil(float64(chars) * float64(s.USDPerMillionChars.Micro()) / 1e6))}
	line, err := b.reserveSpeech(c, KindSpeechReserve, speechTarget{s.Provider, s.Model, 0}, r, 0)
	if err != nil {
		return nil, err
	}
	audio, err := sp.Speak(ctx, model.SpeechRequest{Model: s.Model, Voice: s.Voice, Text: text, Format: format})
	charged := r
	if err != nil && ctx.Err() == nil {
		charged = amount{}
	}
	b.settleSpeech(c, line, r, charged, err)
	return audio, err
}

// reserveSpeech admits and reserves r for c's speech call, writing its
// reservation line (kind).
func (b *Broker) reserveSpeech(c Caller, kind string, tg speechTarget, r amount, secs float64) (Entry, error) {
	id, err := newCallID()
	if err != nil {
		return Entry{}, err
	}
	b.mu.Lock()
	now := b.clock.Now()
	if err := b.rollLocked(now); err != nil {
		b.mu.Unlock()
		return Entry{}, err
	}
	if err := b.fitFixedLocked(c, r, now); err != nil {
		notes := b.refusedLocked(c, err, now)
		tell := b.notify
		b.mu.Unlock()
		b.logger.Warn("speech call refused", "channel", c.Channel, "kind", kind, "err", err)
		b.metrics.ModelCall(c, model.Usage{}, 0, err)
		deliver(tell, notes)
		return Entry{}, err
	}
	b.reserveLocked(c, r)
	line := Entry{Time: now, Kind: kind, Call: id, Channel: c.Channel, User: c.User, Event: c.Event, Provider: tg.provider, Model: tg.model,
		ReserveOut: r.tokens, ReserveCost: r.micro, AudioSeconds: secs}
	if err := b.appendLocked(line); err != nil {
		b.reserveLocked(c, r.neg())
		b.mu.Unlock()
		return Entry{}, fmt.Errorf("broker: usage ledger: %w", err)
	}
	b.mu.Unlock()
	return line, nil
}

// settleSpeech releases r and charges charged for the speech call of
// reservation line rl.
func (b *Broker) settleSpeech(c Caller, rl Entry, r, charged amount, callErr error) {
	u := model.Usage{OutputTokens: charged.tokens}
	b.metrics.ModelCall(c, u, charged.micro, callErr)
	if err := b.settle(c, rl, r, u, charged.micro); err != nil {
		b.logger.Error("cannot record usage", "channel", c.Channel, "kind", rl.Kind, "err", err)
	}
}

// fitFixedLocked says why a call of fixed cost r may not be sent now (a
// *model.BudgetError, or a transient busy error while calls in flight hold
// what is left), or nil. Callers hold b.mu.
func (b *Broker) fitFixedLocked(c Caller, r amount, now time.Time) error {
	ms := members(c)
	for _, m := range ms {
		lim, used := b.limit(m.s), b.usedLocked(m.s)
		for _, u := range m.units() {
			if l := lim.get(u); l > 0 && used.get(u)+r.get(u) > l {
				return b.exhausted(m.s, u, used.get(u), l, r.get(u), now)
			}
		}
	}
	for _, m := range ms {
		lim, used, held := b.limit(m.s), b.usedLocked(m.s), b.res[m.s]
		for _, u := range m.units() {
			if l := lim.get(u); l > 0 && used.get(u)+held.get(u)+r.get(u) > l {
				return &model.TransientError{Err: model.Wrap(model.ErrBusy, "busy: %s has %s of its %s left and calls in flight hold %s of it; this call needs %s",
					m.s.words(), u.show(l-used.get(u)), u.show(l), u.show(held.get(u)), u.show(r.get(u)))}
			}
		}
	}
	return nil
}
