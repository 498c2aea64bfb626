package slack

import (
	"context"
	"fmt"
	"html"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/mother-chat/mother/pkg/adapters/internal/feed"
	"github.com/mother-chat/mother/pkg/chat"
)

// incoming is one message from any source (message event, app_mention,
// history) in one shape.
type incoming struct {
	msg         slack.Msg
	channel     string
	channelType string // "im", "mpim", "channel", "group" or "" (unknown)
	appMention  bool
	late        bool
}

// onEvent turns an Events API callback into queued work. It runs on the
// socket's event goroutine and never blocks on the network.
func (a *Adapter) onEvent(ev slackevents.EventsAPIEvent) {
	if in, ok := a.incomingOf(ev); ok {
		a.queue.Push(func(ctx context.Context) { a.handle(ctx, in) })
	}
}

// incomingOf picks the message out of an Events API callback: a message
// event or an app_mention; anything else is not for Mother.
func (a *Adapter) incomingOf(ev slackevents.EventsAPIEvent) (incoming, bool) {
	if ev.Type != slackevents.CallbackEvent {
		return incoming{}, false
	}
	switch e := ev.InnerEvent.Data.(type) {
	case *slackevents.MessageEvent:
		if e == nil || e.Message == nil {
			a.lg.Warn("skipping malformed message event")
			return incoming{}, false
		}
		m := *e.Message
		if m.Timestamp == "" {
			m.Timestamp = e.TimeStamp
		}
		if m.Channel == "" {
			m.Channel = e.Channel
		}
		if e.SubType != "" && m.SubType == "" {
			m.SubType = e.SubType
		}
		return incoming{msg: m, channel: e.Channel, channelType: e.ChannelType}, true
	case *slackevents.AppMentionEvent:
		if e == nil {
			return incoming{}, false
		}
		m := slack.Msg{User: e.User, Text: e.Text, Timestamp: e.TimeStamp, ThreadTimestamp: e.ThreadTimeStamp, Channel: e.Channel, BotID: e.BotID, Files: e.Files}
		return incoming{msg: m, channel: e.Channel, appMention: true}, true
	default:
		a.lg.Debug("ignoring Slack event", "type", ev.InnerEvent.Type)
	}
	return incoming{}, false
}

// Message subtypes that are real messages from someone.
var keptSubtypes = map[string]bool{"": true, "file_share": true, "thread_broadcast": true, "bot_message": true, "me_message": true}

// handle delivers one message. Malformed ones are logged and skipped.
func (a *Adapter) handle(ctx context.Context, in incoming) {
	defer func() {
		if r := recover(); r != nil {
			a.lg.Error("skipping a Slack event that broke the adapter", "panic", fmt.Sprint(r))
		}
	}()
	m := in.msg
	if !keptSubtypes[m.SubType] {
		return // edits, deletions, joins, topic changes ...
	}
	if in.channel == "" || m.Timestamp == "" || (m.User == "" && m.BotID == "") {
		a.lg.Warn("skipping malformed message event", "channel", in.channel, "ts", m.Timestamp)
		return
	}
	if _, err := strconv.ParseFloat(m.Timestamp, 64); err != nil {
		a.lg.Warn("skipping message event with a bad ts", "ts", m.Timestamp)
		return
	}
	if err := chat.ValidID(in.channel); err != nil {
		a.lg.Warn("skipping message with an unusable channel id", "err", err)
		return
	}
	if !a.seen.Add(in.channel + "/" + m.Timestamp) {
		return // the app_mention of a message already delivered, or a replay
	}
	a.cursor.Note(in.channel, m.Timestamp)
	a.mu.Lock()
	self, botID := a.selfID, a.botID
	a.mu.Unlock()
	if m.User == self || (m.BotID != "" && m.BotID == botID) {
		return // Mother logs her own answers herself
	}
	chType := in.channelType
	if chType == "" {
		if ci, ok := a.channel(ctx, in.channel); ok {
			switch ci.Type {
			case chat.ChannelDM:
				chType = "im"
			case chat.ChannelGroup:
				chType = "group"
			default:
				chType = "channel"
			}
		}
	}
	if chType == "" && strings.HasPrefix(in.channel, "D") {
		chType = "im" // Slack's DM ids start with D
	}
	isDM := chType == "im"
	sender := a.user(ctx, m.User)
	if m.User == "" {
		sender = chat.UserInfo{ID: m.BotID, Username: m.Username}
	}
	threadTS := ""
	if m.ThreadTimestamp != "" && m.ThreadTimestamp != m.Timestamp {
		threadTS = m.ThreadTimestamp
	}
	mentioned := in.appMention || strings.Contains(m.Text, "<@"+self+">") || strings.Contains(m.Text, "<@"+self+"|")
	inMine := threadTS != "" && m.ParentUserId != "" && m.ParentUserId == self
	text := a.resolve(ctx, m.Text)
	msg := chat.ChannelMessage{
		ID:          m.Timestamp,
		ChannelID:   in.channel,
		Timestamp:   tsTime(m.Timestamp),
		Sender:      chat.Sender{ID: sender.ID, Username: sender.Username, DisplayName: sender.DisplayName, IsBot: m.BotID != ""},
		Text:        text,
		Attachments: []chat.ChannelAttachment{},
		IsDM:        isDM,
		IsMention:   isDM || mentioned || inMine,
	}
	if text != m.Text {
		msg.RawText = m.Text
	}
	if threadTS != "" {
		msg.ReplyTo = threadTS
		msg.Metadata = map[string]any{"threadTs": threadTS}
		if m.ParentUserId != "" {
			msg.Metadata[chat.MetaThreadStarter] = m.ParentUserId
		}
	}
	a.mu.Lock()
	inbox := a.inbox
	a.mu.Unlock()
	// A message Mother could not store (a full disk) is held here, and
	// the adapter's queue behind it, until she can. Its envelope was
	// acknowledged on receipt (Slack's own retries of an envelope stop
	// within minutes, a full disk can last hours): the message counts as
	// handled only once it is in the channel's log, where the catch-up
	// after a restart starts.
	err := feed.Redeliver(ctx, a.clock, a.lg, in.channel+"/"+m.Timestamp, func() error {
		msg.Attachments, msg.Text = a.download(ctx, in.channel, m, text)
		return inbox.Deliver(ctx, a.name, msg, in.late)
	})
	if err != nil {
		a.seen.Forget(in.channel + "/" + m.Timestamp) // stopping: fetched again by the next start's catch-up
	}
}

// tsTime reads a Slack ts ("1734567890.123456").
func tsTime(ts string) time.Time {
	sec, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}
	}
	frac = (frac + "000000")[:6]
	us, _ := strconv.ParseInt(frac, 10, 64)
	return time.Unix(s, us*1000).UTC()
}

var slackTokenRE = regexp.MustCompile(`<([@#!])([^|>]+)(?:\|([^>]*))?>|<((?:https?|mailto):[^|>]+)(?:\|([^>]*))?>`)

// resolve turns Slack's markup into plain text: <@U1> -> @name,
// <#C1|general> -> #general, <!here> -> @here, <url|label> -> label (url),
// and &amp; &lt; &gt; back into characters.
func (a *Adapter) resolve(ctx context.Context, s string) string {
	out := slackTokenRE.ReplaceAllStringFunc(s, func(tok string) string {
		sub := slackTokenRE.FindStringSubmatch(tok)
		if sub[4] != "" {
			url, label := sub[4], sub[5]
			url = strings.TrimPrefix(url, "mailto:")
			if label == "" || label == url {
				return url
			}
			return label + " (" + url + ")"
		}
		kind, id, label := sub[1], sub[2], sub[3]
		switch kind {
		case "@":
			if u := a.user(ctx, id); u.Username != "" && u.Username != id {
				return "@" + u.Username
			}
			if label != "" {
				return "@" + strings.TrimPrefix(label, "@")
			}
		case "#":
			if label != "" {
				return "#" + label
			}
			if c, ok := a.channel(ctx, id); ok && c.Name != "" {
				return "#" + c.Name
			}
		case "!":
			if strings.HasPrefix(id, "subteam^") && label != "" {
				return "@" + strings.TrimPrefix(label, "@")
			}
			return "@" + id
		}
		return tok
	})
	return html.UnescapeString(out)
}

// download saves the files shared with a message into attachments/; see
// feed.Intake for the notes left in the text.
func (a *Adapter) download(ctx context.Context, channelID string, m slack.Msg, text string) ([]chat.ChannelAttachment, string) {
	var atts []feed.Attachment
	for _, f := range m.Files {
		name := f.Name
		if name == "" {
			name = f.ID
		}
		url := f.URLPrivateDownload
		if url == "" {
			url = f.URLPrivate
		}
		att := feed.Attachment{Name: name, Size: int64(f.Size), MimeType: f.Mimetype}
		// An audio clip recorded in Slack (media_display_type "audio",
		// with its duration_ms) or an audio file: Mother hears both.
		if f.MediaDisplayType == "audio" || strings.HasPrefix(f.Mimetype, "audio/") {
			att.Voice, att.Seconds = true, float64(f.DurationMs)/1000
		}
		if url == "" {
			att.Unavailable = "no download URL (scope files:read?)"
		} else {
			att.Fetch = a.fetcher(url)
		}
		atts = append(atts, att)
	}
	return a.intake.Save(ctx, channelID, strings.ReplaceAll(m.Timestamp, ".", ""), atts, text)
}

// fetcher streams a private file URL with the bot token.
func (a *Adapter) fetcher(url string) func(ctx context.Context) (io.ReadCloser, string, error) {
	return func(ctx context.Context) (io.ReadCloser, string, error) {
		pr, pw := io.Pipe()
		go func() {
			pw.CloseWithError(a.api.GetFileContext(ctx, url, pw))
		}()
		return pr, "", nil
	}
}

// ---- backfill ----

func tsAfter(x, y string) bool {
	if y == "" {
		return x != ""
	}
	return tsTime(x).After(tsTime(y))
}

// isTS reports whether id is a Slack ts (and not an id Mother made up).
func isTS(id string) bool {
	sec, frac, ok := strings.Cut(id, ".")
	if !ok || len(sec) != 10 || len(frac) != 6 {
		return false
	}
	_, err1 := strconv.ParseUint(sec, 10, 64)
	_, err2 := strconv.ParseUint(frac, 10, 64)
	return err1 == nil && err2 == nil
}

// backfillLogged fetches what each logged channel received after its
// newest logged message: what arrived while Mother was down.
func (a *Adapter) backfillLogged(ctx context.Context) {
	until := a.clock.Now()
	for ch, ts := range a.cursor.Logged() {
		a.backfill(ctx, ch, ts, until)
	}
}

// backfillSeen runs after a reconnect at until.
func (a *Adapter) backfillSeen(ctx context.Context, until time.Time) {
	for ch, ts := range a.cursor.Resume() {
		a.backfill(ctx, ch, ts, until)
	}
}

// backfill delivers the messages of a channel after ts, with the new
// replies of threads whose parents are among them. Those posted before
// until (the reconnect) arrived while Mother was away and are delivered
// late; newer ones are on their way live too (the first copy wins).
func (a *Adapter) backfill(ctx context.Context, channel, oldest string, until time.Time) {
	var msgs []slack.Message
	cursor := ""
	for len(msgs) < a.opts.BackfillLimit {
		resp, err := a.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: channel, Oldest: oldest, Limit: 200, Cursor: cursor})
		if err != nil {
			a.lg.Warn("backfill failed", "channel", channel, "err", err)
			break
		}
		msgs = append(msgs, resp.Messages...)
		cursor = resp.ResponseMetaData.NextCursor
		if !resp.HasMore || cursor == "" {
			break
		}
	}
	var all []slack.Msg
	for _, m := range msgs {
		all = append(all, m.Msg)
		if m.ReplyCount > 0 && tsAfter(m.LatestReply, oldest) {
			replies, _, _, err := a.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: channel, Timestamp: m.Timestamp, Oldest: oldest, Limit: 200})
			if err != nil {
				a.lg.Warn("backfill of a thread failed", "channel", channel, "thread", m.Timestamp, "err", err)
				continue
			}
			for _, r := range replies {
				if r.Timestamp != m.Timestamp && tsAfter(r.Timestamp, oldest) {
					all = append(all, r.Msg)
				}
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return tsAfter(all[j].Timestamp, all[i].Timestamp) })
	n := 0
	for _, m := range all {
		if ctx.Err() != nil {
			return
		}
		a.handle(ctx, incoming{msg: m, channel: channel, late: tsTime(m.Timestamp).Before(until)})
		n++
	}
	if n > 0 {
		a.lg.Info("backfilled messages missed while away", "channel", channel, "messages", n)
	}
}
