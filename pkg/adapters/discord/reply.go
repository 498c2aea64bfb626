package discord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/render"
	"github.com/mother-chat/mother/pkg/render/runview"
)

// allowNone is the allowed_mentions of every message Mother posts: Discord
// parses no mention out of its text, so neither <@id>, <@&role>,
// @everyone nor @here in what a model or a chick wrote pings anyone.
func allowNone() *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
}

// allowOnly is allowNone but for the users of Mother's own mentions.
func allowOnly(mentions []chat.Mention) *discordgo.MessageAllowedMentions {
	am := allowNone()
	for _, m := range mentions {
		if m.ID != "" && !slices.Contains(am.Users, m.ID) {
			am.Users = append(am.Users, m.ID)
		}
	}
	return am
}

func stopButton() []discordgo.MessageComponent {
	return []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
		discordgo.Button{Label: "Stop", Style: discordgo.DangerButton, CustomID: stopButtonID},
	}}}
}

// NewReply implements chat.Adapter. The answer goes where the trigger was
// (its thread, if it came from one), as a reply to it; tool details go in
// a thread started from the working message (not in DMs or threads, which
// cannot hold one).
func (a *Adapter) NewReply(ctx context.Context, channelID string, trigger *chat.ChannelMessage, opts chat.ReplyOptions) chat.Reply {
	target := channelID
	replyTo := ""
	if trigger != nil {
		if th, ok := trigger.Metadata["threadId"].(string); ok && th != "" {
			target = th
		}
		if isSnowflake(trigger.ID) {
			replyTo = trigger.ID
		}
	}
	details := !opts.Quiet
	if ci, err := a.channel(ctx, target); err != nil || ci.IsThread() || ci.Type == discordgo.ChannelTypeDM || ci.Type == discordgo.ChannelTypeGroupDM {
		details = false
	}
	threadName := "Details"
	switch {
	case opts.Title != "":
		threadName = "Details: " + opts.Title
	case trigger != nil && strings.TrimSpace(trigger.Text) != "":
		threadName = "Details: " + strings.Join(strings.Fields(trigger.Text), " ")
	}
	s := &surface{a: a, channel: target, replyTo: replyTo, threadName: render.Truncate(threadName, 90)}
	return runview.New(ctx, s, runview.Options{
		Dialect: render.Discord,
		Title:   opts.Title,
		Limit:   splitAt,
		Details: details,
		MinEdit: a.opts.MinEdit,
		Grace:   a.opts.Grace,
		Logger:  a.lg.With("channel", channelID),
	})
}

// surface is runview's Discord side for one run.
type surface struct {
	a          *Adapter
	channel    string
	replyTo    string
	threadName string

	mu     sync.Mutex
	thread string
}

var _ runview.Surface = (*surface)(nil)

// noLibraryRetry makes discordgo return a 429 as an error instead of
// sleeping it out itself (a sleep that ignores the context), so that the
// rate limits of replies and notices reach Mother's path.
var noLibraryRetry = discordgo.WithRetryOnRatelimit(false)

// rateLimited maps discordgo's 429 error to runview's, the rate-limit path
// Slack's adapter uses too.
func rateLimited(err error) error {
	var rl *discordgo.RateLimitError
	if errors.As(err, &rl) && rl.RateLimit != nil && rl.TooManyRequests != nil {
		return &runview.RateLimitError{After: rl.RetryAfter, Err: err}
	}
	return err
}

// retry runs f, waiting out up to three rate-limit answers.
func (a *Adapter) retry(ctx context.Context, f func() error) error {
	return runview.Retry(ctx, a.clock, a.lg, "Discord", "retry_after", 100*time.Millisecond, f)
}

func (s *surface) PostMain(ctx context.Context, text string, working bool) (string, error) {
	send := &discordgo.MessageSend{Content: text, AllowedMentions: allowNone()}
	if working {
		send.Components = stopButton()
	}
	if s.replyTo != "" {
		send.Reference = &discordgo.MessageReference{MessageID: s.replyTo, ChannelID: s.channel, FailIfNotExists: new(bool)}
	}
	m, err := s.a.s.ChannelMessageSendComplex(s.channel, send, discordgo.WithContext(ctx), noLibraryRetry)
	if err != nil {
		return "", rateLimited(fmt.Errorf("post message: %w", err))
	}
	return m.ID, nil
}

func (s *surface) EditMain(ctx context.Context, id, text string, working bool) error {
	comps := []discordgo.MessageComponent{}
	if working {
		comps = stopButton()
	}
	_, err := s.a.s.ChannelMessageEditComplex(&discordgo.MessageEdit{ID: id, Channel: s.channel, Content: &text, Components: &comps, AllowedMentions: allowNone()}, discordgo.WithContext(ctx), noLibraryRetry)
	if err != nil {
		return rateLimited(fmt.Errorf("edit message: %w", err))
	}
	return nil
}

func (s *surface) DeleteMain(ctx context.Context, id string) error {
	if err := s.a.s.ChannelMessageDelete(s.channel, id, discordgo.WithContext(ctx), noLibraryRetry); err != nil {
		return rateLimited(fmt.Errorf("delete message: %w", err))
	}
	return nil
}

func (s *surface) PostDetail(ctx context.Context, mainID, text string) error {
	s.mu.Lock()
	thread := s.thread
	s.mu.Unlock()
	if thread == "" {
		ch, err := s.a.s.MessageThreadStartComplex(s.channel, mainID, &discordgo.ThreadStart{Name: s.threadName, AutoArchiveDuration: 1440}, discordgo.WithContext(ctx))
		if err != nil {
			return rateLimited(fmt.Errorf("start detail thread: %w", err))
		}
		thread = ch.ID
		s.a.mu.Lock()
		ci := s.a.learnChannelLocked(ch)
		ci.Mine = true
		if ci.ParentID == "" {
			ci.ParentID = s.channel
		}
		s.a.mu.Unlock()
		s.mu.Lock()
		s.thread = thread
		s.mu.Unlock()
	}
	// Waiting out rate limits so no detail is lost.
	return s.a.retry(ctx, func() error {
		_, err := s.a.s.ChannelMessageSendComplex(thread, &discordgo.MessageSend{Content: text, AllowedMentions: allowNone()}, discordgo.WithContext(ctx), noLibraryRetry)
		if err != nil {
			return rateLimited(fmt.Errorf("post in detail thread: %w", err))
		}
		return nil
	})
}

func (s *surface) PostMore(ctx context.Context, text string) (string, error) {
	m, err := s.a.s.ChannelMessageSendComplex(s.channel, &discordgo.MessageSend{Content: text, AllowedMentions: allowNone()}, discordgo.WithContext(ctx), noLibraryRetry)
	if err != nil {
		return "", rateLimited(fmt.Errorf("post message: %w", err))
	}
	return m.ID, nil
}

// Post implements chat.Adapter: a notice (markdown), split if long. It
// pings nobody.
func (a *Adapter) Post(ctx context.Context, channelID, markdown string) (string, error) {
	return a.PostMentioning(ctx, channelID, markdown, nil)
}

var _ chat.Mentioner = (*Adapter)(nil)

// PostMentioning implements chat.Mentioner: Post, with the Text of each of
// Mother's mentions made <@id> and those ids, only, allowed to ping.
func (a *Adapter) PostMentioning(ctx context.Context, channelID, markdown string, mentions []chat.Mention) (string, error) {
	parts := render.Split(render.ToDiscord(markdown, mentions), splitAt)
	first := ""
	for _, p := range parts {
		var m *discordgo.Message
		err := a.retry(ctx, func() error {
			var perr error
			m, perr = a.s.ChannelMessageSendComplex(channelID, &discordgo.MessageSend{Content: p, AllowedMentions: allowOnly(mentions)}, discordgo.WithContext(ctx), noLibraryRetry)
			return rateLimited(perr)
		})
		if err != nil {
			return first, fmt.Errorf("discord: post to %s: %w", channelID, err)
		}
		if first == "" {
			first = m.ID
		}
	}
	return first, nil
}

// DirectMessage implements chat.DirectMessenger: a post in the DM channel
// with user userID (Create DM opens it, or finds the one there is).
func (a *Adapter) DirectMessage(ctx context.Context, userID, markdown string) error {
	ch, err := a.s.UserChannelCreate(userID, discordgo.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("discord: open a DM with %s: %w", userID, err)
	}
	_, err = a.Post(ctx, ch.ID, markdown)
	return err
}
