package discord

import (
	"context"
	"fmt"

	"github.com/bwmarrin/discordgo"
	"github.com/mother-chat/mother/pkg/chat"
)

var _ chat.MemberLookup = (*Adapter)(nil)

// MemberRefs implements chat.MemberLookup: the guild roles of userID
// ("role:<id>"), from GET /guilds/{guild}/members/{user}. The guild is
// the channel's, or the configured guildId for a DM.
func (a *Adapter) MemberRefs(ctx context.Context, channelID, userID string) ([]string, error) {
	guild := a.cfg.GuildID
	if ci, err := a.channel(ctx, channelID); err == nil && ci.GuildID != "" {
		guild = ci.GuildID
	} else if guild == "" {
		if err != nil {
			return nil, err
		}
		return nil, nil // a DM, and no guild configured: no guild roles
	}
	mem, err := a.s.GuildMember(guild, userID, discordgo.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("look up guild member %s: %w", userID, err)
	}
	refs := make([]string, 0, len(mem.Roles))
	for _, r := range mem.Roles {
		refs = append(refs, "role:"+r)
	}
	return refs, nil
}
