package whatsapp

import (
	"fmt"
	"strings"
	"testing"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/chat/chattest"
)

// platform drives the adapter through the fake client: users' messages
// go in as the library's real *events.Message, Mother's answers are read
// from the real waE2E messages she sent.
type platform struct {
	a *Adapter
	f *fakeClient
}

func newPlatform(t *testing.T) chattest.Platform {
	a, f, _ := newTestAdapter(t, nil)
	return &platform{a: a, f: f}
}

func (p *platform) Adapter() chat.Adapter { return p.a }
func (p *platform) Channel() string       { return ChannelID(family) }
func (p *platform) DM() string            { return ChannelID(mario) }

func jidOf(t *testing.T, channelID string) types.JID {
	t.Helper()
	j, err := parseChannel(channelID)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func (p *platform) Send(t *testing.T, in chattest.Incoming) {
	to := jidOf(t, in.Channel)
	var m *waE2E.Message
	switch {
	case in.File != nil:
		path, sum := p.f.addMedia(in.File.Data)
		caption := in.Text
		var ci *waE2E.ContextInfo
		if in.Mention {
			caption = "@" + selfPN.User + " " + caption
			ci = &waE2E.ContextInfo{MentionedJID: []string{selfPN.String()}}
		}
		m = &waE2E.Message{DocumentMessage: &waE2E.DocumentMessage{
			FileName: proto.String(in.File.Name), Caption: proto.String(caption), Mimetype: proto.String("text/csv"),
			DirectPath: proto.String(path), FileSHA256: sum, FileLength: proto.Uint64(uint64(len(in.File.Data))),
			MediaKey: make([]byte, 32), ContextInfo: ci,
		}}
	case in.Mention:
		m = mentioning(in.Text, selfPN)
	default:
		m = text(in.Text)
	}
	p.f.post(userMsg(to, mario, m), in.Offline)
}

func (p *platform) Answers(t *testing.T, channelID string) []string {
	var out []string
	for _, s := range p.f.chat(jidOf(t, channelID)) {
		out = append(out, s.Text)
	}
	return out
}

func (p *platform) Uploaded(t *testing.T, channelID string) []chattest.File {
	var out []chattest.File
	for _, s := range p.f.chat(jidOf(t, channelID)) {
		var name, path string
		switch {
		case s.Msg.GetDocumentMessage() != nil:
			name, path = s.Msg.GetDocumentMessage().GetFileName(), s.Msg.GetDocumentMessage().GetDirectPath()
		case s.Msg.GetImageMessage() != nil:
			name, path = "image", s.Msg.GetImageMessage().GetDirectPath()
		default:
			continue
		}
		p.f.mu.Lock()
		data := p.f.media[path]
		p.f.mu.Unlock()
		out = append(out, chattest.File{Name: name, Data: data})
	}
	return out
}

func (p *platform) EditCount(t *testing.T, channelID string) int {
	n := 0
	for _, s := range p.f.chat(jidOf(t, channelID)) {
		n += s.Edits
	}
	return n
}

// RateLimitNextPost makes the next send fail as the library reports a
// message the server refused with 429.
func (p *platform) RateLimitNextPost(t *testing.T, channelID string) {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	p.f.fail = append(p.f.fail, fmt.Errorf("%w %d", whatsmeow.ErrServerReturnedError, 429))
}

func (p *platform) RateLimited(t *testing.T) bool {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	return p.f.failed > 0
}

// Drop loses the connection: Disconnected, then (as the library
// reconnects) Connected, the offline sync with what was missed and the
// last live message once more, OfflineSyncCompleted.
func (p *platform) Drop(t *testing.T) { p.f.drop() }

func TestConformance(t *testing.T) {
	t.Parallel()
	chattest.Run(t, chattest.Harness{Limit: MessageLimit, New: newPlatform, Lacks: map[chattest.Capability]string{
		chattest.Choices:      "WhatsApp offers buttons to business accounts only; admins type the answer",
		chattest.ClickReplies: "no buttons (see choices), and no message only one member of a group sees",
	}})
}

func TestAnswersSplitWithinTheLimit(t *testing.T) {
	t.Parallel()
	// The conformance suite's split check, plus: no part over the limit
	// and every part a plain text message.
	a, f, _ := newTestAdapter(t, nil)
	start(t, a)
	long := strings.Repeat("A paragraph of some length, to be cut between paragraphs.\n\n", 200)
	if _, err := a.Post(t.Context(), ChannelID(family), long); err != nil {
		t.Fatal(err)
	}
	msgs := f.chat(family)
	if len(msgs) < 2 {
		t.Fatalf("%d messages for %d characters, want it split", len(msgs), len(long))
	}
	for _, m := range msgs {
		if n := len([]rune(m.Text)); n > MessageLimit {
			t.Errorf("a part of %d characters, over %d", n, MessageLimit)
		}
	}
}

// Admin and DirectMessages implement chattest.DMReader: admins are named
// by their phone-number JIDs.
func (p *platform) Admin() string { return mario.String() }

func (p *platform) DirectMessages(t *testing.T, userID string) []string {
	j, err := types.ParseJID(userID)
	if err != nil {
		t.Fatal(err)
	}
	return p.Answers(t, ChannelID(j))
}
