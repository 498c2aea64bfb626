package slack

import (
	"context"
	"fmt"
	"slices"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/slack-go/slack"
)

var _ chat.MemberLookup = (*Adapter)(nil)

// MemberRefs implements chat.MemberLookup: the user groups userID is in
// ("group:<id>"), from usergroups.list with include_users.
func (a *Adapter) MemberRefs(ctx context.Context, _ string, userID string) ([]string, error) {
	groups, err := a.api.GetUserGroupsContext(ctx, slack.GetUserGroupsOptionIncludeUsers(true))
	if err != nil {
		return nil, fmt.Errorf("list user groups: %w", err)
	}
	var refs []string
	for _, g := range groups {
		if slices.Contains(g.Users, userID) {
			refs = append(refs, "group:"+g.ID)
		}
	}
	return refs, nil
}
