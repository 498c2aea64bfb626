package whatsapp

import (
	"slices"
	"testing"

	"go.mau.fi/whatsmeow/types"
)

// TestRolesWhatsAppGroupAdmins: "chatAdmins" from the group info's
// participants (IsAdmin), as whatsmeow's GetGroupInfo gives them. The
// fake is at the Client interface: WhatsApp's protocol is not served here.
func TestRolesWhatsAppGroupAdmins(t *testing.T) {
	t.Parallel()
	a, f, _ := newTestAdapter(t, nil)
	start(t, a)
	f.mu.Lock()
	f.admins = map[string][]types.JID{family.String(): {admin}}
	f.mu.Unlock()
	group := ChannelID(family)
	if refs, err := a.MemberRefs(t.Context(), group, admin.String()); err != nil || !slices.Equal(refs, []string{"chatAdmins"}) {
		t.Errorf("the group's admin: %v, %v; want [chatAdmins]", refs, err)
	}
	if refs, err := a.MemberRefs(t.Context(), group, luigi.String()); err != nil || len(refs) != 0 {
		t.Errorf("luigi: %v, %v; want none", refs, err)
	}
	if refs, err := a.MemberRefs(t.Context(), ChannelID(mario), mario.String()); err != nil || len(refs) != 0 {
		t.Errorf("a direct chat: %v, %v; want none", refs, err)
	}
}
