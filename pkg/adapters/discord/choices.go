package discord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/render"
)

// Buttons: the stop button of a working message, and the choices of a
// message posted with PostChoices (custom_id choicePrefix + the choice's
// id). A click arrives as INTERACTION_CREATE; it is acknowledged at once
// (a deferred update: the message stays as it is) and handed to Mother.

const (
	// choicePrefix starts the custom_id of a choice button.
	choicePrefix = "choice:"
	// interactionTTL is how long Discord accepts follow-ups to an
	// interaction (its token's life).
	interactionTTL = 15 * time.Minute
	// clickTimeout bounds acknowledging and delivering one click.
	clickTimeout = 30 * time.Second
)

// click is an interaction kept so that Mother can answer it privately.
type click struct {
	i  *discordgo.Interaction
	at time.Time
}

var (
	_ chat.Chooser      = (*Adapter)(nil)
	_ chat.ClickReplier = (*Adapter)(nil)
)

func choiceRow(choices []chat.Choice) []discordgo.MessageComponent {
	row := make([]discordgo.MessageComponent, 0, len(choices))
	for _, c := range choices {
		style := discordgo.SecondaryButton
		switch c.Style {
		case chat.ChoicePrimary:
			style = discordgo.PrimaryButton
		case chat.ChoiceDanger:
			style = discordgo.DangerButton
		}
		row = append(row, discordgo.Button{Label: c.Label, Style: style, CustomID: choicePrefix + c.ID})
	}
	return []discordgo.MessageComponent{discordgo.ActionsRow{Components: row}}
}

// PostChoices implements chat.Chooser: the text (split if long) with an
// action row of buttons under its last part, whose id it returns.
func (a *Adapter) PostChoices(ctx context.Context, channelID, markdown string, choices []chat.Choice) (string, error) {
	if err := chat.CheckChoices(choices); err != nil {
		return "", fmt.Errorf("discord: post choices: %w", err)
	}
	parts := render.Split(render.ToDiscord(markdown, nil), splitAt)
	if len(parts) == 0 {
		return "", errors.New("discord: post choices: empty text")
	}
	id := ""
	for n, p := range parts {
		send := &discordgo.MessageSend{Content: p, AllowedMentions: allowNone()}
		if n == len(parts)-1 {
			send.Components = choiceRow(choices)
		}
		err := a.retry(ctx, func() error {
			m, err := a.s.ChannelMessageSendComplex(channelID, send, discordgo.WithContext(ctx), noLibraryRetry)
			if err == nil {
				id = m.ID
			}
			return rateLimited(err)
		})
		if err != nil {
			return "", fmt.Errorf("discord: post choices to %s: %w", channelID, err)
		}
	}
	return id, nil
}

// EndChoices implements chat.Chooser: the message gets markdown as its
// text and loses its buttons.
func (a *Adapter) EndChoices(ctx context.Context, channelID, messageID, markdown string) error {
	text := render.Truncate(render.ToDiscord(markdown, nil), splitAt)
	none := []discordgo.MessageComponent{}
	err := a.retry(ctx, func() error {
		_, err := a.s.ChannelMessageEditComplex(&discordgo.MessageEdit{ID: messageID, Channel: channelID, Content: &text, Components: &none, AllowedMentions: allowNone()},
			discordgo.WithContext(ctx), noLibraryRetry)
		return rateLimited(err)
	})
	if err != nil {
		return fmt.Errorf("discord: end choices of %s in %s: %w", messageID, channelID, err)
	}
	return nil
}

// ReplyToClick implements chat.ClickReplier with an ephemeral follow-up
// of the click's interaction (possible for 15 minutes after the click).
func (a *Adapter) ReplyToClick(ctx context.Context, cl chat.ChannelMessage, markdown string) error {
	a.mu.Lock()
	c, ok := a.clicks[cl.ID]
	a.mu.Unlock()
	if !ok || a.clock.Now().Sub(c.at) > interactionTTL {
		return fmt.Errorf("discord: reply to click %s: not a click of the last %v", cl.ID, interactionTTL)
	}
	text := render.Truncate(render.ToDiscord(markdown, nil), splitAt)
	_, err := a.s.FollowupMessageCreate(c.i, true, &discordgo.WebhookParams{Content: text, Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: allowNone()},
		discordgo.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("discord: reply to click %s: %w", cl.ID, err)
	}
	return nil
}

// keepClickLocked remembers an interaction for ReplyToClick and forgets
// those whose token has expired.
func (a *Adapter) keepClickLocked(i *discordgo.Interaction) {
	now := a.clock.Now()
	for id, c := range a.clicks {
		if now.Sub(c.at) > interactionTTL {
			delete(a.clicks, id)
		}
	}
	a.clicks[i.ID] = click{i: i, at: now}
}

// onInteraction handles a click on one of Mother's buttons. Malformed
// interactions are logged and skipped; nothing here may panic the daemon.
func (a *Adapter) onInteraction(_ *discordgo.Session, ic *discordgo.InteractionCreate) {
	defer func() {
		if r := recover(); r != nil {
			a.lg.Error("skipping an interaction that broke the adapter", "panic", fmt.Sprint(r))
		}
	}()
	if ic == nil || ic.Interaction == nil || ic.Type != discordgo.InteractionMessageComponent {
		return
	}
	i := ic.Interaction
	data, ok := i.Data.(discordgo.MessageComponentInteractionData)
	user := i.User
	if i.Member != nil && i.Member.User != nil {
		user = i.Member.User
	}
	if !ok || data.CustomID == "" || user == nil || user.ID == "" || i.ChannelID == "" || i.ID == "" || i.Token == "" {
		a.lg.Warn("skipping malformed button click", "interaction", i.ID, "channel", i.ChannelID)
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), clickTimeout)
		defer cancel()
		// Discord wants an answer within 3 s, whatever the click was.
		if err := a.s.InteractionRespond(i, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}, discordgo.WithContext(ctx)); err != nil {
			a.lg.Warn("cannot acknowledge button click", "err", err)
		}
		channelID, threadID := i.ChannelID, ""
		if ci, err := a.channel(ctx, channelID); err == nil && ci.IsThread() && ci.ParentID != "" {
			channelID, threadID = ci.ParentID, i.ChannelID
		}
		a.mu.Lock()
		in := a.inbox
		a.mu.Unlock()
		if in == nil || a.isStopping() {
			return
		}
		switch {
		case data.CustomID == stopButtonID:
			a.lg.Info("stop button clicked", "channel", channelID, "user", user.ID)
			in.Stop(ctx, a.name, channelID, user.ID)
		case strings.HasPrefix(data.CustomID, choicePrefix):
			a.choose(ctx, in, i, user, channelID, threadID, strings.TrimPrefix(data.CustomID, choicePrefix))
		default:
			a.lg.Warn("skipping click on an unknown button", "custom_id", data.CustomID)
		}
	}()
}

// choose delivers a click on a choice button.
func (a *Adapter) choose(ctx context.Context, in chat.Inbox, i *discordgo.Interaction, user *discordgo.User, channelID, threadID, value string) {
	if err := chat.ValidID(channelID); err != nil || value == "" {
		a.lg.Warn("skipping a choice click with an unusable channel or value", "channel", channelID)
		return
	}
	a.mu.Lock()
	sender := a.learnUserLocked(user, memberNick(i.Member))
	a.keepClickLocked(i)
	a.mu.Unlock()
	msg := chat.ChannelMessage{
		ID:          i.ID,
		ChannelID:   channelID,
		Timestamp:   a.clock.Now(),
		Sender:      chat.Sender{ID: user.ID, Username: user.Username, DisplayName: sender.DisplayName, IsBot: user.Bot},
		Text:        value,
		Attachments: []chat.ChannelAttachment{},
		IsDM:        i.GuildID == "",
		Choice:      true,
	}
	if i.Message != nil {
		msg.ReplyTo = i.Message.ID
	}
	meta := map[string]any{}
	if i.GuildID != "" {
		meta["guildId"] = i.GuildID
	}
	if threadID != "" {
		meta["threadId"] = threadID
	}
	if len(meta) > 0 {
		msg.Metadata = meta
	}
	a.lg.Info("choice clicked", "channel", channelID, "user", user.ID, "message", msg.ReplyTo)
	// A click is handled, never stored: Deliver does not fail for it.
	_ = in.Deliver(ctx, a.name, msg, false)
}
