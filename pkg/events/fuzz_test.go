package events

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mother-chat/mother/pkg/store"
)

// FuzzParse feeds arbitrary bytes to the event file parser, as a user, a
// model or a half-written file might leave them in workspace/events/. It
// must never panic; what it accepts must be a usable event (text within
// its limit, a configured adapter, a channel id safe as a directory name,
// a due time for one-shots, a next run for periodics), and an accepted
// event written back as JSON must parse to the same event.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"type":"immediate","channelId":"slack/C123","text":"New file"}`,
		`{"type":"one-shot","channelId":"discord/700000000000000001","text":"Remind","at":"2025-12-15T09:00:00+01:00"}`,
		`{"type":"periodic","channelId":"slack/C123","text":"Standup","schedule":"0 9 * * 1-5","timezone":"Europe/Vienna"}`,
		`{"type":"periodic","channelId":"slack/C123","text":"x","schedule":"30 2 29 2 *","timezone":"America/New_York"}`,
		`{"type":"periodic","channelId":"slack/C123","text":"x","schedule":"@every 1m","timezone":"UTC"}`,
		`{"type":"periodic","channelId":"slack/C123","text":"x","schedule":"0 0 31 2 *","timezone":"UTC"}`,
		`{"type":"immediate","channelId":"slack/../../etc","text":"x"}`,
		`{"type":"immediate","channelId":"C1","text":"x"}{"type":"immediate"}`,
		`{"type":"one-shot","channelId":"slack/C1","text":"x","at":"2025-12-15T09:00:00"}`,
		`{"type":"immediate","channelId":"slack/C1","text":"x","extra":1}`,
		`{"type":"immediate","channelId":"slack/C1","text":"   "}`,
		``, `   `, `[`, `null`, `{"type":1}`,
	} {
		f.Add([]byte(seed))
	}
	resolve := AdapterResolver([]string{"slack", "discord"})
	adapters := map[string]bool{"slack": true, "discord": true}
	now := time.Now()
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, resolve)
		if err != nil {
			if s != nil {
				t.Fatalf("Parse returned a spec and an error: %v", err)
			}
			if err.Error() == "" {
				t.Fatal("Parse returned an empty error")
			}
			return
		}
		if strings.TrimSpace(s.Text) == "" || utf8.RuneCountInString(s.Text) > MaxTextLen {
			t.Fatalf("accepted text of %d runes: %q", utf8.RuneCountInString(s.Text), s.Text)
		}
		if !adapters[s.Adapter] {
			t.Fatalf("accepted unknown adapter %q", s.Adapter)
		}
		if err := store.ValidName(s.Channel); err != nil {
			t.Fatalf("accepted channel %q that is not a valid directory name: %v", s.Channel, err)
		}
		switch s.Type {
		case Immediate:
		case OneShot:
			if s.AtTime().IsZero() {
				t.Fatalf("one-shot without a due time: %+v", s.Event)
			}
		case Periodic:
			if next := s.Next(now); !next.After(now) {
				t.Fatalf("periodic %q in %s has no next run after now (%v)", s.Schedule, s.Timezone, next)
			}
		default:
			t.Fatalf("accepted type %q", s.Type)
		}
		if line := Line("f.json", s.Type, s.ScheduleLabel(), s.Text); !strings.HasPrefix(line, "[EVENT:f.json:"+string(s.Type)) || !strings.HasSuffix(line, s.Text) {
			t.Fatalf("Line = %q", line)
		}
		// Written back (as the schedule_event tool writes files), it
		// parses to the same event.
		b, err := json.Marshal(s.Event)
		if err != nil {
			t.Fatalf("marshal accepted event: %v", err)
		}
		again, err := Parse(b, resolve)
		if err != nil {
			t.Fatalf("accepted event %s does not parse again: %v", b, err)
		}
		if again.Event != s.Event || again.Adapter != s.Adapter || again.Channel != s.Channel {
			t.Fatalf("round trip: %+v (%s/%s), want %+v (%s/%s)", again.Event, again.Adapter, again.Channel, s.Event, s.Adapter, s.Channel)
		}
	})
}
