package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/events"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hosttools"
	"github.com/mother-chat/mother/pkg/model/fallback"
)

// evil is what a hostile chick puts in its text: a window title ended by
// BEL, a clear screen, a clipboard write ended by ST, a C1 CSI and DEL.
const evil = "\x1b]0;pwned\x07[\x1b[2J]\x1b]52;c;cm0gLXJmIH4K\x1b\\\u009b31m\x7f"

// evilShown is evil as momctl shows it.
const evilShown = "^[]0;pwned^G[^[[2J]^[]52;c;cm0gLXJmIH4K^[\\^[[31m^?"

// hostileWorld is a Mother whose every string a chick (or a model, an
// engine, a tool server) could have written holds evil.
func hostileWorld() world {
	w := busy()
	for i := range w.chicks.infos {
		in := &w.chicks.infos[i]
		in.Channel += evil
		in.Tier += evil
		in.Host += evil
		in.Outcome = "outcome " + evil
		in.Goal = "goal " + evil
	}
	// The log is split in two writes by the fake, in the middle of a
	// character: C1 CSI is two bytes.
	w.chicks.logs["c-run"] = "log " + evil + " é\u009b\u009b end\n"
	var evs []hatchery.StoredEvent
	for i, e := range runEvents() {
		e.Event.Label += evil
		e.Event.Text += evil
		e.Event.Result += evil
		e.Event.Err += evil
		if len(e.Event.Args) > 0 {
			b, _ := json.Marshal(map[string]string{"command": evil})
			e.Event.Args = b
		}
		e.Event.ToolName += evil
		e.Seq = uint64(i + 1)
		evs = append(evs, e)
	}
	evs = append(evs, hatchery.StoredEvent{Seq: 99, Event: agent.Event{Type: agent.EventMessageDelta, Time: now, Text: "delta " + evil}})
	w.chicks.events["c-done"] = evs
	for i := range w.chicks.hosts {
		w.chicks.hosts[i].Err += evil
		w.chicks.hosts[i].EngineVersion += evil
	}
	for i := range w.models.budgets {
		w.models.budgets[i].Scope += evil
	}
	for k, u := range w.models.usage {
		for i := range u.Rows {
			u.Rows[i].Key += evil
		}
		w.models.usage[k] = u
	}
	w.models.providers = append(w.models.providers, fallback.Status{Name: "p" + evil, Down: true, Failures: 1, LastError: "down " + evil})
	w.events = append(w.events, events.Info{File: "f" + evil + ".json", Type: events.OneShot, Channel: "c" + evil, Next: now.Add(time.Hour), Text: evil, State: "scheduled"})
	w.adapters = append(w.adapters, chat.AdapterReport{Name: "a" + evil, Type: "t" + evil, Status: chat.AdapterStatus{State: chat.ConnDown, LastError: "lost " + evil}})
	w.servers = append(w.servers, hosttools.ServerStatus{Name: "s" + evil, Transport: "stdio", State: hosttools.StateRetrying, Error: "failed " + evil,
		Tools: []hosttools.Tool{{Qualified: "s.t" + evil, Description: "does " + evil, Schema: []byte(`{"type":"object"}`)}}})
	return w
}

// rawControls counts what a terminal would obey in out: ESC, BEL, the
// other C0 controls but newline and tab, DEL and the C1 controls.
func rawControls(out string) int {
	n := 0
	for _, r := range out {
		if r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r <= 0x9f {
			n++
		}
	}
	return n
}

// TestControlsShown: every command, in text and JSON, prints no control
// character a chick put in its text, and still shows the text. JSON
// keeps the value: it reads back as it was sent.
func TestControlsShown(t *testing.T) {
	tests := [][]string{
		{"chicks", "ls", "--all"},
		{"chicks", "ls", "--all", "--json"},
		{"chicks", "watch", "--all", "--count", "1"},
		{"chicks", "watch", "--all", "--json", "--count", "1"},
		{"chicks", "tail", "--deltas", "c-done"},
		{"chicks", "tail", "--json", "c-done"},
		{"chicks", "logs", "c-run"},
		{"chicks", "tail", "c-" + evil}, // Mother quotes the id she does not know
		{"status"},
		{"status", "--json"},
		{"events", "ls"},
		{"events", "ls", "--json"},
		{"tools", "ls"},
		{"tools", "ls", "--json"},
		{"usage", "--by", "tier"},
		{"usage", "--by", "tier", "--json"},
	}
	for _, args := range tests {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := serve(t, dir, hostileWorld())
			var stdout, stderr bytes.Buffer
			c := &cli{stdout: &stdout, stderr: &stderr, clock: clock.NewFake(now), loc: time.UTC, version: "1.4.1"}
			run(t.Context(), append([]string{"--socket", path}, args...), c, func(string) string { return "" })
			out := stdout.String() + stderr.String()
			if n := rawControls(out); n > 0 {
				t.Errorf("momctl %s printed %d control characters (%d ESC, %d BEL):\n%q", strings.Join(args, " "), n, strings.Count(out, "\x1b"), strings.Count(out, "\x07"), out)
			}
			if strings.Contains(strings.Join(args, " "), "--json") {
				if !strings.Contains(stdout.String(), `\u001b]0;pwned\u0007`) || !strings.Contains(stdout.String(), `\u009b31m\u007f`) {
					t.Errorf("the JSON does not keep the text escaped:\n%s", stdout.String())
				}
				dec := json.NewDecoder(strings.NewReader(stdout.String()))
				kept := false
				for dec.More() {
					var v any
					if err := dec.Decode(&v); err != nil {
						t.Fatalf("the JSON does not read back: %v\n%s", err, stdout.String())
					}
					b, _ := json.Marshal(v)
					kept = kept || strings.Contains(string(b), "\u009b31m\x7f")
				}
				if !kept {
					t.Errorf("the JSON read back lost the C1 CSI and DEL:\n%s", stdout.String())
				}
				return
			}
			if !strings.Contains(out, "pwned") || !strings.Contains(out, evilShown) && !strings.Contains(out, `\x1b]0;pwned\a`) {
				t.Errorf("the text around the controls is not shown:\n%s", out)
			}
		})
	}
}
