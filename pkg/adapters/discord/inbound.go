package discord

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/mother-chat/mother/pkg/adapters/internal/feed"
	"github.com/mother-chat/mother/pkg/chat"
)

func (a *Adapter) onMessageCreate(_ *discordgo.Session, m *discordgo.MessageCreate) {
	if m == nil || m.Message == nil {
		return
	}
	msg := m.Message
	a.queue.Push(func(ctx context.Context) { a.handle(ctx, msg, delivery{}) })
}

// delivery says how a message reached the adapter.
type delivery struct {
	// late: fetched by backfill (it arrived while Mother was away).
	late bool
	// answered: Mother's own reply to it is already on the platform.
	answered bool
}

// handle turns one platform message into a ChannelMessage and delivers it.
// Malformed events are logged and skipped; nothing here may panic the
// daemon.
func (a *Adapter) handle(ctx context.Context, m *discordgo.Message, d delivery) {
	defer func() {
		if r := recover(); r != nil {
			a.lg.Error("skipping a message event that broke the adapter", "panic", fmt.Sprint(r))
		}
	}()
	if m.ID == "" || m.ChannelID == "" || m.Author == nil || m.Author.ID == "" {
		a.lg.Warn("skipping malformed message event", "id", m.ID, "channel", m.ChannelID)
		return
	}
	if m.Type != discordgo.MessageTypeDefault && m.Type != discordgo.MessageTypeReply {
		return // joins, pins, boosts, thread notices: not something someone said
	}
	if !a.seen.Add(m.ID) {
		return // a gateway replay or a backfill overlap
	}
	a.cursor.Note(m.ChannelID, m.ID)
	self := a.SelfID()
	if m.Author.ID == self {
		return // Mother logs her own answers herself
	}
	if m.GuildID != "" && !a.wantGuild(m.GuildID) {
		return
	}
	ci, err := a.channel(ctx, m.ChannelID)
	if err != nil {
		a.lg.Warn("unknown channel; treating it as plain", "channel", m.ChannelID, "err", err)
		ci = &channelInfo{ID: m.ChannelID, GuildID: m.GuildID}
		if m.GuildID == "" {
			ci.Type = discordgo.ChannelTypeDM
		}
	}
	isDM := m.GuildID == "" && (ci.Type == discordgo.ChannelTypeDM || ci.Type == discordgo.ChannelTypeGroupDM)
	channelID, threadID := m.ChannelID, ""
	if ci.IsThread() && ci.ParentID != "" {
		// Threads share their channel's store and context; answers go
		// back into the thread.
		channelID, threadID = ci.ParentID, ci.ID
	}
	if err := chat.ValidID(channelID); err != nil {
		a.lg.Warn("skipping message with an unusable channel id", "err", err)
		return
	}
	text, raw := a.resolveMentions(m)
	a.mu.Lock()
	sender := a.learnUserLocked(m.Author, memberNick(m.Member))
	for _, u := range m.Mentions {
		if u != nil && u.ID != "" {
			a.learnUserLocked(u, "")
		}
	}
	if isDM && ci.Name == "" {
		ci.Name = "dm-" + m.Author.Username
		if e := a.chans[ci.ID]; e != nil && e.Name == "" {
			e.Name = ci.Name // ci is a copy (a.channel)
		}
	}
	a.mu.Unlock()
	msg := chat.ChannelMessage{
		ID:          m.ID,
		ChannelID:   channelID,
		Timestamp:   m.Timestamp,
		Sender:      chat.Sender{ID: m.Author.ID, Username: m.Author.Username, DisplayName: sender.DisplayName, IsBot: m.Author.Bot},
		Text:        text,
		Attachments: []chat.ChannelAttachment{},
		IsDM:        isDM,
		IsMention:   (isDM || mentions(m, self) || threadID != "" && ci.Mine) && !d.answered,
	}
	if raw != text {
		msg.RawText = raw
	}
	if m.MessageReference != nil && m.MessageReference.MessageID != "" {
		msg.ReplyTo = m.MessageReference.MessageID
	}
	meta := map[string]any{}
	if m.GuildID != "" {
		meta["guildId"] = m.GuildID
	}
	if threadID != "" {
		meta["threadId"] = threadID
		starter := ci.OwnerID
		if ci.Mine {
			starter = self
		}
		if starter != "" {
			meta[chat.MetaThreadStarter] = starter
		}
	}
	if d.answered {
		meta["answered"] = true
	}
	if len(meta) > 0 {
		msg.Metadata = meta
	}
	a.mu.Lock()
	in := a.inbox
	a.mu.Unlock()
	// A message Mother could not store (a full disk) is held here, and
	// the adapter's queue behind it, until she can: Discord sends nothing
	// again, and the message counts as handled only once it is in the
	// channel's log (where the catch-up after a restart starts).
	err = feed.Redeliver(ctx, a.clock, a.lg, m.ID, func() error {
		msg.Attachments, msg.Text = a.download(ctx, channelID, m, text)
		return in.Deliver(ctx, a.name, msg, d.late)
	})
	if err != nil {
		a.seen.Forget(m.ID) // stopping: fetched again by the next start's catch-up
	}
}

// IsThread reports whether the channel is a thread.
func (c *channelInfo) IsThread() bool {
	return c.Type == discordgo.ChannelTypeGuildPublicThread || c.Type == discordgo.ChannelTypeGuildPrivateThread || c.Type == discordgo.ChannelTypeGuildNewsThread
}

func memberNick(m *discordgo.Member) string {
	if m == nil {
		return ""
	}
	return m.Nick
}

// mentions reports whether m mentions user id.
func mentions(m *discordgo.Message, id string) bool {
	if id == "" {
		return false
	}
	for _, u := range m.Mentions {
		if u != nil && u.ID == id {
			return true
		}
	}
	return strings.Contains(m.Content, "<@"+id+">") || strings.Contains(m.Content, "<@!"+id+">")
}

var mentionRE = regexp.MustCompile(`<(@!?|@&|#)(\d{1,25})>|<a?:(\w{1,64}):\d{1,25}>`)

// resolveMentions turns <@id> into @username, <#id> into #channel and
// custom emoji into :name:. It returns the text and the raw content.
func (a *Adapter) resolveMentions(m *discordgo.Message) (text, raw string) {
	raw = m.Content
	byID := map[string]string{}
	for _, u := range m.Mentions {
		if u != nil && u.ID != "" && u.Username != "" {
			byID[u.ID] = u.Username
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	text = mentionRE.ReplaceAllStringFunc(raw, func(tok string) string {
		sub := mentionRE.FindStringSubmatch(tok)
		if sub[3] != "" {
			return ":" + sub[3] + ":"
		}
		id := sub[2]
		switch sub[1] {
		case "@", "@!":
			if n, ok := byID[id]; ok {
				return "@" + n
			}
			if u, ok := a.users[id]; ok {
				return "@" + u.Username
			}
		case "#":
			if c, ok := a.chans[id]; ok && c.Name != "" {
				return "#" + c.Name
			}
		}
		return tok
	})
	return text, raw
}

// download fetches a message's attachments into the channel's
// attachments/ directory; see feed.Intake for the notes left in the text.
func (a *Adapter) download(ctx context.Context, channelID string, m *discordgo.Message, text string) ([]chat.ChannelAttachment, string) {
	var atts []feed.Attachment
	for _, att := range m.Attachments {
		if att == nil {
			continue
		}
		// A voice message (flagged, its attachment timed) or an audio
		// file: Mother hears both.
		voice := m.Flags&discordgo.MessageFlagsIsVoiceMessage != 0 || strings.HasPrefix(att.ContentType, "audio/")
		atts = append(atts, feed.Attachment{Name: att.Filename, Size: int64(att.Size), MimeType: att.ContentType, Fetch: a.fetcher(att.URL),
			Voice: voice, Seconds: att.DurationSecs})
	}
	return a.intake.Save(ctx, channelID, m.ID, atts, text)
}

// fetcher downloads an attachment URL with the bot's HTTP client.
func (a *Adapter) fetcher(url string) func(ctx context.Context) (io.ReadCloser, string, error) {
	return func(ctx context.Context) (io.ReadCloser, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, "", err
		}
		resp, err := a.s.Client.Do(req)
		if err != nil {
			return nil, "", err
		}
		if resp.StatusCode != http.StatusOK {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			return nil, "", fmt.Errorf("download: HTTP %d", resp.StatusCode)
		}
		return resp.Body, resp.Header.Get("Content-Type"), nil
	}
}

// ---- backfill ----

// newer compares snowflakes.
func newer(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	if err2 != nil {
		return err1 == nil
	}
	return err1 == nil && x > y
}

// isSnowflake reports whether id is a Discord id (and not one Mother made
// up for a message the platform never saw).
func isSnowflake(id string) bool {
	if len(id) < 15 || len(id) > 20 {
		return false
	}
	_, err := strconv.ParseUint(id, 10, 64)
	return err == nil
}

// backfillLogged fetches, for every channel with a log, the messages after
// the newest one logged: what arrived while Mother was down.
func (a *Adapter) backfillLogged(ctx context.Context) {
	until := a.clock.Now()
	for ch, id := range a.cursor.Logged() {
		a.backfill(ctx, ch, id, until)
	}
}

// backfillSeen runs after a reconnect at until: it fetches what the
// channels seen so far (this run, or in the log) received while the
// gateway was away.
func (a *Adapter) backfillSeen(ctx context.Context, until time.Time) {
	for ch, id := range a.cursor.Resume() {
		a.backfill(ctx, ch, id, until)
	}
}

// backfill delivers the messages of a channel after the message id after.
// Those posted before until (the reconnect) arrived while Mother was away
// and are delivered late; newer ones are on their way live as well (the
// first copy wins).
func (a *Adapter) backfill(ctx context.Context, channelID, after string, until time.Time) {
	var all []*discordgo.Message
	for len(all) < a.opts.BackfillLimit {
		page, err := a.s.ChannelMessages(channelID, 100, "", after, "", discordgo.WithContext(ctx))
		if err != nil {
			a.lg.Warn("backfill failed", "channel", channelID, "err", err)
			break
		}
		if len(page) == 0 {
			break
		}
		sort.Slice(page, func(i, j int) bool { return newer(page[j].ID, page[i].ID) })
		all = append(all, page...)
		after = page[len(page)-1].ID
		if len(page) < 100 {
			break
		}
	}
	// REST messages carry no guild_id; take it from the channel, so a
	// guild message is never mistaken for a DM.
	guildID := ""
	if ci, err := a.channel(ctx, channelID); err == nil {
		guildID = ci.GuildID
	}
	self := a.SelfID()
	answered := map[string]bool{}
	for _, m := range all {
		if m != nil && m.Author != nil && m.Author.ID == self && m.MessageReference != nil {
			answered[m.MessageReference.MessageID] = true
		}
	}
	n := 0
	for _, m := range all {
		if m == nil || ctx.Err() != nil {
			continue
		}
		if m.ChannelID == "" {
			m.ChannelID = channelID
		}
		if m.GuildID == "" {
			m.GuildID = guildID
		}
		a.handle(ctx, m, delivery{late: m.Timestamp.Before(until), answered: answered[m.ID]})
		n++
	}
	if n > 0 {
		a.lg.Info("backfilled messages missed while away", "channel", channelID, "messages", n)
	}
}

func sortUsers(us []chat.UserInfo) {
	sort.Slice(us, func(i, j int) bool { return strings.ToLower(us[i].Username) < strings.ToLower(us[j].Username) })
}

func sortChannels(cs []chat.ChannelInfo) {
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].Type != cs[j].Type {
			return cs[i].Type < cs[j].Type
		}
		return cs[i].Name < cs[j].Name
	})
}
