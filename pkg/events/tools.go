package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/store"
)

// Tools are Mother's safe tools for events in the channel of the current
// run (chat.RunInfoFrom): schedule_event, list_events, cancel_event,
// resume_event. They write and remove files in the events directory
// (atomically) and tell the watcher at once, so she never needs a shell
// for this.
//
// An event's run may not schedule events unless an admin allowed it: a
// run that an admin's message triggered may create an event with
// may_schedule, whose runs may then schedule events (without
// may_schedule themselves). So no event can multiply itself without an
// admin having said so in chat.
func Tools(w *Watcher) []agent.Tool {
	return []agent.Tool{&scheduleTool{w}, &listTool{w}, &cancelTool{w}, &resumeTool{w}}
}

type scheduleTool struct{ w *Watcher }
type listTool struct{ w *Watcher }
type cancelTool struct{ w *Watcher }
type resumeTool struct{ w *Watcher }

var (
	_ agent.Tool = (*scheduleTool)(nil)
	_ agent.Tool = (*listTool)(nil)
	_ agent.Tool = (*cancelTool)(nil)
	_ agent.Tool = (*resumeTool)(nil)
)

func runChannel(ctx context.Context) (string, error) {
	info, ok := chat.RunInfoFrom(ctx)
	if !ok || info.Adapter == "" || info.ChannelID == "" {
		return "", errors.New("no channel: this tool works only inside a channel's run")
	}
	return info.QualifiedChannel(), nil
}

// fileName turns a tool's name argument into an event file name.
func fileName(name string) (string, error) {
	base := strings.TrimSuffix(strings.TrimSpace(name), ".json")
	if err := store.ValidName(base); err != nil {
		return "", fmt.Errorf("name: %w", err)
	}
	return base + ".json", nil
}

func (t *scheduleTool) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name: "schedule_event",
		Description: "Schedule a wake-up for yourself in this channel. " +
			"type \"one-shot\" runs once at `at` (ISO 8601 with offset, e.g. 2025-12-15T09:00:00+01:00); " +
			"\"periodic\" runs on a cron `schedule` (minute hour day-of-month month day-of-week, e.g. \"0 9 * * 1-5\") in an IANA `timezone` (e.g. Europe/Vienna); " +
			"\"immediate\" runs as soon as possible. When it runs you receive \"[EVENT:<name>.json:<type>:<schedule>] <text>\"; " +
			"write text as an instruction to your future self. Answer starting with [SILENT] then if there is nothing to say.",
		Parameters: json.RawMessage(`{"type":"object","properties":{
"name":{"type":"string","description":"short descriptive file name, letters, digits, . _ - (e.g. dentist-reminder)"},
"type":{"type":"string","enum":["one-shot","periodic","immediate"]},
"text":{"type":"string","description":"what to do when it runs"},
"at":{"type":"string","description":"one-shot: ISO 8601 time with offset"},
"schedule":{"type":"string","description":"periodic: cron expression"},
"timezone":{"type":"string","description":"periodic: IANA time zone"},
"replace":{"type":"boolean","description":"overwrite an existing event of this channel with the same name"},
"may_schedule":{"type":"boolean","description":"let this event's runs schedule events of their own; only when an admin asks for it in chat"}},
"required":["name","type","text"]}`),
	}
}

func (t *scheduleTool) Run(ctx context.Context, raw json.RawMessage) (agent.Result, error) {
	ch, err := runChannel(ctx)
	if err != nil {
		return agent.Result{}, err
	}
	info, _ := chat.RunInfoFrom(ctx)
	if info.Event != "" && !info.EventMaySchedule {
		return agent.Result{}, fmt.Errorf("not scheduled: this is a run of event %s, and an event may not schedule events unless an admin allowed it (an admin asks for %s to be scheduled again with may_schedule)", info.Event, info.Event)
	}
	var a struct {
		Name        string `json:"name"`
		Type        Type   `json:"type"`
		Text        string `json:"text"`
		At          string `json:"at"`
		Schedule    string `json:"schedule"`
		Timezone    string `json:"timezone"`
		Replace     bool   `json:"replace"`
		MaySchedule bool   `json:"may_schedule"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return agent.Result{}, fmt.Errorf("arguments: %w", err)
	}
	if a.MaySchedule && (!info.IsAdmin || info.Kind != "message") {
		return agent.Result{}, errors.New("not scheduled: may_schedule lets an event schedule events, and only an admin's own message may allow it; schedule it without may_schedule")
	}
	file, err := fileName(a.Name)
	if err != nil {
		return agent.Result{}, err
	}
	ev := Event{Type: a.Type, ChannelID: ch, Text: a.Text, At: a.At, Schedule: a.Schedule, Timezone: a.Timezone, MaySchedule: a.MaySchedule, By: info.ActingFor}
	spec, err := Validate(ev, t.w.Resolve)
	if err != nil {
		return agent.Result{}, err
	}
	now := t.w.Now()
	if spec.Type == OneShot && !spec.AtTime().After(now) {
		return agent.Result{}, fmt.Errorf("at: %s is not in the future (now is %s)", a.At, now.In(spec.AtTime().Location()).Format(time.RFC3339))
	}
	path := filepath.Join(t.w.Dir(), file)
	if old, err := os.ReadFile(path); err == nil {
		if t.w.ownerOf(old) != ch {
			return agent.Result{}, fmt.Errorf("an event named %s already exists in another channel; pick another name", file)
		}
		if !a.Replace {
			return agent.Result{}, fmt.Errorf("an event named %s already exists in this channel; set replace to overwrite it, or pick another name", file)
		}
	}
	data, _ := json.MarshalIndent(ev, "", "  ")
	if err := atomicfile.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return agent.Result{}, err
	}
	if err := t.w.Reload(file); err != nil {
		return agent.Result{}, fmt.Errorf("written, but the watcher refused it: %w", err)
	}
	switch spec.Type {
	case Immediate:
		return agent.Result{Text: fmt.Sprintf("Scheduled %s to run as soon as possible.", file)}, nil
	case OneShot:
		return agent.Result{Text: fmt.Sprintf("Scheduled %s for %s.", file, spec.AtTime().Format(time.RFC3339))}, nil
	}
	next := spec.Next(now)
	return agent.Result{Text: fmt.Sprintf("Scheduled %s (%q in %s); next run %s.", file, spec.Schedule, spec.Timezone, next.In(spec.loc).Format("Mon 2006-01-02 15:04 MST"))}, nil
}

// ownerOf is the qualified channel of an event file's content, read even
// if the rest of it does not validate (the raw channelId when it does not
// resolve).
func (w *Watcher) ownerOf(data []byte) string {
	var e struct {
		ChannelID string `json:"channelId"`
	}
	_ = json.Unmarshal(data, &e)
	if a, c, err := w.Resolve(e.ChannelID); err == nil {
		return a + "/" + c
	}
	return e.ChannelID
}

func (t *listTool) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name:        "list_events",
		Description: "List the scheduled events of this channel with their next run times.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{}}`),
	}
}

func (t *listTool) Run(ctx context.Context, _ json.RawMessage) (agent.Result, error) {
	ch, err := runChannel(ctx)
	if err != nil {
		return agent.Result{}, err
	}
	infos := t.w.List(ch)
	if len(infos) == 0 {
		return agent.Result{Text: "No events in this channel."}, nil
	}
	var b strings.Builder
	for _, in := range infos {
		fmt.Fprintf(&b, "- %s: %s", in.File, in.Type)
		switch in.Type {
		case OneShot:
			fmt.Fprintf(&b, " at %s", in.Schedule)
		case Periodic:
			fmt.Fprintf(&b, " %q in %s", in.Schedule, in.Timezone)
		}
		if !in.Next.IsZero() && in.Type == Periodic {
			loc := time.Local
			if l, err := time.LoadLocation(in.Timezone); err == nil && in.Timezone != "" {
				loc = l
			}
			fmt.Fprintf(&b, ", next %s", in.Next.In(loc).Format("Mon 2006-01-02 15:04 MST"))
		}
		switch {
		case in.State == "paused" && in.PausedUntil.IsZero():
			fmt.Fprintf(&b, " (paused until resumed: %s)", in.Reason)
		case in.State == "paused":
			fmt.Fprintf(&b, " (paused until %s: %s)", in.PausedUntil.Local().Format("Mon 2006-01-02 15:04 MST"), in.Reason)
		case in.State != "scheduled" && in.State != "idle":
			fmt.Fprintf(&b, " (%s)", in.State)
		}
		if in.MaySchedule {
			b.WriteString(" (may schedule events)")
		}
		fmt.Fprintf(&b, ": %s\n", in.Text)
	}
	return agent.Result{Text: strings.TrimRight(b.String(), "\n")}, nil
}

func (t *cancelTool) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name:        "cancel_event",
		Description: "Cancel (delete) one of this channel's events by name.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"the event's file name"}},"required":["name"]}`),
	}
}

func (t *cancelTool) Run(ctx context.Context, raw json.RawMessage) (agent.Result, error) {
	ch, file, err := namedEvent(ctx, raw)
	if err != nil {
		return agent.Result{}, err
	}
	path := filepath.Join(t.w.Dir(), file)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return agent.Result{}, fmt.Errorf("no event named %s (list_events shows this channel's events)", file)
	}
	if err != nil {
		return agent.Result{}, err
	}
	if t.w.ownerOf(data) != ch {
		return agent.Result{}, fmt.Errorf("%s belongs to another channel", file)
	}
	if err := os.Remove(path); err != nil {
		return agent.Result{}, fmt.Errorf("cancel %s: %w", file, err)
	}
	_ = t.w.Reload(file)
	return agent.Result{Text: fmt.Sprintf("Cancelled %s.", file)}, nil
}

func (t *resumeTool) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name:        "resume_event",
		Description: "Resume one of this channel's periodic events that was paused (after failing again and again, or at its daily money cap: resuming does not lift the cap).",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"the event's file name"}},"required":["name"]}`),
	}
}

func (t *resumeTool) Run(ctx context.Context, raw json.RawMessage) (agent.Result, error) {
	ch, file, err := namedEvent(ctx, raw)
	if err != nil {
		return agent.Result{}, err
	}
	was, err := t.w.Resume(file, ch)
	if err != nil {
		return agent.Result{}, err
	}
	if !was {
		return agent.Result{Text: fmt.Sprintf("%s was not paused.", file)}, nil
	}
	return agent.Result{Text: fmt.Sprintf("Resumed %s: it runs again at its next time.", file)}, nil
}

// namedEvent is the run's channel and the event file that a tool's
// {"name": ...} argument names (cancel_event, resume_event).
func namedEvent(ctx context.Context, raw json.RawMessage) (ch, file string, err error) {
	if ch, err = runChannel(ctx); err != nil {
		return "", "", err
	}
	var a struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return "", "", fmt.Errorf("arguments: %w", err)
	}
	file, err = fileName(a.Name)
	return ch, file, err
}
