package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	"github.com/mother-chat/mother/pkg/adapters/internal/feed"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/render"
	"github.com/mother-chat/mother/pkg/render/runview"
)

// errEditWindow: the message is too old for WhatsApp to take an edit;
// runview then posts the answer anew.
var errEditWindow = errors.New("the message is older than WhatsApp's edit window")

// rateLimited maps WhatsApp's 429 answers (a message ack with error 429,
// or an IQ's rate-overlimit) to runview's, with the adapter's own wait:
// WhatsApp names none.
func (a *Adapter) rateLimited(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, whatsmeow.ErrIQRateOverLimit) || (errors.Is(err, whatsmeow.ErrServerReturnedError) && strings.HasSuffix(err.Error(), " 429")) {
		return &runview.RateLimitError{After: a.opts.RateWait, Err: err}
	}
	return err
}

// retry runs f, waiting out up to three rate-limit answers.
func (a *Adapter) retry(ctx context.Context, f func() error) error {
	return runview.Retry(ctx, a.clock, a.lg, "WhatsApp", "wait", 0, f)
}

// quote is the message an answer quotes (in groups, where several people
// talk at once).
type quote struct {
	id     string
	sender string
	text   string
}

// mentionRe finds @<phone number> in a text Mother sends.
var mentionRe = regexp.MustCompile(`(^|[^\w@])@(\d{5,20})\b`)

// mentionedJIDs are the users of Mother's own mentions that an outgoing
// text names as @<phone number>, as WhatsApp wants them listed beside the
// text. Any other @<number> in it (a model's or a chick's words) is not
// listed, and WhatsApp notifies nobody for it.
func mentionedJIDs(text string, mentions []chat.Mention) []string {
	if len(mentions) == 0 {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, m := range mentionRe.FindAllStringSubmatch(text, -1) {
		j := m[2] + "@" + userServer
		if seen[j] {
			continue
		}
		for _, mn := range mentions {
			if mn.ID == j {
				seen[j] = true
				out = append(out, j)
				break
			}
		}
	}
	return out
}

// textMessage is a text message, with Mother's mentions it names (nil:
// it mentions nobody) and the quoted message, if any.
func textMessage(text string, q *quote, own []chat.Mention) *waE2E.Message {
	mentions := mentionedJIDs(text, own)
	if q == nil && len(mentions) == 0 {
		return &waE2E.Message{Conversation: proto.String(text)}
	}
	ci := &waE2E.ContextInfo{MentionedJID: mentions}
	if q != nil {
		ci.StanzaID = proto.String(q.id)
		ci.Participant = proto.String(q.sender)
		ci.QuotedMessage = &waE2E.Message{Conversation: proto.String(q.text)}
	}
	return &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{Text: proto.String(text), ContextInfo: ci}}
}

// sendMessage sends msg to a chat and returns its id.
func (a *Adapter) sendMessage(ctx context.Context, to types.JID, msg *waE2E.Message) (string, error) {
	a.mu.Lock()
	cli := a.client
	a.mu.Unlock()
	if cli == nil {
		return "", errors.New("whatsapp: not started")
	}
	resp, err := cli.SendMessage(ctx, to, msg)
	if err != nil {
		return "", a.rateLimited(fmt.Errorf("send message: %w", err))
	}
	a.mu.Lock()
	a.sent[resp.ID] = a.clock.Now()
	if len(a.sent) > 1000 {
		for id, at := range a.sent {
			if clock.Since(a.clock, at) > EditWindow {
				delete(a.sent, id)
			}
		}
	}
	a.mu.Unlock()
	// Her own message comes back from the server as IsFromMe; it is
	// skipped there, and marking it here keeps it out of the dedupe
	// table's way.
	a.seen.Add(to.String() + "/" + resp.ID)
	return resp.ID, nil
}

// send posts text to a channel; it mentions nobody.
func (a *Adapter) send(ctx context.Context, to types.JID, text string, q *quote) (string, error) {
	return a.sendMessage(ctx, to, textMessage(text, q, nil))
}

// edit replaces the text of one of Mother's messages.
func (a *Adapter) edit(ctx context.Context, to types.JID, id, text string) error {
	a.mu.Lock()
	at, ok := a.sent[id]
	cli := a.client
	a.mu.Unlock()
	// A minute's margin: the edit must reach WhatsApp inside the window.
	if !ok || clock.Since(a.clock, at) > EditWindow-time.Minute {
		return errEditWindow
	}
	_, err := cli.SendMessage(ctx, to, cli.BuildEdit(to, id, textMessage(text, nil, nil)))
	if err != nil {
		return a.rateLimited(fmt.Errorf("edit message: %w", err))
	}
	return nil
}

// NewReply implements chat.Adapter. The working message (quoting the
// trigger in groups) is edited as the run goes and replaced by the answer;
// "typing…" shows meanwhile. Tool details and usage follow the answer as
// messages of their own only with the details setting (WhatsApp has no
// threads), and never when quiet.
func (a *Adapter) NewReply(ctx context.Context, channelID string, trigger *chat.ChannelMessage, opts chat.ReplyOptions) chat.Reply {
	to, err := parseChannel(channelID)
	s := &surface{a: a, to: to, channel: channelID, bad: err}
	if trigger != nil && !trigger.IsDM && trigger.ID != "" && trigger.Sender.ID != "" {
		raw := trigger.RawText
		if raw == "" {
			raw = trigger.Text
		}
		s.quote = &quote{id: trigger.ID, sender: trigger.Sender.ID, text: render.Truncate(raw, 200)}
	}
	v := runview.New(ctx, s, runview.Options{
		Dialect: render.WhatsApp,
		Title:   opts.Title,
		Limit:   MessageLimit,
		Details: a.cfg.Details && !opts.Quiet,
		MinEdit: a.opts.MinEdit,
		Grace:   a.opts.Grace,
		Clock:   a.clock,
		Logger:  a.lg.With("channel", channelID),
	})
	pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	if err == nil {
		go func() { defer close(done); a.composing(pctx, to) }()
	} else {
		close(done)
	}
	return &reply{Reply: v, stop: stop, done: done}
}

// reply ends "typing…" once the answer is in.
type reply struct {
	chat.Reply
	stop context.CancelFunc
	done chan struct{}
}

func (r *reply) Finish(ctx context.Context, markdown string) (string, error) {
	r.stop()
	<-r.done
	return r.Reply.Finish(ctx, markdown)
}

// composing shows "typing…" in the chat until ctx ends, then clears it.
func (a *Adapter) composing(ctx context.Context, to types.JID) {
	a.mu.Lock()
	cli := a.client
	a.mu.Unlock()
	for {
		if err := cli.SendChatPresence(ctx, to, types.ChatPresenceComposing, types.ChatPresenceMediaText); err != nil && ctx.Err() == nil {
			a.lg.Debug("cannot send the composing presence", "chat", to.String(), "err", err)
		}
		if clock.Sleep(ctx, a.clock, a.opts.PresenceEvery) != nil {
			break
		}
	}
	pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cli.SendChatPresence(pctx, to, types.ChatPresencePaused, types.ChatPresenceMediaText); err != nil {
		a.lg.Debug("cannot clear the composing presence", "chat", to.String(), "err", err)
	}
}

// surface is runview's WhatsApp side for one run.
type surface struct {
	a       *Adapter
	to      types.JID
	channel string
	bad     error
	quote   *quote
}

var _ runview.Surface = (*surface)(nil)

func (s *surface) PostMain(ctx context.Context, text string, _ bool) (string, error) {
	if s.bad != nil {
		return "", s.bad
	}
	return s.a.send(ctx, s.to, text, s.quote)
}

func (s *surface) EditMain(ctx context.Context, id, text string, _ bool) error {
	if s.bad != nil {
		return s.bad
	}
	return s.a.edit(ctx, s.to, id, text)
}

func (s *surface) DeleteMain(ctx context.Context, id string) error {
	if s.bad != nil {
		return s.bad
	}
	a := s.a
	a.mu.Lock()
	cli := a.client
	a.mu.Unlock()
	if _, err := cli.SendMessage(ctx, s.to, cli.BuildRevoke(s.to, types.EmptyJID, id)); err != nil {
		return a.rateLimited(fmt.Errorf("delete message: %w", err))
	}
	return nil
}

// PostDetail posts a tool detail as a message of its own (no threads on
// WhatsApp), waiting out rate limits so none is lost.
func (s *surface) PostDetail(ctx context.Context, _ string, text string) error {
	if s.bad != nil {
		return s.bad
	}
	return s.a.retry(ctx, func() error {
		_, err := s.a.send(ctx, s.to, text, nil)
		return err
	})
}

func (s *surface) PostMore(ctx context.Context, text string) (string, error) {
	if s.bad != nil {
		return "", s.bad
	}
	return s.a.send(ctx, s.to, text, nil)
}

// Post implements chat.Adapter: a notice (markdown), split if long. It
// mentions nobody.
func (a *Adapter) Post(ctx context.Context, channelID, markdown string) (string, error) {
	return a.PostMentioning(ctx, channelID, markdown, nil)
}

var _ chat.Mentioner = (*Adapter)(nil)

// PostMentioning implements chat.Mentioner: Post, with the Text of each of
// Mother's mentions made @<phone number> and listed as the message's
// mentions (no one else is).
func (a *Adapter) PostMentioning(ctx context.Context, channelID, markdown string, mentions []chat.Mention) (string, error) {
	to, err := parseChannel(channelID)
	if err != nil {
		return "", fmt.Errorf("whatsapp: post: %w", err)
	}
	first := ""
	for _, p := range renderWhatsApp(markdown, mentions) {
		var id string
		err := a.retry(ctx, func() error {
			var perr error
			id, perr = a.sendMessage(ctx, to, textMessage(p, nil, mentions))
			return perr
		})
		if err != nil {
			return first, fmt.Errorf("whatsapp: post to %s: %w", channelID, err)
		}
		if first == "" {
			first = id
		}
	}
	return first, nil
}

// renderWhatsApp converts markdown for WhatsApp and cuts it into
// messages of at most MessageLimit characters, code blocks closed and
// reopened across parts.
func renderWhatsApp(markdown string, mentions []chat.Mention) []string {
	return render.Split(render.ToWhatsApp(markdown, mentions), MessageLimit)
}

// Upload implements chat.Uploader: images up to 16 MB as images, anything
// else as a document (up to UploadLimit). The library encrypts and
// uploads the file; the message carries its keys and hashes. The file is
// never held whole: the library encrypts it from disk into a temporary
// file (in the system's temporary directory) and sends that.
func (a *Adapter) Upload(ctx context.Context, channelID, path, title string) error {
	to, err := parseChannel(channelID)
	if err != nil {
		return fmt.Errorf("whatsapp: upload: %w", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("whatsapp: upload: %w", err)
	}
	name := filepath.Base(path)
	if !st.Mode().IsRegular() {
		return fmt.Errorf("whatsapp: upload %s: not a regular file", name)
	}
	if st.Size() > UploadLimit {
		return fmt.Errorf("whatsapp: upload %s: %s is over the %s limit", name, feed.FormatSize(st.Size()), feed.FormatSize(UploadLimit))
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("whatsapp: upload: %w", err)
	}
	defer f.Close()
	mt := mime.TypeByExtension(strings.ToLower(filepath.Ext(name)))
	if mt == "" {
		head := make([]byte, 512)
		n, _ := io.ReadFull(f, head)
		mt = http.DetectContentType(head[:n])
	}
	caption := ""
	if title != "" && title != name {
		caption = render.Truncate(title, 1000)
	}
	image := isImage(name) && st.Size() <= imageLimit
	media := whatsmeow.MediaDocument
	if image {
		media = whatsmeow.MediaImage
	}
	a.mu.Lock()
	cli := a.client
	a.mu.Unlock()
	if cli == nil {
		return errors.New("whatsapp: not started")
	}
	release, err := a.uploads.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("whatsapp: upload %s: %w", name, err)
	}
	defer release()
	return a.retry(ctx, func() error {
		up, err := encryptAndUpload(ctx, cli, f, st.Size(), media)
		if err != nil {
			return a.rateLimited(fmt.Errorf("whatsapp: upload %s: %w", name, err))
		}
		var msg *waE2E.Message
		if image {
			msg = &waE2E.Message{ImageMessage: &waE2E.ImageMessage{
				Caption: optional(caption), Mimetype: proto.String(mt),
				URL: proto.String(up.URL), DirectPath: proto.String(up.DirectPath), MediaKey: up.MediaKey,
				FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: proto.Uint64(up.FileLength),
			}}
		} else {
			msg = &waE2E.Message{DocumentMessage: &waE2E.DocumentMessage{
				FileName: proto.String(name), Title: proto.String(name), Caption: optional(caption), Mimetype: proto.String(mt),
				URL: proto.String(up.URL), DirectPath: proto.String(up.DirectPath), MediaKey: up.MediaKey,
				FileEncSHA256: up.FileEncSHA256, FileSHA256: up.FileSHA256, FileLength: proto.Uint64(up.FileLength),
			}}
		}
		if _, err := a.sendMessage(ctx, to, msg); err != nil {
			return fmt.Errorf("whatsapp: upload %s to %s: %w", name, channelID, err)
		}
		return nil
	})
}

// encryptAndUpload has the library encrypt size bytes of f from its
// start into a temporary file and upload that.
func encryptAndUpload(ctx context.Context, cli Client, f *os.File, size int64, media whatsmeow.MediaType) (whatsmeow.UploadResponse, error) {
	tmp, err := os.CreateTemp("", "mother-whatsapp-upload-*")
	if err != nil {
		return whatsmeow.UploadResponse{}, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	return cli.UploadReader(ctx, io.NewSectionReader(f, 0, size), tmp, media)
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return proto.String(s)
}

func isImage(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".jpg", ".jpeg", ".png", ".webp":
		return true
	}
	return false
}

// DirectMessage implements chat.DirectMessenger: a post in the chat with
// userID, a phone-number JID ("4915112345678@s.whatsapp.net", as admins
// are configured).
func (a *Adapter) DirectMessage(ctx context.Context, userID, markdown string) error {
	jid, err := types.ParseJID(userID)
	if err != nil || jid.User == "" {
		return fmt.Errorf("whatsapp: %q is not a user's JID", userID)
	}
	_, err = a.Post(ctx, ChannelID(jid), markdown)
	return err
}
