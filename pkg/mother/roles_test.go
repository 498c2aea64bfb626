package mother

import (
	"testing"

	"github.com/mother-chat/mother/pkg/config"
)

// TestRolesMayRecallChannel: the hook recall (issue 46) asks before it
// searches another channel. Its own channel always; another channel only
// with recall.otherChannels (admins by default, or a role given it);
// never another person's DM.
func TestRolesMayRecallChannel(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(h *harness) {
		h.cfg.Roles = config.Roles{
			Define:   map[string]config.RoleDef{"archivist": {May: []string{"talk", "recall.otherChannels"}}},
			Adapters: map[string]config.AdapterRoles{"rec": {Members: map[string][]string{"archivist": {"UARCH"}}}},
		}
	})
	for _, c := range []struct {
		name, to, user string
		dm             bool
		want           bool
		sentence       string
	}{
		{"own channel", "C1", "UJOE", false, true, ""},
		{"admin, another channel", "C2", "UADMIN", false, true, ""},
		{"a role with the permission", "C2", "UARCH", false, true, ""},
		{"a member, another channel", "C2", "UJOE", false, false, "Only members of archivist can search other channels."},
		{"an admin, another person's DM", "D9", "UADMIN", true, false, "I never search another person's direct messages."},
	} {
		s, ok := h.m.mayRecallChannel(t.Context(), "rec", "C1", c.to, c.user, c.dm)
		if ok != c.want || s != c.sentence {
			t.Errorf("%s: mayRecallChannel = %q, %v; want %q, %v", c.name, s, ok, c.sentence, c.want)
		}
	}
}
