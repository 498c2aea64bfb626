package discord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/bwmarrin/discordgo"
)

// Identity is what Discord says about a bot token: the bot user and the
// guilds (servers) it is in. `mother setup` shows it when a token is
// pasted.
type Identity struct {
	BotID, BotName string
	Guilds         []Guild
}

// Guild is a guild the bot is in.
type Guild struct{ ID, Name string }

// Member is a user of a guild.
type Member struct {
	ID, Name string
	Bot      bool
}

// ErrUnauthorized is Discord refusing the token.
var ErrUnauthorized = errors.New("token refused by Discord (401 Unauthorized): copy it again from the Developer Portal, Bot, Reset Token")

// probeSession is a REST-only session for s (the apiURL override
// applied), with a per-call timeout.
func probeSession(s Settings) (*discordgo.Session, error) {
	sess, err := discordgo.New("Bot " + s.BotToken.Value())
	if err != nil {
		return nil, err
	}
	rt, err := apiTransport(s.APIURL, http.DefaultTransport)
	if err != nil {
		return nil, fmt.Errorf("apiURL: %w", err)
	}
	sess.Client = &http.Client{Transport: rt, Timeout: 20 * time.Second}
	sess.MaxRestRetries = 1
	return sess, nil
}

// Probe checks a bot token against Discord (GET /users/@me and
// /users/@me/guilds) and returns the bot and its guilds.
func Probe(ctx context.Context, s Settings) (Identity, error) {
	sess, err := probeSession(s)
	if err != nil {
		return Identity{}, err
	}
	me, err := sess.User("@me", discordgo.WithContext(ctx))
	if err != nil {
		return Identity{}, restError("read the bot user", err)
	}
	id := Identity{BotID: me.ID, BotName: me.Username}
	gs, err := sess.UserGuilds(200, "", "", false, discordgo.WithContext(ctx))
	if err != nil {
		return id, restError("list the bot's guilds", err)
	}
	for _, g := range gs {
		id.Guilds = append(id.Guilds, Guild{ID: g.ID, Name: g.Name})
	}
	return id, nil
}

// Members lists the users of a guild (GET /guilds/{id}/members; Discord
// answers only with the Server Members intent enabled for the bot), bots
// last.
func Members(ctx context.Context, s Settings, guildID string) ([]Member, error) {
	sess, err := probeSession(s)
	if err != nil {
		return nil, err
	}
	ms, err := sess.GuildMembers(guildID, "", 1000, discordgo.WithContext(ctx))
	if err != nil {
		return nil, restError("list the guild's members (enable the Server Members intent, or type user ids)", err)
	}
	var out []Member
	for _, m := range ms {
		if m.User == nil {
			continue
		}
		name := m.User.Username
		if m.Nick != "" {
			name = m.Nick + " (" + m.User.Username + ")"
		} else if m.User.GlobalName != "" && m.User.GlobalName != name {
			name = m.User.GlobalName + " (" + m.User.Username + ")"
		}
		out = append(out, Member{ID: m.User.ID, Name: name, Bot: m.User.Bot})
	}
	sort.SliceStable(out, func(i, j int) bool { return !out[i].Bot && out[j].Bot })
	return out, nil
}

func restError(op string, err error) error {
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusUnauthorized {
		return ErrUnauthorized
	}
	return fmt.Errorf("%s: %w", op, err)
}
