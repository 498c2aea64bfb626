package whatsapp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// timestampRe finds the edit time the library stamps on an edit.
var timestampRe = regexp.MustCompile(`"timestampMS": "\d+"`)

// inbox records what the adapter delivers.
type inbox struct {
	mu      sync.Mutex
	msgs    []chat.ChannelMessage
	late    []bool
	changed chan struct{}
}

func newInbox() *inbox { return &inbox{changed: make(chan struct{})} }

func (i *inbox) Deliver(_ context.Context, _ string, m chat.ChannelMessage, late bool) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.msgs = append(i.msgs, m)
	i.late = append(i.late, late)
	close(i.changed)
	i.changed = make(chan struct{})
	return nil
}

func (i *inbox) Stop(context.Context, string, string, string) {}

// wait returns the first message containing text, and whether it was late.
func (i *inbox) wait(t *testing.T, text string) (chat.ChannelMessage, bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		i.mu.Lock()
		for k, m := range i.msgs {
			if strings.Contains(m.Text, text) {
				i.mu.Unlock()
				return m, i.late[k]
			}
		}
		ch := i.changed
		i.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("%q never delivered; got %+v", text, i.all())
		}
	}
}

func (i *inbox) all() []chat.ChannelMessage {
	i.mu.Lock()
	defer i.mu.Unlock()
	return append([]chat.ChannelMessage(nil), i.msgs...)
}

func (i *inbox) count(text string) int {
	n := 0
	for _, m := range i.all() {
		if strings.Contains(m.Text, text) {
			n++
		}
	}
	return n
}

// start starts a with a recording inbox and stops it at cleanup.
func start(t *testing.T, a *Adapter) *inbox {
	t.Helper()
	in := newInbox()
	if err := a.Start(t.Context(), in); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a.Stop(ctx)
	})
	return in
}

// marker posts a message and waits for it: the adapter hands messages
// over in order, so whatever came before it has been handled.
func marker(t *testing.T, f *fakeClient, in *inbox, name string) {
	t.Helper()
	f.post(userMsg(mario, mario, text("marker "+name)), false)
	in.wait(t, "marker "+name)
}

func TestWhereMotherAnswers(t *testing.T) {
	t.Parallel()
	a, f, _ := newTestAdapter(t, nil)
	in := start(t, a)

	reply := &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
		Text:        proto.String("and tomorrow?"),
		ContextInfo: &waE2E.ContextInfo{StanzaID: proto.String("3EB0AAAA"), Participant: proto.String(selfPN.String()), QuotedMessage: text("Sunny today.")},
	}}
	replyToOther := &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
		Text:        proto.String("agreed with luigi"),
		ContextInfo: &waE2E.ContextInfo{StanzaID: proto.String("3A77"), Participant: proto.String(luigi.String()), QuotedMessage: text("pizza?")},
	}}
	lidMention := userMsg(family, marioL, &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
		Text:        proto.String("@" + selfLID.User + " by lid"),
		ContextInfo: &waE2E.ContextInfo{MentionedJID: []string{selfLID.String()}},
	}})
	lidMention.Info.SenderAlt = mario
	lidMention.Info.AddressingMode = types.AddressingModeLID
	lidDM := userMsg(marioL, marioL, text("a dm over lid"))
	lidDM.Info.SenderAlt = mario

	for _, e := range []*events.Message{
		userMsg(mario, mario, text("hello in private")),
		userMsg(family, mario, text("just chatting")),
		userMsg(family, mario, mentioning("what's the weather?", selfPN)),
		userMsg(family, luigi, mentioning("hey luigi", luigi)),
		userMsg(family, mario, reply),
		userMsg(family, mario, replyToOther),
		lidMention,
		lidDM,
		userMsg(mario, mario, text("stop")),
	} {
		f.post(e, false)
	}
	marker(t, f, in, "1")

	for _, c := range []struct {
		text          string
		channel       string
		sender        string
		mention, isDM bool
	}{
		{"hello in private", ChannelID(mario), mario.String(), true, true},
		{"just chatting", ChannelID(family), mario.String(), false, false},
		{"what's the weather?", ChannelID(family), mario.String(), true, false},
		{"hey luigi", ChannelID(family), luigi.String(), false, false},
		{"and tomorrow?", ChannelID(family), mario.String(), true, false},
		{"agreed with luigi", ChannelID(family), mario.String(), false, false},
		{"by lid", ChannelID(family), mario.String(), true, false},
		{"a dm over lid", ChannelID(mario), mario.String(), true, true},
		{"stop", ChannelID(mario), mario.String(), true, true},
	} {
		m, late := in.wait(t, c.text)
		if m.ChannelID != c.channel || m.Sender.ID != c.sender || m.IsMention != c.mention || m.IsDM != c.isDM || late {
			t.Errorf("%q delivered as channel %s, sender %s, mention %v, dm %v, late %v; want %s, %s, %v, %v, live",
				c.text, m.ChannelID, m.Sender.ID, m.IsMention, m.IsDM, late, c.channel, c.sender, c.mention, c.isDM)
		}
		if err := chat.ValidID(m.ChannelID); err != nil {
			t.Errorf("%q: channel id %v", c.text, err)
		}
	}
	if m, _ := in.wait(t, "by lid"); !strings.HasPrefix(m.Text, "@"+selfPN.User+" ") || m.RawText == "" {
		t.Errorf("a mention by LID reads %q (raw %q), want it named by phone number", m.Text, m.RawText)
	}
	if m, _ := in.wait(t, "and tomorrow?"); m.ReplyTo != "3EB0AAAA" {
		t.Errorf("reply delivered with ReplyTo %q, want the quoted message's id", m.ReplyTo)
	}
	if m, _ := in.wait(t, "hello in private"); m.Sender.Username != mario.User || m.Sender.DisplayName != "Mario Rossi" {
		t.Errorf("sender = %+v, want the number as username and the push name", m.Sender)
	}
	var names []string
	for _, c := range a.Channels() {
		names = append(names, string(c.Type)+":"+c.Name)
	}
	if got := strings.Join(names, ","); got != "dm:dm-"+mario.User+",group:Family" {
		t.Errorf("channels = %s", got)
	}
	if a.SelfID() != selfPN.String() {
		t.Errorf("SelfID = %q, want %q", a.SelfID(), selfPN.String())
	}
}

func TestNotTakenAsUserMessages(t *testing.T) {
	t.Parallel()
	a, f, _ := newTestAdapter(t, nil)
	in := start(t, a)
	fromPhone := userMsg(family, selfPN, mentioning("typed on the linked phone", selfPN))
	fromPhone.Info.IsFromMe = true
	ownDM := userMsg(mario, selfPN, text("her own answer echoed"))
	ownDM.Info.IsFromMe = true
	status := userMsg(types.StatusBroadcastJID, mario, text("a status update"))
	edit := userMsg(family, mario, mentioning("edited text", selfPN))
	edit.IsEdit = true
	reaction := userMsg(family, mario, &waE2E.Message{ReactionMessage: &waE2E.ReactionMessage{Text: proto.String("👍")}})
	revoke := userMsg(family, mario, &waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{Type: waE2E.ProtocolMessage_REVOKE.Enum()}})
	empty := userMsg(family, mario, &waE2E.Message{})
	for _, e := range []*events.Message{fromPhone, ownDM, status, edit, reaction, revoke, empty} {
		f.post(e, false)
	}
	marker(t, f, in, "after")
	if got := in.all(); len(got) != 1 {
		t.Errorf("delivered %d messages, want only the marker: %+v", len(got), got)
	}
}

func TestDuplicatesAcrossReconnectsAndRestarts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sessPath := filepath.Join(dir, "s.db")
	sess, err := OpenSession(t.Context(), sessPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, f, _ := newTestAdapter(t, func(_ *Settings, _ *config.Adapter, o *Options) { o.Session = sess })
	in := start(t, a)
	e := userMsg(family, mario, mentioning("answer me once", selfPN))
	f.post(e, false)
	f.post(e, false) // a retry receipt's resend
	missed := userMsg(family, luigi, mentioning("sent while away", selfPN))
	f.post(missed, true)
	f.drop() // replays the last live message in the offline sync
	deadline := time.Now().Add(10 * time.Second)
	for a.Status().Reconnects < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	marker(t, f, in, "after reconnect")
	if n := in.count("answer me once"); n != 1 {
		t.Errorf("%q delivered %d times, want once", "answer me once", n)
	}
	if _, late := in.wait(t, "sent while away"); !late {
		t.Errorf("a message from the offline sync is not marked late")
	}
	if _, late := in.wait(t, "marker after reconnect"); late {
		t.Errorf("a message after the offline sync is marked late")
	}
	if st := a.Status(); st.State != chat.ConnConnected || st.Reconnects != 1 {
		t.Errorf("status = %+v, want connected after 1 reconnect", st)
	}
	if err := a.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	sess.Close()

	// A restart: a new adapter on the same session file. WhatsApp
	// delivering the old message again (an ack lost in the crash) is not
	// answered twice.
	sess2, err := OpenSession(t.Context(), sessPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess2.Close()
	b, f2, _ := newTestAdapter(t, func(_ *Settings, _ *config.Adapter, o *Options) { o.Session = sess2 })
	in2 := start(t, b)
	f2.post(e, false)
	marker(t, f2, in2, "after restart")
	if n := in2.count("answer me once"); n != 0 {
		t.Errorf("after a restart, an old message was delivered again (%d times)", n)
	}
}

func TestLoggedOut(t *testing.T) {
	t.Parallel()
	t.Run("on connect", func(t *testing.T) {
		a, f, _ := newTestAdapter(t, nil)
		f.loggedOut = true
		err := a.Start(t.Context(), newInbox())
		if err == nil || !errors.Is(err, ErrLoggedOut) || !strings.Contains(err.Error(), "mother link whatsapp wa DATA") {
			t.Fatalf("Start = %v, want a logged-out error saying how to link again", err)
		}
		st := a.Status()
		if st.State != chat.ConnDown || !strings.Contains(st.LastError, "logged out") || !strings.Contains(st.LastError, "mother link whatsapp wa") {
			t.Errorf("status = %+v, want down with the logout and the way out", st)
		}
		if _, err := a.opts.Session.State(t.Context(), "wa"); !errors.Is(err, ErrLoggedOut) {
			t.Errorf("session state = %v, want ErrLoggedOut recorded", err)
		}
	})
	t.Run("while connected", func(t *testing.T) {
		a, f, _ := newTestAdapter(t, nil)
		start(t, a)
		f.emit(&events.LoggedOut{Reason: events.ConnectFailureMainDeviceGone})
		if st := a.Status(); st.State != chat.ConnDown || !strings.Contains(st.LastError, "primary device was logged out") {
			t.Errorf("status = %+v, want down with WhatsApp's reason", st)
		}
		reason, ok, err := a.opts.Session.LoggedOut(t.Context())
		if err != nil || !ok || !strings.Contains(reason, "primary device") {
			t.Errorf("recorded logout = %q, %v, %v", reason, ok, err)
		}
		// Stopping afterwards keeps the reason for momctl status.
		if err := a.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if st := a.Status(); !strings.Contains(st.LastError, "logged out") {
			t.Errorf("after Stop, status = %+v, lost the logout", st)
		}
	})
}

func TestMediaIn(t *testing.T) {
	t.Parallel()
	a, f, st := newTestAdapter(t, func(_ *Settings, _ *config.Adapter, o *Options) { o.MaxAttachment = 1000 })
	in := start(t, a)
	photo := bytes.Repeat([]byte{0xff, 0xd8}, 100)
	path, sum := f.addMedia(photo)
	f.post(userMsg(mario, mario, &waE2E.Message{ImageMessage: &waE2E.ImageMessage{
		Caption: proto.String("look at this"), Mimetype: proto.String("image/jpeg"),
		DirectPath: proto.String(path), FileSHA256: sum, FileLength: proto.Uint64(uint64(len(photo))), MediaKey: make([]byte, 32),
	}}), false)
	big := bytes.Repeat([]byte("x"), 2000)
	bpath, bsum := f.addMedia(big)
	f.post(userMsg(mario, mario, &waE2E.Message{DocumentMessage: &waE2E.DocumentMessage{
		FileName: proto.String("big.pdf"), Caption: proto.String("too big"), Mimetype: proto.String("application/pdf"),
		DirectPath: proto.String(bpath), FileSHA256: bsum, FileLength: proto.Uint64(uint64(len(big))),
	}}), false)
	f.post(userMsg(mario, mario, &waE2E.Message{DocumentMessage: &waE2E.DocumentMessage{
		FileName: proto.String("forged.txt"), Caption: proto.String("bad hash"),
		DirectPath: proto.String(path), FileSHA256: bsum, FileLength: proto.Uint64(uint64(len(photo))),
	}}), false)
	f.post(userMsg(mario, mario, &waE2E.Message{VideoMessage: &waE2E.VideoMessage{Caption: proto.String("a clip")}}), false)

	m, _ := in.wait(t, "look at this")
	if len(m.Attachments) != 1 || m.Attachments[0].Size != int64(len(photo)) || m.Attachments[0].MimeType != "image/jpeg" || !strings.HasSuffix(m.Attachments[0].Filename, ".jpg") {
		t.Fatalf("image delivered as %+v", m.Attachments)
	}
	dir, _ := st.AdapterFiles("wa").ChannelDir(ChannelID(mario))
	if got, err := os.ReadFile(filepath.Join(dir, m.Attachments[0].LocalPath)); err != nil || !bytes.Equal(got, photo) {
		t.Errorf("saved image = %d bytes, %v; want the photo", len(got), err)
	}
	if m, _ := in.wait(t, "too big"); len(m.Attachments) != 0 || !strings.Contains(m.Text, "[attachment big.pdf not downloaded: 2.0 KB is over the 1000 B limit]") {
		t.Errorf("oversized document delivered as %q, %+v; want the limit told", m.Text, m.Attachments)
	}
	if m, _ := in.wait(t, "bad hash"); len(m.Attachments) != 0 || !strings.Contains(m.Text, "[attachment forged.txt not downloaded: download: hash of media plaintext") {
		t.Errorf("a download failing its hash check delivered as %q", m.Text)
	}
	if m, _ := in.wait(t, "a clip"); !strings.Contains(m.Text, "[a video was sent; Mother takes images, documents and voice messages only]") {
		t.Errorf("video delivered as %q", m.Text)
	}
}

func TestAttachmentsOut(t *testing.T) {
	t.Parallel()
	a, f, _ := newTestAdapter(t, nil)
	start(t, a)
	dir := t.TempDir()
	png := filepath.Join(dir, "chart.png")
	os.WriteFile(png, []byte("\x89PNG\r\n\x1a\nchart"), 0o600)
	pdf := filepath.Join(dir, "report.pdf")
	os.WriteFile(pdf, []byte("%PDF-1.4 report"), 0o600)
	if err := a.Upload(t.Context(), ChannelID(family), png, "This week's chart"); err != nil {
		t.Fatal(err)
	}
	if err := a.Upload(t.Context(), ChannelID(mario), pdf, "report.pdf"); err != nil {
		t.Fatal(err)
	}
	img := f.chat(family)[0].Msg.GetImageMessage()
	if img == nil || img.GetCaption() != "This week's chart" || img.GetMimetype() != "image/png" || img.GetFileLength() != 13 ||
		len(img.GetMediaKey()) != 32 || len(img.GetFileSHA256()) != 32 || len(img.GetFileEncSHA256()) != 32 || !strings.HasPrefix(img.GetDirectPath(), "/v/") || img.GetURL() == "" {
		t.Errorf("image sent as %v", img)
	}
	doc := f.chat(mario)[0].Msg.GetDocumentMessage()
	if doc == nil || doc.GetFileName() != "report.pdf" || doc.GetCaption() != "" || doc.GetMimetype() != "application/pdf" || doc.GetFileLength() != 15 {
		t.Errorf("document sent as %v", doc)
	}
	// What went out can be fetched back by its keys.
	if data, err := f.Download(t.Context(), doc); err != nil || string(data) != "%PDF-1.4 report" {
		t.Errorf("download of the sent document = %q, %v", data, err)
	}
	if err := a.Upload(t.Context(), "not-a-channel", pdf, ""); err == nil {
		t.Errorf("upload to a bad channel id: no error")
	}
	big := filepath.Join(dir, "big.bin")
	fh, _ := os.Create(big)
	fh.Truncate(UploadLimit + 1)
	fh.Close()
	if err := a.Upload(t.Context(), ChannelID(mario), big, ""); err == nil || !strings.Contains(err.Error(), "over the 100.0 MB limit") {
		t.Errorf("upload over the limit = %v", err)
	}
}

// TestReplyGolden renders one run in a group and compares the real waE2E
// messages sent (as protojson) with testdata/reply.golden: the working
// message quoting the trigger, the edits, the answer with WhatsApp
// formatting; the model's @<number> is its words, listed as no mention
// (go test -update rewrites).
func TestReplyGolden(t *testing.T) {
	t.Parallel()
	a, f, _ := newTestAdapter(t, func(_ *Settings, _ *config.Adapter, o *Options) { o.Grace = time.Hour })
	in := start(t, a)
	f.post(userMsg(family, mario, mentioning("weather for oma?", selfPN)), false)
	trigger, _ := in.wait(t, "weather for oma?")
	md, err := os.ReadFile("testdata/reply.md")
	if err != nil {
		t.Fatal(err)
	}
	r := a.NewReply(t.Context(), trigger.ChannelID, &trigger, chat.ReplyOptions{})
	r.Event(t.Context(), agent.Event{Type: agent.EventToolStart, ToolCallID: "1", ToolName: "bash", Label: "checking the forecast"})
	f.waitSent(t, "the working message", func(s []sent) bool { return len(s) >= 1 })
	if _, err := r.Finish(t.Context(), string(md)); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, s := range f.sent {
		raw, err := protojson.Marshal(s.Msg)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		json.Indent(&out, raw, "", "  ")
		// Ids and the edit's time are the library's and the fake's, not
		// the adapter's output.
		line := strings.NewReplacer(s.ID, "<id>").Replace(out.String())
		line = timestampRe.ReplaceAllString(line, `"timestampMS": "<ms>"`)
		b.WriteString("to " + s.To.String() + "\n" + line + "\n\n")
	}
	got := strings.ReplaceAll(b.String(), f.sent[0].ID, "<main>")
	got = strings.ReplaceAll(got, trigger.ID, "<trigger>")
	golden := "testdata/reply.golden"
	if *update {
		os.WriteFile(golden, []byte(got), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
	}
	if got != string(want) {
		t.Errorf("sent messages differ from %s:\n%s", golden, got)
	}
}

func TestQuietByDefault(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, details, quiet bool) []shown {
		a, f, _ := newTestAdapter(t, func(s *Settings, _ *config.Adapter, _ *Options) { s.Details = details })
		start(t, a)
		r := a.NewReply(t.Context(), ChannelID(mario), nil, chat.ReplyOptions{Quiet: quiet})
		showing := func(label string) {
			f.waitSent(t, label, func([]sent) bool {
				for _, m := range f.chat(mario) {
					if strings.Contains(m.Text, label) {
						return true
					}
				}
				return false
			})
		}
		r.Event(t.Context(), agent.Event{Type: agent.EventToolStart, ToolCallID: "1", ToolName: "bash", Label: "ls"})
		r.Event(t.Context(), agent.Event{Type: agent.EventToolEnd, ToolCallID: "1", ToolName: "bash", Label: "ls", Result: "a.txt", Duration: time.Second})
		r.Event(t.Context(), agent.Event{Type: agent.EventToolStart, ToolCallID: "2", ToolName: "bash", Label: "second step"})
		showing("second step")
		// The working message exists now: a third step needs an edit,
		// and runview posts pending details before it edits, so once the
		// edit shows, any detail has been posted.
		r.Event(t.Context(), agent.Event{Type: agent.EventToolEnd, ToolCallID: "2", ToolName: "bash", Label: "second step", Duration: time.Second})
		r.Event(t.Context(), agent.Event{Type: agent.EventToolStart, ToolCallID: "3", ToolName: "bash", Label: "third step"})
		showing("third step")
		if _, err := r.Finish(t.Context(), "Done."); err != nil {
			t.Fatal(err)
		}
		return f.chat(mario)
	}
	if msgs := run(t, false, false); len(msgs) != 1 || msgs[0].Text != "Done." {
		t.Errorf("default: chat shows %+v, want only the answer", msgs)
	}
	if msgs := run(t, true, true); len(msgs) != 1 || msgs[0].Text != "Done." {
		t.Errorf("details on but quiet: chat shows %+v, want only the answer", msgs)
	}
	msgs := run(t, true, false)
	joined := ""
	for _, m := range msgs {
		joined += m.Text + "\n"
	}
	if !strings.Contains(joined, "*bash*") || !strings.Contains(joined, "a.txt") {
		t.Errorf("details on: chat shows %q, want the tool's details", joined)
	}
}

func TestComposingPresence(t *testing.T) {
	t.Parallel()
	a, f, _ := newTestAdapter(t, nil)
	start(t, a)
	r := a.NewReply(t.Context(), ChannelID(mario), nil, chat.ReplyOptions{})
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		n := len(f.presences)
		f.mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := r.Finish(t.Context(), "hi"); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	var chatP []string
	online := false
	for _, p := range f.presences {
		if p == "self:available" {
			online = true
		} else {
			chatP = append(chatP, p)
		}
	}
	f.mu.Unlock()
	p := strings.Join(chatP, ",")
	if !strings.HasPrefix(p, mario.User+":composing") || !strings.HasSuffix(p, mario.User+":paused") {
		t.Errorf("presences = %s, want composing while working, paused at the end", p)
	}
	if !online {
		t.Errorf("the account never went online (available), so typing would not show")
	}
}

func TestEditWindow(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	a, f, _ := newTestAdapter(t, nil)
	a.clock = clk
	start(t, a)
	id, err := a.send(t.Context(), mario, "working", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.edit(t.Context(), mario, id, "still working"); err != nil {
		t.Fatalf("edit inside the window: %v", err)
	}
	clk.Advance(EditWindow - time.Minute + time.Second)
	if err := a.edit(t.Context(), mario, id, "too late"); !errors.Is(err, errEditWindow) {
		t.Errorf("edit after %v = %v, want errEditWindow (the answer is then posted anew)", EditWindow-time.Minute, err)
	}
	if got := f.chat(mario); len(got) != 1 || got[0].Text != "still working" || got[0].Edits != 1 {
		t.Errorf("chat = %+v", got)
	}
}

func TestBadIDsInConfig(t *testing.T) {
	t.Parallel()
	for _, admins := range [][]string{{"+4915133333333"}, {"4915133333333"}, {"4915133333333@s.whatsapp.net:3"}, {"123@lid"}} {
		_, err := New(chat.Env{Name: "wa", Config: config.Adapter{Type: "whatsapp", Admins: admins}, DataDir: t.TempDir()}, Options{})
		if err == nil || !strings.Contains(err.Error(), "admins[0]") || !strings.Contains(err.Error(), "@s.whatsapp.net") {
			t.Errorf("New with admins %q = %v, want an error naming admins[0] and the form", admins, err)
		}
	}
	_, err := New(chat.Env{Name: "wa", Config: config.Adapter{Type: "whatsapp", DM: config.DMPolicy{Users: []string{"mario"}}}, DataDir: t.TempDir()}, Options{})
	if err == nil || !strings.Contains(err.Error(), "dm[0]") {
		t.Errorf("New with dm [mario] = %v, want an error naming dm[0]", err)
	}
}

func TestChannelIDs(t *testing.T) {
	t.Parallel()
	for _, j := range []types.JID{mario, family, types.NewJID("4915111111111-1611111111", types.GroupServer), marioL} {
		id := ChannelID(j)
		if err := chat.ValidID(id); err != nil {
			t.Errorf("ChannelID(%s) = %q: %v", j, id, err)
		}
		if back, err := parseChannel(id); err != nil || back != j {
			t.Errorf("parseChannel(%q) = %v, %v; want %v", id, back, err, j)
		}
	}
	for _, bad := range []string{"", "_", "123", "123_", "_g.us", "123_example.com"} {
		if _, err := parseChannel(bad); err == nil {
			t.Errorf("parseChannel(%q): no error", bad)
		}
	}
}
