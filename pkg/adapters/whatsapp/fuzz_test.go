package whatsapp

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/store"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// FuzzMessage feeds arbitrary message payloads (the protobuf bytes of a
// waE2E.Message, as WhatsApp sends them after decryption) with arbitrary
// chat and sender JIDs through the adapter's message handling, connected
// to the fake client and a real store. Whatever arrives: no panic (not
// even into the adapter's own recover), and what is delivered is a
// message Mother can store: an id, a sender, a channel id that is a safe
// directory name, a DM that counts as addressed, files inside the
// channel's attachments/.
func FuzzMessage(f *testing.F) {
	seed := func(m *waE2E.Message, chatJID, sender string) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, chatJID, sender, false)
	}
	seed(text("hello"), mario.String(), mario.String())
	seed(mentioning("hi", selfPN), family.String(), mario.String())
	seed(mentioning("hi", selfLID), family.String(), marioL.String())
	seed(&waE2E.Message{DocumentMessage: &waE2E.DocumentMessage{FileName: proto.String("../../etc/passwd"), FileLength: proto.Uint64(1 << 62), DirectPath: proto.String("/x")}}, mario.String(), mario.String())
	seed(&waE2E.Message{ImageMessage: &waE2E.ImageMessage{Mimetype: proto.String("image/../../x"), DirectPath: proto.String("/nope")}}, family.String(), luigi.String())
	seed(&waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{Text: proto.String("@1 @x"), ContextInfo: &waE2E.ContextInfo{MentionedJID: []string{"", "@", "1@lid", "x:y@s.whatsapp.net"}, StanzaID: proto.String("a"), Participant: proto.String("::")}}}, "1@g.us", "2@lid")
	seed(&waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{}}, "status@broadcast", mario.String())
	f.Add([]byte{0xff, 0x01, 0x02}, "../x@s.whatsapp.net", "y@s.whatsapp.net", true)
	f.Add([]byte{}, "", "", false)

	st, err := store.Open(f.TempDir(), store.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	logs := &syncBuffer{}
	fc := newFakeClient(f)
	a, err := New(chat.Env{
		Name:   "wa",
		Config: config.Adapter{Type: "whatsapp", Settings: &Settings{}},
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Files:  st.AdapterFiles("wa"),
	}, Options{Client: fc, Self: selfPN, SelfLID: selfLID, MaxAttachment: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	in := newInbox()
	a.client, a.inbox, a.self, a.selfLID = fc, in, selfPN, selfLID
	n := 0
	f.Fuzz(func(t *testing.T, payload []byte, chatJID, sender string, fromMe bool) {
		m := &waE2E.Message{}
		if proto.Unmarshal(payload, m) != nil {
			return // the library drops what does not decode
		}
		c, err1 := types.ParseJID(chatJID)
		s, err2 := types.ParseJID(sender)
		if err1 != nil || err2 != nil {
			return // the library parses JIDs before a message event exists
		}
		n++
		e := &events.Message{
			Info: types.MessageInfo{
				MessageSource: types.MessageSource{Chat: c, Sender: s, IsFromMe: fromMe, IsGroup: c.Server == types.GroupServer},
				ID:            "FUZZ" + strings.Repeat("0", n%3) + string(rune('A'+n%26)) + time.Duration(n).String(),
				Timestamp:     time.Unix(1734567890, 0),
			},
			Message: m,
		}
		in.mu.Lock()
		in.msgs, in.late = nil, nil
		in.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		a.handleMessage(ctx, e, false)
		if strings.Contains(logs.String(), "broke the adapter") {
			t.Fatalf("the adapter recovered from a panic on %x (%s, %s):\n%s", payload, chatJID, sender, logs.String())
		}
		for _, d := range in.all() {
			if d.ID == "" || d.Sender.ID == "" {
				t.Errorf("delivered without id or sender: %+v", d)
			}
			if err := chat.ValidID(d.ChannelID); err != nil {
				t.Errorf("delivered with a bad channel id: %v", err)
			}
			if d.IsDM && !d.IsMention {
				t.Errorf("a DM that is not addressed: %+v", d)
			}
			if fromMe {
				t.Errorf("her own message delivered: %+v", d)
			}
			for _, att := range d.Attachments {
				if !strings.HasPrefix(att.LocalPath, "attachments/") || strings.Contains(att.LocalPath, "..") {
					t.Errorf("attachment outside attachments/: %+v", att)
				}
			}
		}
	})
}

// FuzzWhatsAppText renders any markdown for WhatsApp and splits it: no
// part over the limit, every part with its code blocks closed, and every
// @number of Mother's own mentions listed as a mention when sent, and no
// other.
func FuzzWhatsAppText(f *testing.F) {
	for _, s := range []string{"**a** _b_ ~~c~~ @4915111111111", "```go\nx\n```", "- a\n  - b\n1. c", "| a |\n|---|\n| b |", "[x](http://e.com) `a`b`"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		users := []chat.Mention{{ID: mario.String(), Username: mario.User}}
		r := renderWhatsApp(md, users)
		for _, p := range r {
			if n := len([]rune(p)); n > MessageLimit {
				t.Fatalf("a part of %d runes", n)
			}
			msg := textMessage(p, nil, users)
			listed := msg.GetExtendedTextMessage().GetContextInfo().GetMentionedJID()
			for _, m := range mentionRe.FindAllStringSubmatch(p, -1) {
				if m[2] == mario.User && len(listed) == 0 {
					t.Fatalf("%q names Mother's mention but lists no mention", p)
				}
			}
			for _, j := range listed {
				if j != mario.String() {
					t.Fatalf("%q lists %s, which Mother did not mention", p, j)
				}
			}
		}
	})
}
