package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
)

// Identity is what Slack says about a bot token (auth.test): the
// workspace and the bot user. `mother setup` shows it when a token is
// pasted.
type Identity struct {
	Team, TeamID, BotID, BotName string
}

// Member is a user of the workspace.
type Member struct {
	ID, Name string
	Bot      bool
}

// ErrBotToken and ErrAppToken are Slack refusing a token.
var (
	ErrBotToken = errors.New("bot token refused by Slack (invalid_auth): copy the Bot User OAuth Token (xoxb-...) from OAuth & Permissions again")
	ErrAppToken = errors.New("app-level token refused by Slack (invalid_auth): make one with connections:write under Basic Information, App-Level Tokens")
)

func probeClient(s Settings) *slack.Client {
	apiURL := s.APIURL
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	if !strings.HasSuffix(apiURL, "/") {
		apiURL += "/"
	}
	return slack.New(s.BotToken.Value(), slack.OptionAPIURL(apiURL), slack.OptionAppLevelToken(s.AppToken.Value()),
		slack.OptionHTTPClient(&http.Client{Timeout: 20 * time.Second}))
}

// Probe checks the bot token with auth.test.
func Probe(ctx context.Context, s Settings) (Identity, error) {
	r, err := probeClient(s).AuthTestContext(ctx)
	if err != nil {
		if isInvalidAuth(err) {
			return Identity{}, ErrBotToken
		}
		return Identity{}, fmt.Errorf("auth.test: %w", err)
	}
	return Identity{Team: r.Team, TeamID: r.TeamID, BotID: r.UserID, BotName: r.User}, nil
}

// ProbeSocket opens a Socket Mode connection with the app-level token and
// closes it once Slack has said hello: the token works and the app has
// Socket Mode on.
func ProbeSocket(ctx context.Context, s Settings) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sm := socketmode.New(probeClient(s))
	done := make(chan error, 1)
	go func() { done <- sm.RunContext(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	for {
		select {
		case <-ctx.Done():
			return errors.New("no Socket Mode connection within 30s: is Socket Mode enabled for the app?")
		case err := <-done:
			done <- err
			if isInvalidAuth(err) {
				return ErrAppToken
			}
			return fmt.Errorf("socket mode: %w", err)
		case evt := <-sm.Events:
			switch evt.Type {
			case socketmode.EventTypeInvalidAuth:
				return ErrAppToken
			case socketmode.EventTypeHello, socketmode.EventTypeConnected:
				return nil
			case socketmode.EventTypeConnectionError:
				if ce, ok := evt.Data.(*slack.ConnectionErrorEvent); ok && isInvalidAuth(ce.ErrorObj) {
					return ErrAppToken
				}
			}
		}
	}
}

// Members lists the workspace's people (users.list), without deleted
// users, bots last.
func Members(ctx context.Context, s Settings) ([]Member, error) {
	us, err := probeClient(s).GetUsersContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("users.list (the bot needs users:read): %w", err)
	}
	var out []Member
	for _, u := range us {
		if u.Deleted || u.ID == "USLACKBOT" {
			continue
		}
		name := u.Name
		if rn := u.RealName; rn != "" && rn != name {
			name = rn + " (" + u.Name + ")"
		}
		out = append(out, Member{ID: u.ID, Name: name, Bot: u.IsBot})
	}
	sort.SliceStable(out, func(i, j int) bool { return !out[i].Bot && out[j].Bot })
	return out, nil
}

func isInvalidAuth(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "invalid_auth") || strings.Contains(err.Error(), "not_authed"))
}
