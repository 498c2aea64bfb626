package statuspage

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
)

type fakeRoles struct {
	roles    []chat.RoleAssignment
	refusals []chat.Refusal
}

func (f fakeRoles) RoleAssignments() []chat.RoleAssignment { return f.roles }
func (f fakeRoles) RecentRefusals() []chat.Refusal         { return f.refusals }

func TestRolesShownOnStatusPage(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	p := New(Options{Version: "v1", StartedAt: start, Clock: clock.NewFake(start)})
	var fs []chat.Refusal
	for i := range RecentRefusals + 2 {
		fs = append(fs, chat.Refusal{Time: start.Add(time.Duration(i) * time.Minute), Adapter: "discord", Channel: "42", User: "1004", Perm: "chicks:hard", Sentence: "Only members of ops can start chicks on the hard tier."})
	}
	fs[len(fs)-1].Perm = "talk"
	p.Watch(Sources{Roles: fakeRoles{
		roles: []chat.RoleAssignment{
			{Adapter: "discord", Role: "guest", Who: []string{"everyone"}, May: []string{"talk"}},
			{Adapter: "discord", Role: "ops", Who: []string{"role:5001", "1002"}, May: []string{"talk", "chicks:hard"}},
			{Adapter: "discord", Channel: "42", Role: "muted", Who: []string{"everyone"}},
		},
		refusals: fs,
	}})
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	html, _ := get(t, srv.URL+"/status")
	for _, want := range []string{
		`<tr data-role="discord ops"><td>discord</td><td>ops</td><td>role:5001, 1002</td><td>talk chicks:hard</td></tr>`,
		`<tr data-role="discord/42 muted"><td>discord/42</td><td>muted</td><td>everyone</td><td>nothing</td></tr>`,
		`<td>chicks:hard</td><td>Only members of ops can start chicks on the hard tier.</td>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("/status lacks %q:\n%s", want, html)
		}
	}
	js, _ := get(t, srv.URL+"/status.json")
	var snap Snapshot
	if err := json.Unmarshal([]byte(js), &snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Refusals) != RecentRefusals || snap.Refusals[0].Perm != "talk" || len(snap.Roles) != 3 {
		t.Errorf("status.json: %d refusals (want %d, newest first: talk), first %+v; roles %+v", len(snap.Refusals), RecentRefusals, snap.Refusals[0], snap.Roles)
	}
}
