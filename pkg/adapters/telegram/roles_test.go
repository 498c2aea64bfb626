package telegram

import (
	"slices"
	"strconv"
	"testing"
)

// TestRolesTelegramChatAdmins: "chatAdmins" comes from the fake's
// getChatAdministrators, spoken to by the real client library.
func TestRolesTelegramChatAdmins(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.SetAdmins(group.ID, mario.ID)
	a := newAdapter(t, fake, "", nil)
	start(t, a)
	gid := ChannelID(group.ID, 0)
	refs, err := a.MemberRefs(t.Context(), gid, strconv.FormatInt(mario.ID, 10))
	if err != nil || !slices.Equal(refs, []string{"chatAdmins"}) {
		t.Errorf("mario (the group's creator): %v, %v; want [chatAdmins]", refs, err)
	}
	refs, err = a.MemberRefs(t.Context(), gid, strconv.FormatInt(luigi.ID, 10))
	if err != nil || len(refs) != 0 {
		t.Errorf("luigi (no administrator): %v, %v; want none", refs, err)
	}
	fake.SetAdmins(group.ID, mario.ID, luigi.ID)
	if refs, err = a.MemberRefs(t.Context(), gid, strconv.FormatInt(luigi.ID, 10)); err != nil || !slices.Equal(refs, []string{"chatAdmins"}) {
		t.Errorf("luigi made an administrator: %v, %v", refs, err)
	}
	if refs, err = a.MemberRefs(t.Context(), ChannelID(dmChat.ID, 0), strconv.FormatInt(mario.ID, 10)); err != nil || len(refs) != 0 {
		t.Errorf("a private chat: %v, %v; want none", refs, err)
	}
}
