package setup

import "slices"

// defaultRole offers the role of everyone on a platform besides the
// admins (roles.adapters.<name>.default): member, as before roles
// existed, or guest, who may only talk. Asked only interactively; a
// non-interactive run keeps what is there. More (named roles, platform
// roles such as ref) is written by hand: docs/configuration.md#roles.
func (r *run) defaultRole(name, platform, ref string) error {
	if !r.o.Interactive {
		return nil
	}
	current := r.cfg.str("roles", "adapters", name, "default")
	def := current
	if def == "" {
		def = "member"
	}
	r.say("  Everyone else on %s: a member may start chicks, schedule events and use host tools; a guest may only talk to Mother.", platform)
	for {
		answer, err := r.p.ask("Everyone else is (member or guest)", def)
		if err != nil {
			return err
		}
		if !slices.Contains([]string{"member", "guest"}, answer) {
			r.say("  ✗ %q: answer member or guest (named roles and %s go into config.json's roles table by hand)", answer, ref)
			continue
		}
		if answer != current && !(current == "" && answer == "member") {
			r.put(answer, "roles", "adapters", name, "default")
		}
		r.say("  ✓ everyone else: %s (roles by platform, such as %s: docs/configuration.md#roles)", answer, ref)
		return nil
	}
}
