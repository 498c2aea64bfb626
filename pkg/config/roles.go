package config

import (
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Roles says who may do what (docs/configuration.md, "Roles"). A person's
// roles come from their platform user id and from what the platform knows
// of them (Discord guild roles, Slack user groups, Telegram chat
// administrators, WhatsApp group admins), never from a display name. A
// config that names no roles keeps the old behaviour: an adapter's admins
// are admins, everyone else Mother answers is a member.
type Roles struct {
	// Define names roles and their permissions; the built-in admin,
	// member and guest may be redefined here (owner may do everything and
	// cannot be).
	Define map[string]RoleDef `json:"define"`
	// Adapters says, per adapter name, who has which role.
	Adapters map[string]AdapterRoles `json:"adapters"`
	// CacheTTL is how long what a platform said about a person (their
	// guild roles, user groups, chat admin status) is kept.
	CacheTTL Duration `json:"cacheTTL"`
	// LookupTimeout is the longest a message or a tool call waits for the
	// platform's answer; past it the person has only the roles their id
	// gives (and the default role), and the log says so.
	LookupTimeout Duration `json:"lookupTimeout"`
}

// RoleDef is one role's permissions.
type RoleDef struct {
	// May lists the permissions: "talk", "chicks" (every tier) or
	// "chicks:<tier>", "events", "events.periodic", "tool:<server>.<tool>"
	// or "tool:<server>.*" or "tool:*", "access.approve", "files.write",
	// "recall.otherChannels", or "*" for all.
	May []string `json:"may"`
}

// AdapterRoles is who has which role on one adapter.
type AdapterRoles struct {
	// Default is the role of everyone no entry of Members names; every
	// person has it besides the roles Members gives them.
	Default string `json:"default"`
	// Members maps a role to who has it: platform user ids, or what the
	// platform knows: "role:<id>" (a Discord guild role id),
	// "group:<id>" (a Slack user group id), "chatAdmins" (the Telegram
	// chat's administrators, the WhatsApp group's admins).
	Members map[string][]string `json:"members"`
	// Channels overrides Default and adds Members per channel id.
	Channels map[string]ChannelRoles `json:"channels"`
}

// ChannelRoles is one channel's own role settings.
type ChannelRoles struct {
	// Default replaces the adapter's default role in this channel.
	Default string `json:"default"`
	// Members adds role holders in this channel.
	Members map[string][]string `json:"members"`
}

// Built-in roles.
const (
	RoleOwner  = "owner"
	RoleAdmin  = "admin"
	RoleMember = "member"
	RoleGuest  = "guest"
)

// Permissions (see RoleDef.May).
const (
	PermTalk          = "talk"
	PermChicks        = "chicks"
	PermEvents        = "events"
	PermEventsPeriod  = "events.periodic"
	PermAccessApprove = "access.approve"
	PermFilesWrite    = "files.write"
	PermRecallOther   = "recall.otherChannels"
	PermAll           = "*"
	// PermToolPrefix starts a host tool's permission: "tool:git.status".
	PermToolPrefix = "tool:"
)

// Member references to what a platform knows.
const (
	RefDiscordRole = "role:"
	RefSlackGroup  = "group:"
	RefChatAdmins  = "chatAdmins"
)

// Defaults of the roles table.
const (
	DefaultRolesCacheTTL      = time.Minute
	DefaultRolesLookupTimeout = 2 * time.Second
)

// BuiltinRolePerms are the built-in roles' permissions unless
// roles.define changes them. A member may do what everyone Mother answered
// could do before roles existed; approving network access and searching
// other channels stay with admins.
func BuiltinRolePerms(role string) []string {
	switch role {
	case RoleOwner, RoleAdmin:
		return []string{PermAll}
	case RoleMember:
		return []string{PermTalk, PermChicks, PermEvents, PermEventsPeriod, PermFilesWrite, PermToolPrefix + "*"}
	case RoleGuest:
		return []string{PermTalk}
	}
	return nil
}

// IsBuiltinRole reports whether role is owner, admin, member or guest.
func IsBuiltinRole(role string) bool {
	return role == RoleOwner || role == RoleAdmin || role == RoleMember || role == RoleGuest
}

// RolePerms are role's permissions under this config (nil: no such role).
func (r Roles) RolePerms(role string) []string {
	if role == RoleOwner {
		return []string{PermAll}
	}
	if d, ok := r.Define[role]; ok {
		return d.May
	}
	return BuiltinRolePerms(role)
}

// RoleNames lists every role this config knows, built-in first, then the
// defined ones in order.
func (r Roles) RoleNames() []string {
	out := []string{RoleOwner, RoleAdmin, RoleMember, RoleGuest}
	var named []string
	for n := range r.Define {
		if !IsBuiltinRole(n) {
			named = append(named, n)
		}
	}
	sort.Strings(named)
	return append(out, named...)
}

// DefaultRole is the role of everyone in channelID of adapter that no
// entry names: the channel's default, else the adapter's, else member.
func (r Roles) DefaultRole(adapter, channelID string) string {
	ar := r.Adapters[adapter]
	if c, ok := ar.Channels[channelID]; ok && c.Default != "" {
		return c.Default
	}
	if ar.Default != "" {
		return ar.Default
	}
	return RoleMember
}

// Grants reports whether a permission list grants perm: "*" grants all;
// "chicks" grants "chicks:<tier>"; "tool:*" and "tool:<server>.*" grant
// the tools they cover.
func Grants(may []string, perm string) bool {
	for _, g := range may {
		switch {
		case g == PermAll || g == perm:
			return true
		case g == PermChicks && strings.HasPrefix(perm, PermChicks+":"):
			return true
		case g == PermToolPrefix+"*" && strings.HasPrefix(perm, PermToolPrefix):
			return true
		case strings.HasPrefix(g, PermToolPrefix) && strings.HasSuffix(g, ".*"):
			server := strings.TrimSuffix(g, "*")
			if rest, ok := strings.CutPrefix(perm, server); ok && rest != "" {
				return true
			}
		}
	}
	return false
}

var roleNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$`)

func (c *Config) setRolesDefaults() {
	if c.Roles.CacheTTL.Duration == 0 {
		c.Roles.CacheTTL = Dur(DefaultRolesCacheTTL)
	}
	if c.Roles.LookupTimeout.Duration == 0 {
		c.Roles.LookupTimeout = Dur(DefaultRolesLookupTimeout)
	}
}

// validateRoles checks the roles table; every problem names its field.
func (c *Config) validateRoles(p *problems) {
	r := c.Roles
	if r.CacheTTL.Duration < 0 {
		p.bad("roles.cacheTTL", "must not be negative")
	}
	if r.LookupTimeout.Duration < 0 || r.LookupTimeout.Duration > time.Minute {
		p.bad("roles.lookupTimeout", "must be between 0 and 1m, got %s", r.LookupTimeout.Duration)
	}
	for name, d := range r.Define {
		f := "roles.define." + name
		switch {
		case !roleNameRE.MatchString(name):
			p.bad(f, "a role name is letters, digits, . _ - (at most 40), got %q", name)
		case name == RoleOwner:
			p.bad(f, "owner may always do everything and cannot be redefined")
		}
		for i, perm := range d.May {
			if msg := c.checkPerm(perm); msg != "" {
				p.bad(f+".may["+itoa(i)+"]", "%s", msg)
			}
		}
	}
	known := func(role string) bool { return IsBuiltinRole(role) || hasKey(r.Define, role) }
	for an, ar := range r.Adapters {
		f := "roles.adapters." + an
		ac, ok := c.Adapters[an]
		if !ok {
			p.bad(f, "no adapter %q in adapters", an)
			continue
		}
		if ar.Default != "" && !known(ar.Default) {
			p.bad(f+".default", "unknown role %q (owner, admin, member, guest or one of roles.define)", ar.Default)
		}
		c.checkMembers(p, f+".members", ac.Type, ar.Members, known)
		for ch, cr := range ar.Channels {
			cf := f + ".channels." + ch
			if strings.TrimSpace(ch) == "" {
				p.bad(cf, "a channel id is required")
			}
			if cr.Default != "" && !known(cr.Default) {
				p.bad(cf+".default", "unknown role %q (owner, admin, member, guest or one of roles.define)", cr.Default)
			}
			c.checkMembers(p, cf+".members", ac.Type, cr.Members, known)
		}
	}
}

func hasKey[V any](m map[string]V, k string) bool { _, ok := m[k]; return ok }

func (c *Config) checkMembers(p *problems, f, typ string, members map[string][]string, known func(string) bool) {
	for role, who := range members {
		rf := f + "." + role
		if !known(role) {
			p.bad(rf, "unknown role %q (owner, admin, member, guest or one of roles.define)", role)
		}
		for i, w := range who {
			ef := rf + "[" + itoa(i) + "]"
			switch {
			case strings.TrimSpace(w) == "" || strings.ContainsAny(w, " \t\n@"):
				p.bad(ef, "%q is not a user id: give the platform's user id (never a display name) or role:<id>, group:<id>, chatAdmins", w)
			case strings.HasPrefix(w, RefDiscordRole):
				if typ != "discord" {
					p.bad(ef, "%q: role:<id> is a Discord guild role; this adapter is %s", w, typ)
				} else if !allDigits(strings.TrimPrefix(w, RefDiscordRole)) {
					p.bad(ef, "%q: a Discord role id is a number (Server Settings, Roles, Copy Role ID)", w)
				}
			case strings.HasPrefix(w, RefSlackGroup):
				if typ != "slack" {
					p.bad(ef, "%q: group:<id> is a Slack user group; this adapter is %s", w, typ)
				} else if g := strings.TrimPrefix(w, RefSlackGroup); g == "" || !strings.HasPrefix(g, "S") {
					p.bad(ef, "%q: a Slack user group id starts with S (S0123ABCD), not its handle", w)
				}
			case w == RefChatAdmins:
				if typ != "telegram" && typ != "whatsapp" {
					p.bad(ef, "chatAdmins means a Telegram chat's administrators or a WhatsApp group's admins; this adapter is %s", typ)
				}
			}
		}
	}
}

// checkPerm returns what is wrong with one permission ("" if nothing).
func (c *Config) checkPerm(perm string) string {
	switch perm {
	case PermTalk, PermChicks, PermEvents, PermEventsPeriod, PermAccessApprove, PermFilesWrite, PermRecallOther, PermAll:
		return ""
	}
	if tier, ok := strings.CutPrefix(perm, PermChicks+":"); ok {
		if _, ok := c.Chicks.Tiers[tier]; !ok {
			names := make([]string, 0, len(c.Chicks.Tiers))
			for n := range c.Chicks.Tiers {
				names = append(names, n)
			}
			slices.Sort(names)
			return "unknown tier " + quote(tier) + " (chicks.tiers has " + strings.Join(names, ", ") + ")"
		}
		return ""
	}
	if t, ok := strings.CutPrefix(perm, PermToolPrefix); ok {
		server, tool, found := strings.Cut(t, ".")
		if t == "*" || found && server != "" && tool != "" {
			return ""
		}
		return quote(perm) + ": a host tool is tool:<server>.<tool>, tool:<server>.* or tool:*"
	}
	return "unknown permission " + quote(perm) + " (talk, chicks, chicks:<tier>, events, events.periodic, tool:<server>.<tool>, access.approve, files.write, recall.otherChannels, *)"
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func quote(s string) string { return strconv.Quote(s) }

func itoa(i int) string { return strconv.Itoa(i) }
