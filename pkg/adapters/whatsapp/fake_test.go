package whatsapp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waAdv"
	"go.mau.fi/whatsmeow/proto/waE2E"
	wastore "go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/store"
)

// The cast: Mother's account, two users, a group.
var (
	selfPN  = types.NewJID("4915100000001", types.DefaultUserServer)
	selfLID = types.NewJID("100000000000001", types.HiddenUserServer)
	mario   = types.NewJID("4915111111111", types.DefaultUserServer)
	marioL  = types.NewJID("200000000000002", types.HiddenUserServer)
	luigi   = types.NewJID("4915122222222", types.DefaultUserServer)
	admin   = types.NewJID("4915133333333", types.DefaultUserServer)
	family  = types.NewJID("120363000000000001", types.GroupServer)
)

// sent is one message the adapter sent through the client.
type sent struct {
	To  types.JID
	ID  string
	Msg *waE2E.Message
}

// fakeClient implements Client the way the adapter sees whatsmeow: it
// records what is sent (the real waE2E messages), keeps the chat as users
// would see it (edits applied, revoked messages gone), emits the library's
// real event types to the handlers in order, and keeps uploaded media so
// downloads check their hashes. BuildEdit and BuildRevoke are the real
// library's, on an unconnected *whatsmeow.Client.
type fakeClient struct {
	builder *whatsmeow.Client

	emitMu sync.Mutex // events reach the handlers one at a time, in order
	// syncMu is held through a connection's whole offline sync: a live
	// message comes after it, as on WhatsApp.
	syncMu sync.Mutex

	mu        sync.Mutex
	handlers  map[uint32]whatsmeow.EventHandler
	nextH     uint32
	up        bool
	sent      []sent
	presences []string
	media     map[string][]byte // direct path -> plaintext
	groups    map[string]string
	// admins are each group's admins (GetGroupInfo's participants).
	admins    map[string][]types.JID
	n         int
	fail      []error
	failed    int
	offline   []*events.Message
	lastLive  *events.Message
	edits     map[string]int
	changed   chan struct{}
	loggedOut bool
}

func newFakeClient(t testing.TB) *fakeClient {
	t.Helper()
	s, err := OpenSession(context.Background(), filepath.Join(t.TempDir(), "builder.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	dev := s.container.NewDevice()
	id := types.NewADJID(selfPN.User, 0, 7)
	dev.ID, dev.LID = &id, selfLID
	return &fakeClient{
		builder:  whatsmeow.NewClient(dev, nil),
		handlers: map[uint32]whatsmeow.EventHandler{},
		media:    map[string][]byte{},
		groups:   map[string]string{family.String(): "Family"},
		edits:    map[string]int{},
		changed:  make(chan struct{}),
	}
}

var _ Client = (*fakeClient)(nil)

func (f *fakeClient) touch() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeClient) emit(evt any) {
	f.emitMu.Lock()
	defer f.emitMu.Unlock()
	f.mu.Lock()
	var hs []whatsmeow.EventHandler
	for i := uint32(1); i <= f.nextH; i++ {
		if h, ok := f.handlers[i]; ok {
			hs = append(hs, h)
		}
	}
	f.mu.Unlock()
	for _, h := range hs {
		h(evt)
	}
}

// Connect connects as the library does: Connected arrives on another
// goroutine, then what was waiting offline, then OfflineSyncCompleted.
// A logged-out session gets LoggedOut instead.
func (f *fakeClient) Connect() error {
	f.mu.Lock()
	out := f.loggedOut
	f.mu.Unlock()
	go func() {
		if out {
			f.emit(&events.LoggedOut{OnConnect: true, Reason: events.ConnectFailureLoggedOut})
			return
		}
		f.reconnect(false)
	}()
	return nil
}

// reconnect brings the connection up: Connected, the offline sync
// (with replay, the last live message once more, as WhatsApp resends a
// message whose ack was lost), OfflineSyncCompleted.
func (f *fakeClient) reconnect(replay bool) {
	f.syncMu.Lock()
	defer f.syncMu.Unlock()
	f.mu.Lock()
	f.up = true
	queued := f.offline
	f.offline = nil
	last := f.lastLive
	f.mu.Unlock()
	f.emit(&events.Connected{})
	f.emit(&events.OfflineSyncPreview{Total: len(queued), Messages: len(queued)})
	if replay && last != nil {
		f.emit(last)
	}
	for _, m := range queued {
		f.emit(m)
	}
	f.emit(&events.OfflineSyncCompleted{Count: len(queued)})
}

// drop loses the connection; the library reconnects on its own.
func (f *fakeClient) drop() {
	f.mu.Lock()
	f.up = false
	f.mu.Unlock()
	f.emit(&events.Disconnected{})
	go f.reconnect(true)
}

func (f *fakeClient) Disconnect() {
	f.mu.Lock()
	f.up = false
	f.mu.Unlock()
}

func (f *fakeClient) AddEventHandler(h whatsmeow.EventHandler) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextH++
	f.handlers[f.nextH] = h
	return f.nextH
}

func (f *fakeClient) RemoveEventHandler(id uint32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.handlers[id]
	delete(f.handlers, id)
	return ok
}

func (f *fakeClient) SendMessage(_ context.Context, to types.JID, m *waE2E.Message, _ ...whatsmeow.SendRequestExtra) (whatsmeow.SendResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.fail) > 0 {
		err := f.fail[0]
		f.fail = f.fail[1:]
		f.failed++
		return whatsmeow.SendResponse{}, err
	}
	f.n++
	id := fmt.Sprintf("3EB0%016X", f.n)
	f.sent = append(f.sent, sent{To: to, ID: id, Msg: proto.Clone(m).(*waE2E.Message)})
	if pm := m.GetEditedMessage().GetMessage().GetProtocolMessage(); pm.GetType() == waE2E.ProtocolMessage_MESSAGE_EDIT {
		f.edits[pm.GetKey().GetID()]++
	}
	f.touch()
	return whatsmeow.SendResponse{ID: id, Timestamp: time.Unix(1734567890, 0)}, nil
}

func (f *fakeClient) SendPresence(_ context.Context, state types.Presence) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.presences = append(f.presences, "self:"+string(state))
	return nil
}

func (f *fakeClient) SendChatPresence(_ context.Context, jid types.JID, state types.ChatPresence, _ types.ChatPresenceMedia) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.presences = append(f.presences, jid.User+":"+string(state))
	f.touch()
	return nil
}

// Download returns what was uploaded for the message's direct path,
// checking its length and hash as the library does.
func (f *fakeClient) Download(_ context.Context, m whatsmeow.DownloadableMessage) ([]byte, error) {
	f.mu.Lock()
	data, ok := f.media[m.GetDirectPath()]
	f.mu.Unlock()
	if !ok {
		return nil, whatsmeow.ErrMediaDownloadFailedWith404
	}
	if sum := sha256.Sum256(data); !bytes.Equal(sum[:], m.GetFileSHA256()) {
		return nil, whatsmeow.ErrInvalidMediaSHA256
	}
	if l, ok := m.(interface{ GetFileLength() uint64 }); ok && l.GetFileLength() != uint64(len(data)) {
		return nil, whatsmeow.ErrFileLengthMismatch
	}
	return data, nil
}

// UploadReader keeps the file under a new direct path and answers with
// its hashes and a media key, as the library does after encrypting it
// into tempFile (which it needs).
func (f *fakeClient) UploadReader(_ context.Context, r io.Reader, tempFile io.ReadWriteSeeker, _ whatsmeow.MediaType) (whatsmeow.UploadResponse, error) {
	if tempFile == nil {
		return whatsmeow.UploadResponse{}, errors.New("no temporary file")
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return whatsmeow.UploadResponse{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	path := fmt.Sprintf("/v/t62.7119-24/%d", f.n)
	f.media[path] = append([]byte(nil), data...)
	key := make([]byte, 32)
	rand.Read(key)
	sum := sha256.Sum256(data)
	enc := sha256.Sum256(append(append([]byte(nil), key...), data...))
	return whatsmeow.UploadResponse{URL: "https://mmg.whatsapp.net" + path, DirectPath: path, MediaKey: key, FileSHA256: sum[:], FileEncSHA256: enc[:], FileLength: uint64(len(data))}, nil
}

func (f *fakeClient) BuildEdit(chat types.JID, id types.MessageID, c *waE2E.Message) *waE2E.Message {
	return f.builder.BuildEdit(chat, id, c)
}

func (f *fakeClient) BuildRevoke(chat, sender types.JID, id types.MessageID) *waE2E.Message {
	return f.builder.BuildRevoke(chat, sender, id)
}

func (f *fakeClient) GetGroupInfo(_ context.Context, jid types.JID) (*types.GroupInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name, ok := f.groups[jid.String()]
	if !ok {
		return nil, errors.New("not in the group")
	}
	gi := &types.GroupInfo{JID: jid, GroupName: types.GroupName{Name: name}}
	for i, id := range f.admins[jid.String()] {
		gi.Participants = append(gi.Participants, types.GroupParticipant{JID: id, PhoneNumber: id, IsAdmin: true, IsSuperAdmin: i == 0})
	}
	return gi, nil
}

// addMedia stores a file as if someone had uploaded it, and returns the
// fields a media message carries.
func (f *fakeClient) addMedia(data []byte) (path string, sum []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	path = fmt.Sprintf("/v/t62.7118-24/in-%d", f.n)
	f.media[path] = append([]byte(nil), data...)
	s := sha256.Sum256(data)
	return path, s[:]
}

// post delivers a user's message: live, or (offline) held until the next
// reconnect's offline sync.
func (f *fakeClient) post(e *events.Message, offline bool) {
	f.mu.Lock()
	if offline || !f.up {
		f.offline = append(f.offline, e)
		f.mu.Unlock()
		return
	}
	f.lastLive = e
	f.mu.Unlock()
	f.syncMu.Lock()
	defer f.syncMu.Unlock()
	f.emit(e)
}

// shown is a message as the chat shows it now.
type shown struct {
	ID    string
	Text  string
	Edits int
	Msg   *waE2E.Message
}

// chat is what the chat with jid shows of Mother's messages, oldest first.
func (f *fakeClient) chat(jid types.JID) []shown {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []shown
	idx := map[string]int{}
	for _, s := range f.sent {
		if s.To != jid {
			continue
		}
		m := s.Msg
		if pm := m.GetProtocolMessage(); pm != nil && pm.GetType() == waE2E.ProtocolMessage_REVOKE {
			if i, ok := idx[pm.GetKey().GetID()]; ok {
				out[i].Text, out[i].Msg = "", nil
			}
			continue
		}
		if pm := m.GetEditedMessage().GetMessage().GetProtocolMessage(); pm.GetType() == waE2E.ProtocolMessage_MESSAGE_EDIT {
			if i, ok := idx[pm.GetKey().GetID()]; ok {
				out[i].Text = textOf(pm.GetEditedMessage())
				out[i].Edits++
			}
			continue
		}
		idx[s.ID] = len(out)
		out = append(out, shown{ID: s.ID, Text: textOf(m), Msg: m})
	}
	var kept []shown
	for _, s := range out {
		if s.Msg != nil {
			kept = append(kept, s)
		}
	}
	return kept
}

func textOf(m *waE2E.Message) string {
	switch {
	case m.GetExtendedTextMessage() != nil:
		return m.GetExtendedTextMessage().GetText()
	case m.GetImageMessage() != nil:
		return m.GetImageMessage().GetCaption()
	case m.GetDocumentMessage() != nil:
		return m.GetDocumentMessage().GetCaption()
	}
	return m.GetConversation()
}

// waitSent waits until cond holds for what was sent.
func (f *fakeClient) waitSent(t *testing.T, what string, cond func([]sent) bool) []sent {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		got := append([]sent(nil), f.sent...)
		ch := f.changed
		f.mu.Unlock()
		if cond(got) {
			return got
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; sent %d messages", what, len(got))
		}
	}
}

// ---- building the library's events ----

var msgN int

var msgMu sync.Mutex

func nextMsgID() string {
	msgMu.Lock()
	defer msgMu.Unlock()
	msgN++
	return fmt.Sprintf("3A%018X", msgN)
}

// userMsg is a message from sender in chat (a group, or the DM with the
// sender), as whatsmeow delivers it.
func userMsg(chatJID, sender types.JID, m *waE2E.Message) *events.Message {
	return &events.Message{
		Info: types.MessageInfo{
			MessageSource: types.MessageSource{Chat: chatJID, Sender: sender, IsGroup: chatJID.Server == types.GroupServer},
			ID:            nextMsgID(),
			PushName:      "Mario Rossi",
			Timestamp:     time.Unix(1734567890, 0),
			Type:          "text",
		},
		Message: m,
	}
}

func text(s string) *waE2E.Message { return &waE2E.Message{Conversation: proto.String(s)} }

// mentioning is "@<self> s" with the mention in the context, as WhatsApp
// sends a mention.
func mentioning(s string, who types.JID) *waE2E.Message {
	return &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
		Text:        proto.String("@" + who.User + " " + s),
		ContextInfo: &waE2E.ContextInfo{MentionedJID: []string{who.String()}},
	}}
}

// ---- the adapter under test ----

// newTestAdapter builds an adapter on a fake client and a real store in
// a temporary data directory, with short timings.
func newTestAdapter(t *testing.T, edit func(*Settings, *config.Adapter, *Options)) (*Adapter, *fakeClient, *store.Store) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := newFakeClient(t)
	s := &Settings{}
	ac := config.Adapter{Type: "whatsapp", Admins: []string{admin.String()}, Settings: s}
	sess, err := OpenSession(context.Background(), filepath.Join(dir, "state", "whatsapp", "wa.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	opts := Options{Client: f, Self: selfPN, SelfLID: selfLID, Session: sess, NoLinkPrompt: true,
		MinEdit: 100 * time.Millisecond, Grace: 50 * time.Millisecond, PresenceEvery: time.Second, RateWait: 50 * time.Millisecond}
	if edit != nil {
		edit(s, &ac, &opts)
	}
	a, err := New(chat.Env{Name: "wa", Config: ac, Logger: slog.New(slog.DiscardHandler), Files: st.AdapterFiles("wa"), DataDir: dir}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return a, f, st
}

func newTestDeviceJID() types.JID { return types.NewADJID(selfPN.User, 0, 3) }

// saveLinkedDevice stores dev as pairing does: with its id and the
// account's signed identity (whatsmeow saves it on success).
func saveLinkedDevice(t *testing.T, dev *wastore.Device, id types.JID) {
	t.Helper()
	dev.ID = &id
	dev.Account = &waAdv.ADVSignedDeviceIdentity{Details: []byte("details"), AccountSignatureKey: make([]byte, 32), AccountSignature: make([]byte, 64), DeviceSignature: make([]byte, 64)}
	if err := dev.Save(context.Background()); err != nil {
		t.Fatalf("save device: %v", err)
	}
}
