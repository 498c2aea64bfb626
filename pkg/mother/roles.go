package mother

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
)

// Roles (config.Roles): who may do what. A person's roles come from their
// platform user id (the id the adapter delivered with the message, or
// the id a chick was started for) and from what the platform says of that
// id (chat.MemberLookup), never from a name, a message's text, a chick
// or the model. Every check goes through permit; a refusal is one
// sentence, told to the model and posted to the channel, and kept for
// momctl and the status page (RecentRefusals).

// maxRefusals is how many refusals RecentRefusals keeps.
const maxRefusals = 100

// roleBook caches platform lookups and keeps the recent refusals.
type roleBook struct {
	mu      sync.Mutex
	cache   map[string]refsEntry
	refused []Refusal
}

type refsEntry struct {
	refs []string
	at   time.Time
	// failed: the lookup failed or was too slow (refs is nil).
	failed bool
}

// Refusal is one permission a person was refused.
type Refusal = chat.Refusal

// RecentRefusals returns the latest refusals, newest last.
func (m *Mother) RecentRefusals() []Refusal {
	m.roles.mu.Lock()
	defer m.roles.mu.Unlock()
	return slices.Clone(m.roles.refused)
}

// RoleAssignment is one role given on an adapter or channel.
type RoleAssignment = chat.RoleAssignment

var _ chat.Roles = (*Mother)(nil)

// RoleAssignments lists who has which role, adapter by adapter: the
// default role, the adapter's admins, and every members entry.
func (m *Mother) RoleAssignments() []RoleAssignment {
	rc := m.cfg.Roles
	var out []RoleAssignment
	names := make([]string, 0, len(m.cfg.Adapters))
	for n := range m.cfg.Adapters {
		names = append(names, n)
	}
	sort.Strings(names)
	add := func(adapter, channel, role string, who []string) {
		out = append(out, RoleAssignment{Adapter: adapter, Channel: channel, Role: role, Who: who, May: rc.RolePerms(role)})
	}
	for _, n := range names {
		ac := m.cfg.Adapters[n]
		if ac.Type == "cli" {
			add(n, "", config.RoleOwner, []string{"the operator at the terminal"})
			continue
		}
		ar := rc.Adapters[n]
		add(n, "", rc.DefaultRole(n, ""), []string{"everyone"})
		if len(ac.Admins) > 0 {
			add(n, "", config.RoleAdmin, slices.Clone(ac.Admins))
		}
		for _, role := range sortedKeys(ar.Members) {
			add(n, "", role, slices.Clone(ar.Members[role]))
		}
		for _, ch := range sortedKeys(ar.Channels) {
			cr := ar.Channels[ch]
			if cr.Default != "" {
				add(n, ch, cr.Default, []string{"everyone"})
			}
			for _, role := range sortedKeys(cr.Members) {
				add(n, ch, role, slices.Clone(cr.Members[role]))
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// rolesOf returns the roles of user in channel of adapter: the channel's
// default role, admin for the adapter's admins, and every role whose
// members name the user's id or a platform reference the platform gives
// for that id. The terminal (a "cli" adapter, or one without
// configuration) is the operator: owner. An empty user (a scheduled
// event's run) has the default role only.
func (m *Mother) rolesOf(ctx context.Context, adapter, channel, user string) []string {
	ac, ok := m.cfg.Adapters[adapter]
	if !ok || ac.Type == "cli" {
		return []string{config.RoleOwner}
	}
	rc := m.cfg.Roles
	roles := []string{rc.DefaultRole(adapter, channel)}
	if user == "" {
		return roles
	}
	add := func(r string) {
		if !slices.Contains(roles, r) {
			roles = append(roles, r)
		}
	}
	if slices.Contains(ac.Admins, user) {
		add(config.RoleAdmin)
	}
	ar := rc.Adapters[adapter]
	var refs []string
	looked := false
	check := func(members map[string][]string) {
		for _, role := range sortedKeys(members) {
			for _, w := range members[role] {
				switch {
				case w == user:
					add(role)
				case isRef(w):
					if !looked {
						refs, looked = m.memberRefs(ctx, adapter, channel, user), true
					}
					if slices.Contains(refs, w) {
						add(role)
					}
				}
			}
		}
	}
	check(ar.Members)
	if cr, ok := ar.Channels[channel]; ok {
		check(cr.Members)
	}
	return roles
}

func isRef(w string) bool {
	return strings.HasPrefix(w, config.RefDiscordRole) || strings.HasPrefix(w, config.RefSlackGroup) || w == config.RefChatAdmins
}

// memberRefs asks the platform what it knows of user (chat.MemberLookup),
// through a cache of roles.cacheTTL, waiting at most
// roles.lookupTimeout. A failed or slow lookup gives no references (the
// person keeps only what their id gives: fail closed), is logged, and is
// remembered for failedLookupTTL so a run's later tool calls do not wait
// again; a slow answer that comes after all fills the cache.
func (m *Mother) memberRefs(ctx context.Context, adapter, channel, user string) []string {
	a, ok := m.Adapter(adapter)
	if !ok {
		return nil
	}
	ml, ok := a.(chat.MemberLookup)
	if !ok {
		return nil
	}
	key := adapter + "\x00" + channel + "\x00" + user
	now := m.now()
	m.roles.mu.Lock()
	if e, ok := m.roles.cache[key]; ok {
		ttl := m.cfg.Roles.CacheTTL.Duration
		if e.failed {
			ttl = min(ttl, failedLookupTTL)
		}
		if now.Sub(e.at) < ttl {
			m.roles.mu.Unlock()
			return e.refs
		}
	}
	m.roles.mu.Unlock()
	timeout := m.cfg.Roles.LookupTimeout.Duration
	if timeout <= 0 {
		timeout = config.DefaultRolesLookupTimeout
	}
	// The lookup has its own deadline, a few times the wait: a late
	// answer still fills the cache for the next message.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*timeout)
	type answer struct {
		refs []string
		err  error
	}
	got := make(chan answer, 1)
	lg := m.logger.With("channel", chat.QualifiedID(adapter, channel), "user", user)
	go func() {
		defer cancel()
		refs, err := ml.MemberRefs(lctx, channel, user)
		if err == nil {
			m.cacheRefs(key, refs, false)
		}
		got <- answer{refs, err}
	}()
	wait, stop := context.WithTimeout(ctx, timeout)
	defer stop()
	select {
	case ans := <-got:
		if ans.err != nil {
			lg.Warn("platform role lookup failed; the person has only the roles their id and the default give", "err", ans.err)
			m.cacheRefs(key, nil, true)
			return nil
		}
		return ans.refs
	case <-wait.Done():
		lg.Warn("platform role lookup too slow; the person has only the roles their id and the default give", "timeout", timeout)
		m.cacheRefs(key, nil, true)
		return nil
	}
}

// failedLookupTTL is how long a failed or slow platform lookup is
// remembered (no references) before it is tried again.
const failedLookupTTL = 10 * time.Second

// cacheRefs keeps what a lookup found (failed: it found nothing in
// time). A failure does not replace a fresher answer.
func (m *Mother) cacheRefs(key string, refs []string, failed bool) {
	now := m.now()
	m.roles.mu.Lock()
	defer m.roles.mu.Unlock()
	if m.roles.cache == nil {
		m.roles.cache = map[string]refsEntry{}
	}
	if len(m.roles.cache) > 10000 {
		clear(m.roles.cache)
	}
	if old, ok := m.roles.cache[key]; failed && ok && !old.failed && now.Sub(old.at) < time.Second {
		return
	}
	m.roles.cache[key] = refsEntry{refs: refs, at: now, failed: failed}
}

// grants reports whether any of roles grants perm.
func (m *Mother) grants(roles []string, perm string) bool {
	for _, r := range roles {
		if config.Grants(m.cfg.Roles.RolePerms(r), perm) {
			return true
		}
	}
	return false
}

// permit checks that user may do perm in channel of adapter. If not, it
// returns the sentence saying who may, and records the refusal.
func (m *Mother) permit(ctx context.Context, adapter, channel, user, perm string) (string, bool) {
	roles := m.rolesOf(ctx, adapter, channel, user)
	if m.grants(roles, perm) {
		return "", true
	}
	sentence := m.refusalSentence(perm)
	m.logger.Info("refused by roles", "channel", chat.QualifiedID(adapter, channel), "user", user, "roles", strings.Join(roles, ","), "perm", perm)
	m.roles.mu.Lock()
	m.roles.refused = append(m.roles.refused, Refusal{Time: m.now(), Adapter: adapter, Channel: channel, User: user, Perm: perm, Sentence: sentence})
	if n := len(m.roles.refused); n > maxRefusals {
		m.roles.refused = slices.Delete(m.roles.refused, 0, n-maxRefusals)
	}
	m.roles.mu.Unlock()
	return sentence, false
}

// isAdminRole reports whether roles include owner or admin.
func isAdminRole(roles []string) bool {
	return slices.Contains(roles, config.RoleOwner) || slices.Contains(roles, config.RoleAdmin)
}

// refusalSentence says who may do perm: "Only members of ops can start
// chicks on the hard tier." Owner and admin are named only when no other
// role may.
func (m *Mother) refusalSentence(perm string) string {
	var builtin, named []string
	for _, r := range m.cfg.Roles.RoleNames() {
		if r == config.RoleOwner || r == config.RoleAdmin || !config.Grants(m.cfg.Roles.RolePerms(r), perm) {
			continue
		}
		switch r {
		case config.RoleMember:
			builtin = append(builtin, "members")
		case config.RoleGuest:
			builtin = append(builtin, "guests")
		default:
			named = append(named, r)
		}
	}
	holders := builtin
	if len(named) > 0 {
		holders = append(holders, "members of "+strings.Join(named, ", "))
	}
	who := "an admin"
	if len(holders) > 0 {
		who = orList(holders)
	}
	return fmt.Sprintf("Only %s can %s.", who, permAction(perm))
}

func orList(xs []string) string {
	if len(xs) == 1 {
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}

// permAction is what a permission lets a person do, in words.
func permAction(perm string) string {
	switch perm {
	case config.PermTalk:
		return "talk to me here"
	case config.PermChicks:
		return "start chicks"
	case config.PermEvents:
		return "schedule events"
	case config.PermEventsPeriod:
		return "schedule periodic events"
	case config.PermAccessApprove:
		return "answer access requests"
	case config.PermFilesWrite:
		return "change my own files"
	case config.PermRecallOther:
		return "search other channels"
	}
	if tier, ok := strings.CutPrefix(perm, config.PermChicks+":"); ok {
		return "start chicks on the " + tier + " tier"
	}
	if tool, ok := strings.CutPrefix(perm, config.PermToolPrefix); ok {
		return "use the host tool " + tool
	}
	return perm
}

// mayRecallChannel reports whether user, in channel from of adapter, may
// search channel to (recall, issue 46): their own channel always; another
// channel only with the recall.otherChannels permission (by default
// owner and admin), and never a DM that is not this one (isDM: to is a
// direct message channel). A refusal is recorded like every other; the
// sentence is returned for the model.
func (m *Mother) mayRecallChannel(ctx context.Context, adapter, from, to, user string, isDM bool) (string, bool) {
	if from == to {
		return "", true
	}
	if isDM {
		return "I never search another person's direct messages.", false
	}
	return m.permit(ctx, adapter, from, user, config.PermRecallOther)
}

// isApprover is mayApprove without recording a refusal: for showing
// the pending requests to whoever may answer them.
func (m *Mother) isApprover(ctx context.Context, adapter, channel, user string) bool {
	return m.grants(m.rolesOf(ctx, adapter, channel, user), config.PermAccessApprove)
}

// terminal reports whether adapter is the operator's terminal (a "cli"
// adapter, or one without configuration).
func (m *Mother) terminal(adapter string) bool {
	ac, ok := m.cfg.Adapters[adapter]
	return !ok || ac.Type == "cli"
}

// MayChickHostTool implements nest.HostToolGate: a chick may call host
// tool tool ("server.tool") only if the person it was started for may
// (tool:<server>.<tool>) in its channel. A chick an event started has
// the channel's default role. What the chick sends names the tool only;
// who it acts for is its record's.
func (m *Mother) MayChickHostTool(ctx context.Context, in hatchery.Info, tool string) (string, bool) {
	return m.permit(ctx, in.Adapter, in.ChannelID, in.StartedBy, config.PermToolPrefix+tool)
}
