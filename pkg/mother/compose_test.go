package mother

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/prompt"
)

func TestComposeRun(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	base := runState{
		Adapter: "slack-acme", ChannelID: "C1",
		Workspace: "/data/workspace", ChannelDir: "/data/workspace/channels/slack-acme/C1",
		Users:    []chat.UserInfo{{ID: "U1", Username: "mario"}},
		Channels: []chat.ChannelInfo{{ID: "C1", Name: "general"}},
		Now:      now, Location: time.UTC,
		HostTools: []prompt.HostTool{{Name: "notes.add"}},
		Roles:     []string{"member"},
	}
	wantPrompt := prompt.Input{
		Flavour: prompt.Mother, Workspace: base.Workspace, ChannelDir: base.ChannelDir,
		Channel: "slack-acme/C1", Users: base.Users, Channels: base.Channels,
		Now: now, Location: time.UTC, HostTools: base.HostTools,
	}
	info := chat.RunInfo{Adapter: "slack-acme", ChannelID: "C1", ChannelDir: base.ChannelDir}
	msg := chat.ChannelMessage{ID: "m1", ChannelID: "C1", Sender: chat.Sender{ID: "U1"}, Text: "hi"}
	admin := chat.ChannelMessage{ID: "m2", ChannelID: "C1", Sender: chat.Sender{ID: "U9"}, Text: "hi"}
	noSender := chat.ChannelMessage{ID: "m3", ChannelID: "C1", Text: "hi"}
	with := func(f func(*runState)) runState { s := base; f(&s); return s }
	infoWith := func(user string, isAdmin bool) chat.RunInfo {
		i := info
		i.UserID, i.IsAdmin, i.Kind, i.ActingFor = user, isAdmin, "message", user
		return i
	}
	eventInfo := info
	eventInfo.Kind, eventInfo.Event, eventInfo.EventMaySchedule = "event", "check.json", true
	for _, c := range []struct {
		name string
		st   runState
		want runRequest
	}{
		{"message from a user", with(func(s *runState) { s.Job = Job{Trigger: msg} }),
			runRequest{Roles: []string{"member"}, Prompt: wantPrompt, Info: infoWith("U1", false), Trigger: &msg}},
		{"message from an admin", with(func(s *runState) {
			s.Job = Job{Kind: KindMessage, Trigger: admin}
			s.Roles = []string{"member", "admin"}
		}),
			runRequest{Roles: []string{"member", "admin"}, Prompt: wantPrompt, Info: infoWith("U9", true), Trigger: &admin}},
		{"an empty sender is never an admin", with(func(s *runState) { s.Job = Job{Trigger: noSender}; s.Roles = []string{"admin"} }),
			runRequest{Roles: []string{"admin"}, Prompt: wantPrompt, Info: infoWith("", false), Trigger: &noSender}},
		{"event: no trigger, no user, the event's file and leave", with(func(s *runState) {
			s.Job = Job{Kind: KindEvent, Trigger: msg, EventFile: "check.json", EventMaySchedule: true}
		}),
			runRequest{Roles: []string{"member"}, Prompt: wantPrompt, Info: eventInfo}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := composeRun(c.st)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("composeRun(%+v) =\n%+v\nwant\n%+v", c.st, got, c.want)
			}
		})
	}
}

func TestComposeAnswer(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	for _, c := range []struct {
		name              string
		out               agent.Output
		job               Job
		stopped, shutdown bool
		want              string
		silent            bool
	}{
		{"done", agent.Output{Final: "  answer \n", StopReason: agent.StopDone}, Job{}, false, false, "answer", false},
		{"done after a stop", agent.Output{Final: "answer", StopReason: agent.StopDone}, Job{}, true, false,
			"answer\n\n(I had already finished when you said stop.)", false},
		{"silent", agent.Output{Final: SilentMarker + " nothing to say", StopReason: agent.StopDone}, Job{Late: true}, true, false, "", true},
		{"stopped", agent.Output{Final: "partial", StopReason: agent.StopAborted}, Job{}, true, false, "partial\n\n" + NoticeStopped, false},
		{"stopped with nothing said", agent.Output{StopReason: agent.StopAborted}, Job{}, true, false, NoticeStopped, false},
		{"shutdown", agent.Output{StopReason: agent.StopAborted}, Job{}, false, true,
			"Interrupted: I am shutting down. I will pick this up again when I am back.", false},
		{"silent marker on an abort is not silence", agent.Output{Final: SilentMarker, StopReason: agent.StopAborted}, Job{}, true, false,
			SilentMarker + "\n\n" + NoticeStopped, false},
		{"error", agent.Output{StopReason: agent.StopError, Err: boom}, Job{}, false, false, UserError(boom), false},
		{"late, default note", agent.Output{Final: "answer", StopReason: agent.StopDone}, Job{Late: true}, false, false,
			"(Late answer: your message arrived while I was offline.)\n\nanswer", false},
		{"late, own note", agent.Output{Final: "answer", StopReason: agent.StopDone}, Job{Late: true, LateNote: "(Late.)"}, false, false,
			"(Late.)\n\nanswer", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, silent := composeAnswer(c.out, c.job, c.stopped, c.shutdown)
			if got != c.want || silent != c.silent {
				t.Errorf("composeAnswer = %q, %v, want %q, %v", got, silent, c.want, c.silent)
			}
		})
	}
}
