package slack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/slack-go/slack"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/render"
	"github.com/mother-chat/mother/pkg/render/runview"
)

// inertText is a block's mrkdwn text as Mother wrote it: verbatim, so
// that Slack does not parse mentions or channel names out of plain words
// (@channel, @here, #general) as it does for blocks by default. Live
// mentions are only those written as <@U123>, which render writes for
// Mother's own mentions alone.
func inertText(text string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, text, false, true)
}

// workingBlocks shows text with a stop button under it.
func workingBlocks(text string) slack.MsgOption {
	return slack.MsgOptionBlocks(
		slack.NewSectionBlock(inertText(render.Truncate(text, 2900)), nil, nil),
		slack.NewActionBlock("mother", slack.NewButtonBlockElement(stopActionID, "stop", slack.NewTextBlockObject(slack.PlainTextType, "Stop", false, false)).WithStyle(slack.StyleDanger)),
	)
}

// NewReply implements chat.Adapter. The working message and the answer go
// into the channel (or into the thread the trigger came from); tool
// details, usage and long answers in full go into the working message's
// thread.
func (a *Adapter) NewReply(ctx context.Context, channelID string, trigger *chat.ChannelMessage, opts chat.ReplyOptions) chat.Reply {
	thread := ""
	if trigger != nil {
		if ts, ok := trigger.Metadata["threadTs"].(string); ok && isTS(ts) {
			thread = ts
		}
	}
	s := &surface{a: a, channel: channelID, thread: thread}
	return runview.New(ctx, s, runview.Options{
		Dialect:        render.Slack,
		Title:          opts.Title,
		Limit:          messageLimit,
		ThreadOverflow: true,
		// A thread cannot hold a thread: answers inside one stay plain.
		Details: !opts.Quiet && thread == "",
		MinEdit: a.opts.MinEdit,
		Grace:   a.opts.Grace,
		Logger:  a.lg.With("channel", channelID),
	})
}

// surface is runview's Slack side for one run.
type surface struct {
	a       *Adapter
	channel string
	thread  string // answer inside this thread ("" for the channel)
}

var _ runview.Surface = (*surface)(nil)

// rateLimited maps slack-go's 429 error to runview's.
func rateLimited(err error) error {
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return &runview.RateLimitError{After: rl.RetryAfter, Err: err}
	}
	return err
}

func (s *surface) post(ctx context.Context, thread, text string, working bool) (string, error) {
	opts := []slack.MsgOption{slack.MsgOptionText(text, false), slack.MsgOptionDisableLinkUnfurl()}
	if working {
		opts = append(opts, workingBlocks(text))
	}
	if thread != "" {
		opts = append(opts, slack.MsgOptionTS(thread))
	}
	_, ts, err := s.a.api.PostMessageContext(ctx, s.channel, opts...)
	if err != nil {
		return "", rateLimited(fmt.Errorf("chat.postMessage: %w", err))
	}
	return ts, nil
}

func (s *surface) PostMain(ctx context.Context, text string, working bool) (string, error) {
	return s.post(ctx, s.thread, text, working)
}

func (s *surface) EditMain(ctx context.Context, id, text string, working bool) error {
	blocks := slack.MsgOptionBlocks() // none: the stop button goes
	if working {
		blocks = workingBlocks(text)
	}
	_, _, _, err := s.a.api.UpdateMessageContext(ctx, s.channel, id, slack.MsgOptionText(text, false), blocks)
	if err != nil {
		return rateLimited(fmt.Errorf("chat.update: %w", err))
	}
	return nil
}

func (s *surface) DeleteMain(ctx context.Context, id string) error {
	if _, _, err := s.a.api.DeleteMessageContext(ctx, s.channel, id); err != nil {
		return rateLimited(fmt.Errorf("chat.delete: %w", err))
	}
	return nil
}

// PostDetail posts in the main message's thread (or the thread the run
// answers in), waiting out rate limits so no detail is lost.
func (s *surface) PostDetail(ctx context.Context, mainID, text string) error {
	thread := mainID
	if s.thread != "" {
		thread = s.thread
	}
	return s.a.retry(ctx, func() error {
		_, err := s.post(ctx, thread, text, false)
		return err
	})
}

func (s *surface) PostMore(ctx context.Context, text string) (string, error) {
	return s.post(ctx, s.thread, text, false)
}

// retry runs f, waiting out up to three rate-limit answers.
func (a *Adapter) retry(ctx context.Context, f func() error) error {
	return runview.Retry(ctx, clock.Real{}, a.lg, "Slack", "retry_after", 100*time.Millisecond, f)
}

// Post implements chat.Adapter: a notice (markdown), split if long. It
// mentions nobody.
func (a *Adapter) Post(ctx context.Context, channelID, markdown string) (string, error) {
	return a.PostMentioning(ctx, channelID, markdown, nil)
}

var _ chat.Mentioner = (*Adapter)(nil)

// PostMentioning implements chat.Mentioner: Post, with the Text of each of
// Mother's mentions made a live <@id>.
func (a *Adapter) PostMentioning(ctx context.Context, channelID, markdown string, mentions []chat.Mention) (string, error) {
	first := ""
	for _, p := range render.Split(render.ToSlack(markdown, mentions), messageLimit) {
		var ts string
		err := a.retry(ctx, func() error {
			var perr error
			_, ts, perr = a.api.PostMessageContext(ctx, channelID, slack.MsgOptionText(p, false), slack.MsgOptionDisableLinkUnfurl())
			return rateLimited(perr)
		})
		if err != nil {
			return first, fmt.Errorf("slack: post to %s: %w", channelID, err)
		}
		if first == "" {
			first = ts
		}
	}
	return first, nil
}

// Upload implements chat.Uploader with files.uploadV2 (get an upload URL,
// send the bytes, complete the upload into exactly channelID). Nothing is
// shared between concurrent uploads. slack-go streams the file from disk
// (a multipart body through a pipe); at most upload.Concurrent uploads
// run at once.
func (a *Adapter) Upload(ctx context.Context, channelID, path, title string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("slack: upload: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("slack: upload %s: not a regular file", filepath.Base(path))
	}
	if st.Size() == 0 {
		return fmt.Errorf("slack: upload %s: empty files cannot be uploaded", filepath.Base(path))
	}
	name := filepath.Base(path)
	if title == "" {
		title = name
	}
	release, err := a.uploads.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("slack: upload %s: %w", name, err)
	}
	defer release()
	_, err = a.api.UploadFileContext(ctx, slack.UploadFileParameters{
		File: path, Filename: name, FileSize: int(st.Size()), Title: title, Channel: channelID,
	})
	if err != nil {
		return fmt.Errorf("slack: upload %s to %s: %w", name, channelID, err)
	}
	return nil
}

// DirectMessage implements chat.DirectMessenger: a post in the DM with
// userID, which conversations.open opens (or finds) first.
func (a *Adapter) DirectMessage(ctx context.Context, userID, markdown string) error {
	ch, _, _, err := a.api.OpenConversationContext(ctx, &slack.OpenConversationParameters{Users: []string{userID}})
	if err != nil {
		return fmt.Errorf("slack: open a DM with %s: %w", userID, err)
	}
	_, err = a.Post(ctx, ch.ID, markdown)
	return err
}
