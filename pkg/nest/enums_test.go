package nest_test

import (
	"testing"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/events"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hosttools"
	"github.com/mother-chat/mother/pkg/wire"
)

// TestAdminEnums: every domain value the admin service reports has its
// own enum value on the wire and comes back as the same string for
// momctl (pkg/wire keeps the tables without importing these packages).
func TestAdminEnums(t *testing.T) {
	type conv struct {
		name   string
		values []string
		round  func(string) (int32, string)
	}
	strs := func(vs ...any) []string {
		var out []string
		for _, v := range vs {
			switch v := v.(type) {
			case hatchery.State:
				out = append(out, string(v))
			case chat.ConnState:
				out = append(out, string(v))
			case events.Type:
				out = append(out, string(v))
			case hosttools.State:
				out = append(out, string(v))
			case string:
				out = append(out, v)
			}
		}
		return out
	}
	for _, c := range []conv{
		{"chick state", strs(hatchery.StateQueued, hatchery.StateStarting, hatchery.StateRunning, hatchery.StateStopping,
			hatchery.StateDone, hatchery.StateFailed, hatchery.StateKilled),
			func(s string) (int32, string) {
				e := wire.ChickStateToProto(s)
				return int32(e), wire.ChickStateName(e)
			}},
		{"adapter state", strs(chat.ConnConnected, chat.ConnReconnecting, chat.ConnDown),
			func(s string) (int32, string) {
				e := wire.AdapterStateToProto(s)
				return int32(e), wire.AdapterStateName(e)
			}},
		{"event type", strs(events.Immediate, events.OneShot, events.Periodic),
			func(s string) (int32, string) { e := wire.EventTypeToProto(s); return int32(e), wire.EventTypeName(e) }},
		{"tool server state", strs(hosttools.StateStarting, hosttools.StateRunning, hosttools.StateRetrying, hosttools.StateStopped, hosttools.StateDisabled),
			func(s string) (int32, string) {
				e := wire.ToolServerStateToProto(s)
				return int32(e), wire.ToolServerStateName(e)
			}},
		{"tool transport", strs("stdio", "http"),
			func(s string) (int32, string) {
				e := wire.ToolTransportToProto(s)
				return int32(e), wire.ToolTransportName(e)
			}},
	} {
		seen := map[int32]string{}
		for _, v := range c.values {
			e, back := c.round(v)
			if e == 0 {
				t.Errorf("%s %q has no enum value (UNSPECIFIED)", c.name, v)
			}
			if prev, dup := seen[e]; dup {
				t.Errorf("%s %q and %q share enum value %d", c.name, prev, v, e)
			}
			seen[e] = v
			if back != v {
				t.Errorf("%s %q comes back as %q", c.name, v, back)
			}
		}
	}
	if got := wire.ChickStateName(0); got != "unknown" {
		t.Errorf("ChickStateName(UNSPECIFIED) = %q, want unknown", got)
	}
}
