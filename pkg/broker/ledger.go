package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/jsonl"
	"github.com/mother-chat/mother/pkg/model"
)

// Entry is one ledger line: a settlement (real usage and its cost), a
// reservation (what a call in flight may cost) or a notice given.
type Entry struct {
	Time time.Time `json:"ts"`
	// Kind is empty for a chick's settlement, KindReserve for a chick's
	// reservation, KindMother and KindMotherReserve for Mother's own
	// calls, KindWarned for a notice given.
	Kind    string `json:"kind,omitempty"`
	Call    string `json:"call,omitempty"`
	Chick   string `json:"chick"`
	Channel string `json:"channel"`
	Tier    string `json:"tier"`
	User    string `json:"user,omitempty"`
	// Event is the event file of Mother's run of a scheduled event.
	Event string `json:"event,omitempty"`
	// Provider is the provider as config names it ("anthropic",
	// "openai:vllm"); Model the model that was called.
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model"`
	Input    int64  `json:"in"`
	Output   int64  `json:"out"`
	// Cost is what the usage cost, in micro-dollars (millionths of a US
	// dollar; 0 on lines of older Mothers and for free models).
	Cost int64 `json:"costMicroUSD,omitempty"`
	// ReserveIn, ReserveOut and ReserveCost, on a reservation, are the
	// prompt's estimate, the output limit and their cost.
	ReserveIn   int64 `json:"rin,omitempty"`
	ReserveOut  int64 `json:"rout,omitempty"`
	ReserveCost int64 `json:"rcostMicroUSD,omitempty"`
	// Unsettled marks the settlement written at start for a reservation
	// that had none: charged whole.
	Unsettled bool `json:"unsettled,omitempty"`
	// Report marks a chick's settlement that is not a call of its own:
	// what Mother's model reads about it once it ended (ChargeReport).
	Report bool `json:"report,omitempty"`
	// Scope, Name, Unit and Level, on a notice, say which: the cap's
	// kind and subject, "tokens" or "usd", and 80 or 100.
	Scope string `json:"scope,omitempty"`
	Name  string `json:"name,omitempty"`
	Unit  string `json:"unit,omitempty"`
	Level int    `json:"level,omitempty"`
	// AudioSeconds, on a transcription's reservation, is the audio's
	// length (speech.go).
	AudioSeconds float64 `json:"audioSeconds,omitempty"`
}

// Kinds of ledger lines.
const (
	// KindReserve marks a reservation of a chick's call.
	KindReserve = "reserve"
	// KindMother marks the settlement of one of Mother's own calls, and
	// KindMotherReserve its reservation (older Mothers skip both).
	KindMother        = "mother"
	KindMotherReserve = "mother-reserve"
	// KindWarned marks a notice given (notices.go).
	KindWarned = "warned"
)

// caller is who made the call of a settlement or reservation line.
func (e Entry) caller() Caller {
	c := Caller{Kind: CallerChick, ChickID: e.Chick, Channel: e.Channel, Tier: e.Tier, User: e.User, Event: e.Event}
	if speech, _ := speechKind(e.Kind); speech || e.Kind == KindMother || e.Kind == KindMotherReserve || e.Kind == KindEmbed || e.Kind == KindEmbedReserve {
		c.Kind = CallerMother
	}
	return c
}

// reservation is the ledger line of call id's reservation r.
func reservation(t time.Time, id string, c Caller, prov, modelID string, r model.Usage, cost int64) Entry {
	e := Entry{Time: t, Kind: KindReserve, Call: id, Chick: c.ChickID, Channel: c.Channel, Tier: c.Tier, User: c.User, Event: c.Event,
		Provider: prov, Model: modelID, ReserveIn: r.InputTokens, ReserveOut: r.OutputTokens, ReserveCost: cost}
	if c.mother() {
		e.Kind = KindMotherReserve
	}
	return e
}

// settlement is the settlement line of reservation line r: usage u,
// costing cost.
func (e Entry) settlement(t time.Time, u model.Usage, cost int64) Entry {
	s := Entry{Time: t, Call: e.Call, Chick: e.Chick, Channel: e.Channel, Tier: e.Tier, User: e.User, Event: e.Event, Provider: e.Provider, Model: e.Model,
		Input: u.InputTokens, Output: u.OutputTokens, Cost: cost, AudioSeconds: e.AudioSeconds}
	s.Kind = settleKind(e.Kind)
	return s
}

func dayOf(t time.Time) string { return t.Local().Format("2006-01-02") }

func (b *Broker) path(day string) string { return filepath.Join(b.dir, day+".jsonl") }

// scan adds one day's settlements to the chick totals (and, for today, to
// the daily totals and the notices given), and tracks reservations
// without their settlement in b.pending.
func (b *Broker) scan(day string, today bool) error {
	err := jsonl.Scan(b.path(day), 0, -1, func(line []byte, _, _ int64) error {
		var e Entry
		if json.Unmarshal(line, &e) != nil {
			return nil
		}
		switch e.Kind {
		case KindReserve, KindMotherReserve, KindEmbedReserve, KindTranscribeReserve, KindSpeechReserve:
			if e.Call != "" && b.pending != nil {
				b.pending[e.Call] = e
			}
			return nil
		case KindWarned:
			if today {
				b.warned[warnKey(scope{e.Scope, e.Name}, e.Unit, e.Level)] = true
			}
			return nil
		case "", KindMother, KindEmbed, KindTranscribe, KindSpeech:
		default:
			return nil // a kind of line this Mother does not know
		}
		if e.Call != "" && b.pending != nil {
			delete(b.pending, e.Call)
		}
		u := model.Usage{InputTokens: e.Input, OutputTokens: e.Output}
		c := e.caller()
		if !c.mother() {
			b.addChickLocked(c.ChickID, u, e.Cost)
		}
		if today {
			b.addDailyLocked(c, u, e.Cost)
		}
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("broker: read ledger %s: %w", day, err)
	}
	return nil
}

// rollLocked switches to the day of t, opening its ledger.
func (b *Broker) rollLocked(t time.Time) error {
	if b.closed {
		return errClosed
	}
	day := dayOf(t)
	if day == b.day && b.ledger != nil {
		return nil
	}
	if b.ledger != nil {
		b.ledger.Close()
		b.ledger = nil
	}
	j, torn, err := jsonl.OpenWith(b.path(day), jsonl.Options{Sync: true, Kind: fsync.KindUsage, FlushAfter: ledgerFlushAfter, Clock: clock.Real{}})
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	if torn > 0 {
		b.logger.Warn("repaired torn last line of the usage ledger", "day", day, "bytes", torn)
	}
	b.daily, b.warned = map[scope]amount{}, map[string]bool{}
	if b.day == "" {
		// First open: today's lines count for the daily caps and the
		// chicks.
		if err := b.scan(day, true); err != nil {
			j.Close()
			return err
		}
	}
	b.day, b.ledger = day, j
	return nil
}

// ledgerFlushAfter bounds how long a ledger line stays without fsync.
const ledgerFlushAfter = time.Second

// appendLocked writes e to today's ledger. The line is written at once (a
// killed process loses none) and fsynced within ledgerFlushAfter, not
// before the caller goes on: nobody waits for it, the caps are enforced
// from the totals in memory, and a fsync under b.mu would hold every
// other model call behind it. A power loss may forget the last second's
// lines, which then do not count against the day's caps.
func (b *Broker) appendLocked(e Entry) error {
	if b.ledger == nil {
		return errClosed
	}
	_, _, err := b.ledger.AppendDeferred(e)
	return err
}
