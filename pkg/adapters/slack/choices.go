package slack

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/slack-go/slack"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/render"
)

// Buttons: the stop button of a working message, and the choices of a
// message posted with PostChoices (a section and an actions block whose
// buttons carry action_id choiceActionPrefix+n and the choice's id as
// their value). A click arrives in an interactive envelope (block_actions)
// over the socket; the envelope is acknowledged before anything else (see
// events) and the click handed to Mother.

const (
	// choiceActionPrefix starts the action_id of a choice button.
	choiceActionPrefix = "mother_choice_"
	// choiceBlockID is the block_id of the actions block of choices.
	choiceBlockID = "mother_choices"
	// sectionLimit keeps a section's text under Slack's 3,000 characters.
	sectionLimit = 2900
)

var (
	_ chat.Chooser      = (*Adapter)(nil)
	_ chat.ClickReplier = (*Adapter)(nil)
)

// choiceBlocks shows text with one button per choice under it.
func choiceBlocks(text string, choices []chat.Choice) slack.MsgOption {
	buttons := make([]slack.BlockElement, 0, len(choices))
	for n, c := range choices {
		b := slack.NewButtonBlockElement(choiceActionPrefix+strconv.Itoa(n), c.ID, slack.NewTextBlockObject(slack.PlainTextType, c.Label, false, false))
		switch c.Style {
		case chat.ChoicePrimary:
			b = b.WithStyle(slack.StylePrimary)
		case chat.ChoiceDanger:
			b = b.WithStyle(slack.StyleDanger)
		}
		buttons = append(buttons, b)
	}
	return slack.MsgOptionBlocks(
		slack.NewSectionBlock(inertText(text), nil, nil),
		slack.NewActionBlock(choiceBlockID, buttons...),
	)
}

// PostChoices implements chat.Chooser: the text (split if long) with the
// buttons under its last part, whose ts it returns.
func (a *Adapter) PostChoices(ctx context.Context, channelID, markdown string, choices []chat.Choice) (string, error) {
	if err := chat.CheckChoices(choices); err != nil {
		return "", fmt.Errorf("slack: post choices: %w", err)
	}
	parts := render.Split(render.ToSlack(markdown, nil), sectionLimit)
	if len(parts) == 0 {
		return "", errors.New("slack: post choices: empty text")
	}
	ts := ""
	for n, p := range parts {
		opts := []slack.MsgOption{slack.MsgOptionText(p, false), slack.MsgOptionDisableLinkUnfurl()}
		if n == len(parts)-1 {
			opts = append(opts, choiceBlocks(p, choices))
		}
		err := a.retry(ctx, func() error {
			var err error
			_, ts, err = a.api.PostMessageContext(ctx, channelID, opts...)
			return rateLimited(err)
		})
		if err != nil {
			return "", fmt.Errorf("slack: post choices to %s: %w", channelID, err)
		}
	}
	return ts, nil
}

// EndChoices implements chat.Chooser: the message gets markdown as its
// text and loses its blocks (buttons included).
func (a *Adapter) EndChoices(ctx context.Context, channelID, messageID, markdown string) error {
	text := render.Truncate(render.ToSlack(markdown, nil), messageLimit)
	err := a.retry(ctx, func() error {
		_, _, _, err := a.api.UpdateMessageContext(ctx, channelID, messageID, slack.MsgOptionText(text, false), slack.MsgOptionBlocks())
		return rateLimited(err)
	})
	if err != nil {
		return fmt.Errorf("slack: end choices of %s in %s: %w", messageID, channelID, err)
	}
	return nil
}

// ReplyToClick implements chat.ClickReplier with an ephemeral message to
// the user who clicked, in the click's channel (and thread).
func (a *Adapter) ReplyToClick(ctx context.Context, cl chat.ChannelMessage, markdown string) error {
	opts := []slack.MsgOption{slack.MsgOptionText(render.Truncate(render.ToSlack(markdown, nil), messageLimit), false)}
	if th, ok := cl.Metadata["threadTs"].(string); ok && isTS(th) {
		opts = append(opts, slack.MsgOptionTS(th))
	}
	err := a.retry(ctx, func() error {
		_, err := a.api.PostEphemeralContext(ctx, cl.ChannelID, cl.Sender.ID, opts...)
		return rateLimited(err)
	})
	if err != nil {
		return fmt.Errorf("slack: reply to click %s: %w", cl.ID, err)
	}
	return nil
}

// onInteraction handles clicks on Mother's buttons (block_actions). It
// runs on the socket's event goroutine: choices go through the queue,
// which may look users up over the network.
func (a *Adapter) onInteraction(cb slack.InteractionCallback) {
	if cb.Type != slack.InteractionTypeBlockActions {
		a.lg.Debug("ignoring Slack interaction", "type", cb.Type)
		return
	}
	channel := cb.Channel.ID
	if channel == "" {
		channel = cb.Container.ChannelID
	}
	for _, act := range cb.ActionCallback.BlockActions {
		if act == nil {
			continue
		}
		switch {
		case act.ActionID == stopActionID:
			if channel == "" || cb.User.ID == "" {
				a.lg.Warn("skipping stop click without user or channel")
				return
			}
			a.mu.Lock()
			in := a.inbox
			a.mu.Unlock()
			a.lg.Info("stop button clicked", "channel", channel, "user", cb.User.ID)
			go in.Stop(context.Background(), a.name, channel, cb.User.ID)
		case strings.HasPrefix(act.ActionID, choiceActionPrefix):
			if channel == "" || cb.User.ID == "" || act.Value == "" {
				a.lg.Warn("skipping malformed choice click", "channel", channel, "user", cb.User.ID)
				return
			}
			act := *act
			a.queue.Push(func(ctx context.Context) { a.choose(ctx, cb, channel, act) })
		default:
			a.lg.Warn("skipping click on an unknown button", "action_id", act.ActionID)
		}
		return // one action per block_actions payload
	}
	a.lg.Warn("skipping block_actions without actions")
}

// choose delivers a click on a choice button.
func (a *Adapter) choose(ctx context.Context, cb slack.InteractionCallback, channel string, act slack.BlockAction) {
	if err := chat.ValidID(channel); err != nil {
		a.lg.Warn("skipping choice click with an unusable channel id", "err", err)
		return
	}
	sender := a.user(ctx, cb.User.ID)
	if sender.Username == "" {
		sender.Username = cb.User.Name
	}
	id := act.ActionTs
	if id == "" {
		id = cb.TriggerID
	}
	ci, _ := a.channel(ctx, channel)
	msg := chat.ChannelMessage{
		ID:          id,
		ChannelID:   channel,
		Timestamp:   a.clock.Now(),
		Sender:      chat.Sender{ID: cb.User.ID, Username: sender.Username, DisplayName: sender.DisplayName},
		Text:        act.Value,
		Attachments: []chat.ChannelAttachment{},
		IsDM:        ci.Type == chat.ChannelDM || ci.Type == "" && strings.HasPrefix(channel, "D"),
		Choice:      true,
	}
	msg.ReplyTo = cb.Container.MessageTs
	if msg.ReplyTo == "" {
		msg.ReplyTo = cb.Message.Timestamp
	}
	if th := cb.Container.ThreadTs; th != "" && th != msg.ReplyTo {
		msg.Metadata = map[string]any{"threadTs": th}
	}
	a.mu.Lock()
	in := a.inbox
	stopping := a.stopping
	a.mu.Unlock()
	if in == nil || stopping {
		return
	}
	a.lg.Info("choice clicked", "channel", channel, "user", cb.User.ID, "message", msg.ReplyTo)
	// A click is handled, never stored: Deliver does not fail for it.
	_ = in.Deliver(ctx, a.name, msg, false)
}
