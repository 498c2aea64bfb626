package config

import (
	"strings"
	"testing"
)

func TestRolesConfigErrorsNameTheField(t *testing.T) {
	t.Parallel()
	c := &Config{Adapters: map[string]Adapter{"discord": {Type: "discord"}, "slack": {Type: "slack"}}}
	c.Chicks.Tiers = map[string]Tier{"local": {Provider: "ollama", Model: "m"}}
	c.Roles = Roles{
		Define: map[string]RoleDef{"ops": {May: []string{"chicks:hard", "fly", "tool:nodot"}}, "owner": {}},
		Adapters: map[string]AdapterRoles{
			"discord": {Default: "boss", Members: map[string][]string{"ops": {"@mario", "group:S1", "role:abc"}, "nobody": {"1"}}},
			"slack":   {Members: map[string][]string{"ops": {"group:ops"}}, Channels: map[string]ChannelRoles{"C1": {Default: "x"}}},
			"gone":    {},
		},
	}
	var p problems
	c.validateRoles(&p)
	got := p.es.Error()
	for _, want := range []string{
		`roles.define.ops.may[0]: unknown tier "hard"`,
		`roles.define.ops.may[1]: unknown permission "fly"`,
		`roles.define.ops.may[2]: "tool:nodot"`,
		`roles.define.owner: owner may always do everything`,
		`roles.adapters.discord.default: unknown role "boss"`,
		`roles.adapters.discord.members.ops[0]: "@mario" is not a user id`,
		`roles.adapters.discord.members.ops[1]: "group:S1": group:<id> is a Slack user group`,
		`roles.adapters.discord.members.ops[2]: "role:abc": a Discord role id is a number`,
		`roles.adapters.discord.members.nobody: unknown role "nobody"`,
		`roles.adapters.slack.members.ops[0]: "group:ops": a Slack user group id starts with S`,
		`roles.adapters.slack.channels.C1.default: unknown role "x"`,
		`roles.adapters.gone: no adapter "gone"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("validateRoles: no %q in\n%s", want, got)
		}
	}
	ok := &Config{Adapters: map[string]Adapter{"discord": {Type: "discord"}}}
	ok.Roles.Adapters = map[string]AdapterRoles{"discord": {Default: "guest", Members: map[string][]string{"admin": {"123"}, "member": {"role:456"}}}}
	var q problems
	ok.validateRoles(&q)
	if len(q.es) != 0 {
		t.Errorf("a good roles table: %v", q.es)
	}
}

func TestRolesGrants(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		may  []string
		perm string
		want bool
	}{
		{[]string{"chicks"}, "chicks:hard", true},
		{[]string{"chicks:local"}, "chicks:hard", false},
		{[]string{"events"}, "events.periodic", false},
		{[]string{"tool:git.*"}, "tool:git.push", true},
		{[]string{"tool:git.*"}, "tool:gitx.push", false},
		{[]string{"tool:*"}, "tool:a.b", true},
		{[]string{"*"}, "access.approve", true},
		{nil, "talk", false},
	} {
		if got := Grants(c.may, c.perm); got != c.want {
			t.Errorf("Grants(%q, %q) = %v, want %v", c.may, c.perm, got, c.want)
		}
	}
}
