package events

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
)

func toolByName(t *testing.T, w *Watcher, name string) agent.Tool {
	t.Helper()
	for _, tl := range Tools(w) {
		if tl.Spec().Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}

func call(t *testing.T, ctx context.Context, tl agent.Tool, args string) (string, error) {
	t.Helper()
	if !json.Valid([]byte(args)) {
		t.Fatalf("bad test args %s", args)
	}
	r, err := tl.Run(ctx, json.RawMessage(args))
	return r.Text, err
}

func TestEventTools(t *testing.T) {
	t.Parallel()
	f := newFixture(t, clock.NewFake(t0))
	f.start(t)
	ctx := chat.WithRunInfo(t.Context(), chat.RunInfo{Adapter: "slack-acme", ChannelID: "C1"})
	other := chat.WithRunInfo(t.Context(), chat.RunInfo{Adapter: "slack-acme", ChannelID: "C2"})
	sched, list, cancel := toolByName(t, f.w, "schedule_event"), toolByName(t, f.w, "list_events"), toolByName(t, f.w, "cancel_event")

	if _, err := call(t, context.Background(), sched, `{"name":"x","type":"immediate","text":"t"}`); err == nil || !strings.Contains(err.Error(), "inside a channel's run") {
		t.Errorf("without RunInfo: %v", err)
	}
	at := t0.Add(2 * time.Hour).In(time.FixedZone("", 3600)).Format(time.RFC3339)
	out, err := call(t, ctx, sched, `{"name":"dentist","type":"one-shot","text":"Remind Mario","at":"`+at+`"}`)
	if err != nil || !strings.Contains(out, "dentist.json") {
		t.Fatalf("schedule one-shot: %q, %v", out, err)
	}
	b, err := os.ReadFile(filepath.Join(f.dir, "dentist.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ev Event
	if err := json.Unmarshal(b, &ev); err != nil || ev.ChannelID != "slack-acme/C1" || ev.At != at || ev.Type != OneShot {
		t.Errorf("written file = %s (%v)", b, err)
	}
	if _, err := call(t, ctx, sched, `{"name":"dentist","type":"one-shot","text":"again","at":"`+at+`"}`); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("duplicate name: %v", err)
	}
	if _, err := call(t, other, sched, `{"name":"dentist","type":"one-shot","text":"mine","at":"`+at+`","replace":true}`); err == nil || !strings.Contains(err.Error(), "another channel") {
		t.Errorf("replace from another channel: %v", err)
	}
	if _, err := call(t, ctx, sched, `{"name":"past","type":"one-shot","text":"t","at":"2020-01-01T00:00:00Z"}`); err == nil || !strings.Contains(err.Error(), "not in the future") {
		t.Errorf("past one-shot: %v", err)
	}
	if _, err := call(t, ctx, sched, `{"name":"bad","type":"periodic","text":"t","schedule":"0 9 * * *"}`); err == nil || !strings.Contains(err.Error(), "timezone") {
		t.Errorf("periodic without zone: %v", err)
	}
	if _, err := call(t, ctx, sched, `{"name":"../evil","type":"immediate","text":"t"}`); err == nil {
		t.Error("path in name accepted")
	}
	out, err = call(t, ctx, sched, `{"name":"daily","type":"periodic","text":"Summary","schedule":"0 9 * * 1-5","timezone":"Europe/Vienna"}`)
	if err != nil || !strings.Contains(out, "next run Tue 2025-06-17 09:00 CEST") {
		t.Fatalf("schedule periodic: %q, %v", out, err)
	}

	out, err = call(t, ctx, list, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	if len(lines) != 2 || lines[0] != "- dentist.json: one-shot at "+at+": Remind Mario" || lines[1] != `- daily.json: periodic "0 9 * * 1-5" in Europe/Vienna, next Tue 2025-06-17 09:00 CEST: Summary` {
		t.Errorf("list_events =\n%s", out)
	}
	if out, _ := call(t, other, list, `{}`); out != "No events in this channel." {
		t.Errorf("list_events in another channel = %q", out)
	}

	if _, err := call(t, other, cancel, `{"name":"daily"}`); err == nil || !strings.Contains(err.Error(), "another channel") {
		t.Errorf("cancel from another channel: %v", err)
	}
	if out, err := call(t, ctx, cancel, `{"name":"daily.json"}`); err != nil || out != "Cancelled daily.json." {
		t.Errorf("cancel: %q, %v", out, err)
	}
	if f.exists("daily.json") || len(f.w.List("slack-acme/C1")) != 1 {
		t.Errorf("after cancel: file %v, list %+v", f.exists("daily.json"), f.w.List(""))
	}
	if _, err := call(t, ctx, cancel, `{"name":"daily"}`); err == nil || !strings.Contains(err.Error(), "no event named") {
		t.Errorf("cancel twice: %v", err)
	}
	// The scheduled one-shot fires from the file the tool wrote.
	f.clk.Advance(2 * time.Hour)
	if sb := f.sink.next(t); sb.f.File != "dentist.json" || sb.f.Text != "Remind Mario" {
		t.Errorf("fired %+v", sb.f)
	}
}
