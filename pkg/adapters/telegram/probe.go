package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot"
)

// Identity is what Telegram says about a bot token (getMe). `mother
// setup` shows it when a token is pasted.
type Identity struct {
	ID       int64
	Username string
	Name     string
}

// Member is a user who wrote to the bot recently.
type Member struct {
	ID, Name string
}

// ErrUnauthorized is Telegram refusing the token.
var ErrUnauthorized = errors.New("token refused by Telegram (401 Unauthorized): copy it again from @BotFather (/token)")

func probeAPI(s Settings) string {
	if s.APIURL == "" {
		return DefaultAPIURL
	}
	return strings.TrimSuffix(s.APIURL, "/")
}

// Probe checks the bot token with getMe.
func Probe(ctx context.Context, s Settings) (Identity, error) {
	if !validToken(s.BotToken.Value()) {
		return Identity{}, errors.New("a Telegram bot token looks like 123456789:AA... (the bot id, a colon, the secret)")
	}
	b, err := bot.New(s.BotToken.Value(), bot.WithSkipGetMe(), bot.WithServerURL(probeAPI(s)),
		bot.WithHTTPClient(20*time.Second, &http.Client{Timeout: 20 * time.Second}))
	if err != nil {
		return Identity{}, fmt.Errorf("telegram: %s", redact(err.Error(), s))
	}
	me, err := b.GetMe(ctx)
	if err != nil {
		if errors.Is(err, bot.ErrorUnauthorized) || errors.Is(err, bot.ErrorNotFound) {
			return Identity{}, ErrUnauthorized
		}
		return Identity{}, fmt.Errorf("getMe: %s", redact(err.Error(), s))
	}
	name := strings.TrimSpace(me.FirstName + " " + me.LastName)
	return Identity{ID: me.ID, Username: me.Username, Name: name}, nil
}

// RecentUsers lists the people whose messages to the bot Telegram still
// holds (getUpdates without an offset, which confirms nothing: the
// adapter still receives them). A bot cannot list users otherwise, so
// setup asks the operator to message the bot first. With a webhook set,
// Telegram refuses getUpdates and this fails.
func RecentUsers(ctx context.Context, s Settings) ([]Member, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, probeAPI(s)+"/bot"+s.BotToken.Value()+"/getUpdates",
		strings.NewReader(`{"timeout":0,"allowed_updates":["message"]}`))
	if err != nil {
		return nil, errors.New("getUpdates: bad apiURL")
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("getUpdates: %s", redact(err.Error(), s))
	}
	defer resp.Body.Close()
	var body struct {
		OK          bool   `json:"ok"`
		Description string `json:"description"`
		Result      []struct {
			Message *struct {
				From *struct {
					ID        int64  `json:"id"`
					IsBot     bool   `json:"is_bot"`
					FirstName string `json:"first_name"`
					LastName  string `json:"last_name"`
					Username  string `json:"username"`
				} `json:"from"`
			} `json:"message"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("getUpdates: HTTP %d, unreadable answer", resp.StatusCode)
	}
	if !body.OK {
		return nil, fmt.Errorf("getUpdates: %s", body.Description)
	}
	seen := map[int64]bool{}
	var out []Member
	for _, u := range body.Result {
		if u.Message == nil || u.Message.From == nil || u.Message.From.IsBot || seen[u.Message.From.ID] {
			continue
		}
		f := u.Message.From
		seen[f.ID] = true
		name := strings.TrimSpace(f.FirstName + " " + f.LastName)
		if f.Username != "" {
			name += " (@" + f.Username + ")"
		}
		out = append(out, Member{ID: strconv.FormatInt(f.ID, 10), Name: name})
	}
	return out, nil
}

func redact(msg string, s Settings) string {
	if tok := s.BotToken.Value(); tok != "" {
		msg = strings.ReplaceAll(msg, tok, "[token]")
	}
	return msg
}
