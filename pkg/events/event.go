package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/store"
)

// Type is an event's kind.
type Type string

// The three event types of workspace/events/*.json.
const (
	// Immediate runs as soon as the watcher sees the file.
	Immediate Type = "immediate"
	// OneShot runs once at At.
	OneShot Type = "one-shot"
	// Periodic runs on a cron Schedule in Timezone.
	Periodic Type = "periodic"
)

// Event is the JSON content of one events/*.json file.
type Event struct {
	Type Type `json:"type"`
	// ChannelID is qualified with the adapter name: "slack-acme/C123".
	ChannelID string `json:"channelId"`
	Text      string `json:"text"`
	// At is an RFC 3339 time with an offset (one-shot only).
	At string `json:"at,omitempty"`
	// Schedule is a five-field cron expression (periodic only).
	Schedule string `json:"schedule,omitempty"`
	// Timezone is an IANA zone name (periodic only).
	Timezone string `json:"timezone,omitempty"`
	// MaySchedule lets the event's runs schedule events of their own
	// (schedule_event). Without it they may not: only an admin's message
	// can allow it (schedule_event's may_schedule), so that an event
	// cannot multiply itself.
	MaySchedule bool `json:"maySchedule,omitempty"`
	// By is the user id (of the channel's adapter) of the person whose
	// message scheduled the event, set by schedule_event from the run,
	// never from the model's arguments: the event's runs act with that
	// person's roles. Empty (a file written by hand): the channel's
	// default role.
	By string `json:"by,omitempty"`
}

// MaxTextLen caps an event's text, in characters.
const MaxTextLen = 4000

// Spec is a parsed and validated event.
type Spec struct {
	Event
	// Adapter and Channel are the resolved channelId.
	Adapter string
	Channel string

	at    time.Time
	sched *cron.SpecSchedule
	loc   *time.Location
}

// Qualified is "<adapter>/<channel>".
func (s *Spec) Qualified() string { return s.Adapter + "/" + s.Channel }

// AtTime is a one-shot's due time.
func (s *Spec) AtTime() time.Time { return s.at }

// ScheduleLabel is the <schedule> part of the [EVENT:...] line: empty for
// immediate, the at string for one-shot, the cron expression for periodic.
func (s *Spec) ScheduleLabel() string {
	switch s.Type {
	case OneShot:
		return s.At
	case Periodic:
		return s.Schedule
	}
	return ""
}

// Next is the first time after t a periodic event runs (zero when it never
// does); see NextRun for the daylight-saving rules.
func (s *Spec) Next(t time.Time) time.Time {
	if s.Type != Periodic {
		return time.Time{}
	}
	n, _ := NextRun(s.sched, s.loc, t)
	return n
}

// Resolver maps an event's channelId to an adapter name and a channel id,
// or explains why it cannot.
type Resolver func(channelID string) (adapter, channel string, err error)

// AdapterResolver resolves qualified ids ("slack-acme/C123") against the
// configured adapter names. An unqualified id ("C123") is accepted only
// when exactly one adapter is configured, and means that adapter.
func AdapterResolver(adapters []string) Resolver {
	names := append([]string(nil), adapters...)
	sort.Strings(names)
	known := func(n string) bool {
		for _, a := range names {
			if a == n {
				return true
			}
		}
		return false
	}
	return func(id string) (string, string, error) {
		adapter, channel, qualified := strings.Cut(id, "/")
		if !qualified {
			if len(names) != 1 {
				return "", "", fmt.Errorf("channelId %q is not qualified: write \"<adapter>/%s\" (adapters: %s)", id, id, strings.Join(names, ", "))
			}
			adapter, channel = names[0], id
		}
		if !known(adapter) {
			return "", "", fmt.Errorf("channelId %q: unknown adapter %q (configured: %s)", id, adapter, strings.Join(names, ", "))
		}
		if err := store.ValidName(channel); err != nil {
			return "", "", fmt.Errorf("channelId %q: channel %w", id, err)
		}
		return adapter, channel, nil
	}
}

// cronParser accepts the five standard fields and the @yearly, @monthly,
// @weekly, @daily, @hourly descriptors.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse decodes and validates one event file. Errors say what to fix.
func Parse(data []byte, resolve Resolver) (*Spec, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("empty file")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var ev Event
	if err := dec.Decode(&ev); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("invalid JSON: more than one value in the file")
	}
	return Validate(ev, resolve)
}

// Validate checks an event and resolves its channel.
func Validate(ev Event, resolve Resolver) (*Spec, error) {
	s := &Spec{Event: ev}
	if strings.TrimSpace(ev.Text) == "" {
		return nil, errors.New("text: missing")
	}
	if n := len([]rune(ev.Text)); n > MaxTextLen {
		return nil, fmt.Errorf("text: %d characters, at most %d", n, MaxTextLen)
	}
	if ev.ChannelID == "" {
		return nil, errors.New("channelId: missing (\"<adapter>/<channel>\")")
	}
	if resolve == nil {
		return nil, errors.New("channelId: no resolver")
	}
	var err error
	if s.Adapter, s.Channel, err = resolve(ev.ChannelID); err != nil {
		return nil, err
	}
	only := func(field, value string, t Type) error {
		if value != "" && ev.Type != t {
			return fmt.Errorf("%s: only %s events have it", field, t)
		}
		return nil
	}
	if err := errors.Join(only("at", ev.At, OneShot), only("schedule", ev.Schedule, Periodic), only("timezone", ev.Timezone, Periodic)); err != nil {
		return nil, err
	}
	switch ev.Type {
	case Immediate:
	case OneShot:
		if ev.At == "" {
			return nil, errors.New("at: missing (e.g. \"2025-12-15T09:00:00+01:00\")")
		}
		t, err := time.Parse(time.RFC3339, ev.At)
		if err != nil {
			return nil, fmt.Errorf("at: %q is not an ISO 8601 time with a timezone offset such as \"2025-12-15T09:00:00+01:00\"", ev.At)
		}
		s.at = t
	case Periodic:
		if ev.Schedule == "" {
			return nil, errors.New("schedule: missing (cron \"minute hour day-of-month month day-of-week\", e.g. \"0 9 * * 1-5\")")
		}
		if strings.HasPrefix(strings.TrimSpace(ev.Schedule), "CRON_TZ=") || strings.HasPrefix(strings.TrimSpace(ev.Schedule), "TZ=") {
			return nil, errors.New("schedule: put the zone in the timezone field, not in the schedule")
		}
		if ev.Timezone == "" {
			return nil, errors.New("timezone: missing (an IANA name such as \"Europe/Vienna\")")
		}
		loc, err := time.LoadLocation(ev.Timezone)
		if err != nil || ev.Timezone == "Local" {
			return nil, fmt.Errorf("timezone: %q is not an IANA time zone name such as \"Europe/Vienna\"", ev.Timezone)
		}
		sch, err := cronParser.Parse(ev.Schedule)
		if err != nil {
			return nil, fmt.Errorf("schedule: %q: %v", ev.Schedule, err)
		}
		spec, ok := sch.(*cron.SpecSchedule)
		if !ok {
			return nil, fmt.Errorf("schedule: %q: @every is not supported; use cron fields", ev.Schedule)
		}
		s.sched, s.loc = spec, loc
		if _, ok := NextRun(spec, loc, clock.Real{}.Now()); !ok {
			return nil, fmt.Errorf("schedule: %q never fires (no such date)", ev.Schedule)
		}
	case "":
		return nil, errors.New("type: missing (\"immediate\", \"one-shot\" or \"periodic\")")
	default:
		return nil, fmt.Errorf("type: %q is not \"immediate\", \"one-shot\" or \"periodic\"", ev.Type)
	}
	return s, nil
}

// Line is the message the agent receives:
// "[EVENT:<file>:<type>:<schedule>] <text>" (no ":<schedule>" for
// immediate events).
func Line(file string, t Type, schedule, text string) string {
	head := "[EVENT:" + file + ":" + string(t)
	if schedule != "" {
		head += ":" + schedule
	}
	return head + "] " + text
}
