package whatsapp

import (
	"context"
	"fmt"

	"go.mau.fi/whatsmeow/types"

	"github.com/mother-chat/mother/pkg/chat"
)

var _ chat.MemberLookup = (*Adapter)(nil)

// MemberRefs implements chat.MemberLookup: "chatAdmins" when userID (a
// phone-number or LID JID) is an admin of the group channelID is, from the
// group info (participants' IsAdmin, IsSuperAdmin). A direct chat has no
// admins.
func (a *Adapter) MemberRefs(ctx context.Context, channelID, userID string) ([]string, error) {
	jid, err := parseChannel(channelID)
	if err != nil {
		return nil, err
	}
	if jid.Server != types.GroupServer {
		return nil, nil
	}
	a.mu.Lock()
	cli := a.client
	a.mu.Unlock()
	if cli == nil {
		return nil, fmt.Errorf("whatsapp is not connected")
	}
	gi, err := cli.GetGroupInfo(ctx, jid)
	if err != nil {
		return nil, fmt.Errorf("get group info: %w", err)
	}
	for _, p := range gi.Participants {
		if !p.IsAdmin && !p.IsSuperAdmin {
			continue
		}
		for _, id := range []types.JID{p.JID, p.PhoneNumber, p.LID} {
			if !id.IsEmpty() && id.ToNonAD().String() == userID {
				return []string{"chatAdmins"}, nil
			}
		}
	}
	return nil, nil
}
