package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/slack/slacktest"
	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/render"
	"github.com/mother-chat/mother/pkg/store"
)

// These tests run the real slack-go client (Web API and Socket Mode) in
// the adapter against slacktest, a fake Slack on a loopback socket. The
// inbox (Mother's dispatcher) is a recorder.

var (
	mario = slacktest.User{ID: "UMARIO", Name: "mario", RealName: "Mario Rossi"}
	luigi = slacktest.User{ID: "ULUIGI", Name: "luigi"}
)

const (
	general = "CGENERAL"
	random  = "CRANDOM"
	dm      = "DMARIO"
)

type delivered struct {
	msg  chat.ChannelMessage
	late bool
}

type inbox struct {
	mu      sync.Mutex
	changed chan struct{}
	msgs    []delivered
	stops   [][3]string
}

func newInbox() *inbox { return &inbox{changed: make(chan struct{})} }

func (i *inbox) Deliver(_ context.Context, _ string, msg chat.ChannelMessage, late bool) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.msgs = append(i.msgs, delivered{msg, late})
	close(i.changed)
	i.changed = make(chan struct{})
	return nil
}

func (i *inbox) Stop(_ context.Context, adapter, channelID, userID string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.stops = append(i.stops, [3]string{adapter, channelID, userID})
	close(i.changed)
	i.changed = make(chan struct{})
}

func (i *inbox) wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		i.mu.Lock()
		ok := cond()
		ch := i.changed
		i.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (i *inbox) waitMsgs(t *testing.T, n int) []delivered {
	t.Helper()
	i.wait(t, fmt.Sprintf("%d delivered messages", n), func() bool { return len(i.msgs) >= n })
	i.mu.Lock()
	defer i.mu.Unlock()
	return append([]delivered(nil), i.msgs...)
}

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

type fixture struct {
	fake  *slacktest.Server
	a     *Adapter
	in    *inbox
	st    *store.Store
	logs  *syncBuffer
	start func()
}

func newFake(t *testing.T, ping time.Duration) *slacktest.Server {
	fake := slacktest.New(slacktest.Options{
		Users: []slacktest.User{mario, luigi},
		Channels: []slacktest.Channel{
			{ID: general, Name: "general", IsChannel: true, IsMember: true},
			{ID: random, Name: "random", IsChannel: true, IsMember: true},
			{ID: dm, IsIM: true, User: mario.ID, IsMember: true},
		},
		PingInterval: ping,
	})
	t.Cleanup(fake.Close)
	return fake
}

func newFixture(t *testing.T, fake *slacktest.Server, opts Options) *fixture {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logs := &syncBuffer{}
	env := chat.Env{
		Name:   "slack",
		Config: config.Adapter{Type: "slack", Settings: &Settings{BotToken: slacktest.BotToken, AppToken: slacktest.AppToken, APIURL: fake.APIURL()}},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Files:  st.AdapterFiles("slack"),
	}
	if opts.Grace == 0 {
		opts.Grace = 50 * time.Millisecond
	}
	if opts.MinEdit == 0 {
		opts.MinEdit = 20 * time.Millisecond
	}
	a, err := New(env, opts)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{fake: fake, a: a, in: newInbox(), st: st, logs: logs}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("adapter log:\n%s", logs.String())
		}
	})
	f.start = func() {
		if err := a.Start(t.Context(), f.in); err != nil {
			t.Fatalf("Start: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := a.Stop(ctx); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})
	}
	return f
}

func TestStartKnowsUsersAndChannels(t *testing.T) {
	t.Parallel()
	f := newFixture(t, newFake(t, 0), Options{})
	f.start()
	if f.a.SelfID() != "UBOT" {
		t.Errorf("SelfID = %q", f.a.SelfID())
	}
	us := f.a.Users()
	if len(us) != 3 || us[0].Username != "luigi" || us[1].Username != "mario" || us[1].DisplayName != "Mario Rossi" {
		t.Errorf("Users() = %+v", us)
	}
	cs := f.a.Channels()
	want := []chat.ChannelInfo{{ID: general, Name: "general", Type: chat.ChannelPublic}, {ID: random, Name: "random", Type: chat.ChannelPublic}, {ID: dm, Name: "dm-mario", Type: chat.ChannelDM}}
	if fmt.Sprint(cs) != fmt.Sprint(want) {
		t.Errorf("Channels() = %+v, want %+v", cs, want)
	}
}

func TestEventsBecomeChannelMessages(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{})
	f.start()
	fake.Post(general, luigi.ID, "chatting in <#"+random+"|random> about <https://example.com|a site> &amp; more")
	fake.Post(general, mario.ID, "<@UBOT> read this, <@"+luigi.ID+">", slacktest.WithFile("../notes.txt", "text/plain", []byte("notes!")))
	fake.Post(dm, mario.ID, "psst")
	// Malformed: an unparsable frame, an event without a user, a bad ts.
	fake.SendRaw(`{"envelope_id":"bad-1","type":"events_api","payload":{"type":"event_callback","event":"not an object"}}`)
	fake.SendEvent(map[string]any{"type": "message", "channel": general, "text": "no user", "ts": "1700000000.000001"})
	fake.SendEvent(map[string]any{"type": "message", "channel": general, "user": mario.ID, "text": "bad ts", "ts": "yesterday"})
	fake.Post(general, luigi.ID, "still here")

	// "still here" is the marker: the envelopes reach the adapter in the
	// order sent and are delivered in that order, so when it arrives the
	// duplicate app_mention and the malformed events, all sent before it,
	// have been handled. Anything wrongly delivered for them comes first.
	f.in.wait(t, `"still here"`, func() bool {
		return len(f.in.msgs) > 0 && f.in.msgs[len(f.in.msgs)-1].msg.Text == "still here"
	})
	got := f.in.waitMsgs(t, 4)
	if len(got) != 4 {
		t.Fatalf("delivered %d, want 4: %+v", len(got), got)
	}
	plain, mention, priv, last := got[0].msg, got[1].msg, got[2].msg, got[3].msg
	if plain.IsMention || plain.Text != "chatting in #random about a site (https://example.com) & more" || plain.RawText == "" {
		t.Errorf("plain = %+v", plain)
	}
	if !mention.IsMention || mention.Text != "@mother read this, @luigi" || mention.Sender.Username != "mario" || mention.Sender.DisplayName != "Mario Rossi" {
		t.Errorf("mention = %+v", mention)
	}
	if len(mention.Attachments) != 1 {
		t.Fatalf("attachments = %+v", mention.Attachments)
	}
	dir, _ := f.a.env.Files.ChannelDir(general)
	if b, err := os.ReadFile(filepath.Join(dir, mention.Attachments[0].LocalPath)); err != nil || string(b) != "notes!" || strings.Contains(mention.Attachments[0].LocalPath, "..") {
		t.Errorf("attachment %+v content %q, %v", mention.Attachments[0], b, err)
	}
	if !priv.IsDM || !priv.IsMention || priv.ChannelID != dm {
		t.Errorf("DM = %+v", priv)
	}
	if last.Text != "still here" {
		t.Errorf("last = %+v", last)
	}
	fake.Wait(t, 5*time.Second, "the malformed envelope acknowledged", func() bool {
		for _, a := range fake.AcksLocked() {
			if a == "bad-1" {
				return true
			}
		}
		return false
	})
	if !strings.Contains(f.logs.String(), "skipping malformed") {
		t.Errorf("malformed events not logged:\n%s", f.logs.String())
	}
}

func TestAnswerRenderedInThread(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{})
	f.start()
	fake.Post(general, mario.ID, "<@UBOT> count the files")
	msg := f.in.waitMsgs(t, 1)[0].msg
	r := f.a.NewReply(t.Context(), general, &msg, chat.ReplyOptions{})
	r.Event(t.Context(), agent.Event{Type: agent.EventToolStart, ToolCallID: "1", ToolName: "bash", Label: "counting <files>", Args: json.RawMessage(`{"command":"ls | wc -l"}`)})
	var mainTS string
	fake.Wait(t, 5*time.Second, "working message with a stop button", func() bool {
		for _, m := range fake.MessagesLocked(general) {
			if m.User == "UBOT" && m.HasButton(stopActionID) && strings.Contains(m.Text, "→ counting &lt;files&gt;") {
				mainTS = m.TS
				return true
			}
		}
		return false
	})
	fake.Click(general, mainTS, mario.ID, stopActionID)
	f.in.wait(t, "stop", func() bool { return len(f.in.stops) == 1 })
	if s := f.in.stops[0]; s != [3]string{"slack", general, mario.ID} {
		t.Errorf("Stop = %v", s)
	}
	r.Event(t.Context(), agent.Event{Type: agent.EventToolEnd, ToolCallID: "1", ToolName: "bash", Label: "counting <files>", Args: json.RawMessage(`{"command":"ls | wc -l"}`), Result: "42", Duration: 300 * time.Millisecond})
	r.Event(t.Context(), agent.Event{Type: agent.EventRunEnd, StopReason: agent.StopDone, Usage: model.Usage{InputTokens: 900, OutputTokens: 12}})
	id, err := r.Finish(t.Context(), "There are **42** files, @mario. See [the docs](https://example.com/docs).")
	if err != nil {
		t.Fatal(err)
	}
	if id != mainTS {
		t.Errorf("Finish id = %s, want %s", id, mainTS)
	}
	var main slacktest.Message
	for _, m := range fake.Messages(general) {
		if m.TS == mainTS {
			main = m
		}
	}
	// The model's @mario is its words: shown, notifying nobody.
	if want := "There are *42* files, @mario. See <https://example.com/docs|the docs>."; main.Text != want || main.HasButton(stopActionID) {
		t.Errorf("answer = %q (button %v, blocks %s), want %q", main.Text, main.HasButton(stopActionID), main.Blocks, want)
	}
	th := fake.Thread(general, mainTS)
	if len(th) != 2 || !strings.Contains(th[0].Text, "*bash* · counting &lt;files&gt; · 300ms") || !strings.Contains(th[0].Text, "ls | wc -l") || !strings.Contains(th[1].Text, "900 tokens in, 12 out") {
		t.Errorf("thread = %+v", th)
	}
	// A reply in Mother's thread addresses her; the answer stays in the thread.
	fake.Post(general, luigi.ID, "and hidden ones?", slacktest.InThread(mainTS))
	d := f.in.waitMsgs(t, 2)[1].msg
	if !d.IsMention || d.Metadata["threadTs"] != mainTS || d.ReplyTo != mainTS {
		t.Fatalf("thread reply = %+v", d)
	}
	r2 := f.a.NewReply(t.Context(), general, &d, chat.ReplyOptions{})
	if _, err := r2.Finish(t.Context(), "None."); err != nil {
		t.Fatal(err)
	}
	th = fake.Thread(general, mainTS)
	if last := th[len(th)-1]; last.Text != "None." || last.User != "UBOT" {
		t.Errorf("thread answer = %+v", last)
	}
}

func TestLongAnswerGoesWholeIntoThread(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{})
	f.start()
	var b strings.Builder
	for i := range 400 {
		fmt.Fprintf(&b, "Line %d of a long answer that keeps going.\n\n", i)
	}
	r := f.a.NewReply(t.Context(), general, nil, chat.ReplyOptions{Quiet: true})
	id, err := r.Finish(t.Context(), b.String())
	if err != nil {
		t.Fatal(err)
	}
	ms := fake.Messages(general)
	main := ms[0]
	if main.TS != id || render.Len(main.Text) > messageLimit || !strings.HasSuffix(main.Text, "_(continued in the thread)_") {
		t.Errorf("main message (%d runes) = %.80q…", render.Len(main.Text), main.Text)
	}
	th := fake.Thread(general, id)
	var all strings.Builder
	for _, m := range th {
		if render.Len(m.Text) > messageLimit {
			t.Errorf("thread part of %d runes", render.Len(m.Text))
		}
		all.WriteString(m.Text + "\n")
	}
	for i := range 400 {
		if !strings.Contains(all.String(), fmt.Sprintf("Line %d of", i)) {
			t.Fatalf("line %d missing from the thread", i)
		}
	}
}

func TestUploadsLandInTheirChannels(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{})
	f.start()
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 8 {
		for _, ch := range []string{general, random} {
			path := filepath.Join(dir, fmt.Sprintf("%s-%d.txt", ch, i))
			os.WriteFile(path, []byte("for "+ch), 0o600)
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- f.a.Upload(t.Context(), ch, path, "")
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	files := fake.Files()
	if len(files) != 16 {
		t.Fatalf("%d files shared, want 16", len(files))
	}
	for _, fl := range files {
		if !strings.HasPrefix(fl.Name, fl.Channel+"-") || string(fl.Data) != "for "+fl.Channel {
			t.Errorf("file %s (%q) landed in %s", fl.Name, fl.Data, fl.Channel)
		}
	}
}

func TestReconnectsAfterDrop(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{})
	f.start()
	if st := f.a.Status(); st.State != chat.ConnConnected || st.Reconnects != 0 {
		t.Errorf("Status after start = %+v, want connected, 0 reconnects", st)
	}
	fake.Post(general, mario.ID, "before")
	f.in.waitMsgs(t, 1)
	fake.DropConnections()
	fake.Wait(t, 10*time.Second, "a second socket", func() bool { return fake.OpensLocked() >= 2 })
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(f.logs.String(), "reconnected") {
		if time.Now().After(deadline) {
			t.Fatalf("reconnect not logged:\n%s", f.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	fake.Post(general, mario.ID, "after")
	if got := f.in.waitMsgs(t, 2); got[1].msg.Text != "after" {
		t.Errorf("after reconnect: %+v", got[1].msg)
	}
	if st := f.a.Status(); st.State != chat.ConnConnected || st.Reconnects != 1 {
		t.Errorf("Status after a drop = %+v, want connected, 1 reconnect", st)
	}
	if err := f.a.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := f.a.Status(); st.State != chat.ConnDown {
		t.Errorf("Status after Stop = %+v, want down", st)
	}
}

func TestSilentSocketIsDetected(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 100*time.Millisecond)
	f := newFixture(t, fake, Options{PingTimeout: 500 * time.Millisecond})
	f.start()
	fake.Post(general, mario.ID, "before")
	f.in.waitMsgs(t, 1)
	fake.SetSilent(true)
	fake.Post(general, mario.ID, "swallowed by the silent socket")
	fake.Wait(t, 10*time.Second, "a new socket after the silence", func() bool { return fake.OpensLocked() >= 2 })
	fake.SetSilent(false)
	got := f.in.waitMsgs(t, 2)
	if got[1].msg.Text != "swallowed by the silent socket" || !got[1].late {
		t.Errorf("got %+v, want the swallowed message backfilled", got[1])
	}
}

func TestRateLimitedUpdateWaitsRetryAfter(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{})
	f.start()
	r := f.a.NewReply(t.Context(), general, nil, chat.ReplyOptions{})
	r.Event(t.Context(), agent.Event{Type: agent.EventToolStart, ToolCallID: "1", ToolName: "bash", Label: "busy"})
	fake.Wait(t, 5*time.Second, "working message", func() bool { return len(fake.MessagesLocked(general)) == 1 })
	fake.RateLimit("chat.update", time.Second)
	if _, err := r.Finish(t.Context(), "done at last"); err != nil {
		t.Fatal(err)
	}
	if ms := fake.Messages(general); ms[0].Text != "done at last" {
		t.Fatalf("answer = %q", ms[0].Text)
	}
	var limited, ok time.Time
	for _, rq := range fake.Requests() {
		if rq.Method == "chat.update" && rq.Status == 429 {
			limited = rq.At
		} else if rq.Method == "chat.update" && !limited.IsZero() {
			ok = rq.At
		}
	}
	if limited.IsZero() || ok.IsZero() || ok.Sub(limited) < time.Second {
		t.Errorf("429 at %v, retry at %v: want a retry no sooner than Retry-After (1s)", limited, ok)
	}
}

func TestBackfillAfterRestart(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{})
	old := fake.Post(general, luigi.ID, "old", slacktest.Offline())
	ch, _ := f.st.Channel("slack", general)
	if _, err := ch.AppendMessage(chat.ChannelMessage{ID: old.TS, ChannelID: general, Text: "old"}); err != nil {
		t.Fatal(err)
	}
	q := fake.Post(general, mario.ID, "<@UBOT> anyone?", slacktest.Offline())
	reply := fake.Post(general, luigi.ID, "me, in the thread", slacktest.Offline(), slacktest.InThread(q.TS))
	f.start()
	got := f.in.waitMsgs(t, 2)
	if len(got) != 2 || got[0].msg.ID != q.TS || !got[0].msg.IsMention || got[1].msg.ID != reply.TS || got[1].msg.Metadata["threadTs"] != q.TS {
		t.Errorf("backfill = %+v", got)
	}
	for _, d := range got {
		if !d.late {
			t.Errorf("not late: %+v", d.msg)
		}
	}
}
