package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/mother-chat/mother/pkg/adapters/discord/discordtest"
	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/render"
	"github.com/mother-chat/mother/pkg/render/runview"
	"github.com/mother-chat/mother/pkg/store"
)

// These tests run the real discordgo client inside the adapter against
// discordtest, a fake Discord speaking the REST API and the gateway
// protocol on a loopback socket. The inbox (Mother's dispatcher) is a
// recorder.

const (
	general = "700000000000000001"
	random  = "700000000000000002"
	dmChan  = "700000000000000009"
)

var (
	mario = discordtest.User{ID: "100000000000000001", Username: "mario", GlobalName: "Mario Rossi"}
	luigi = discordtest.User{ID: "100000000000000002", Username: "luigi"}
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

func (i *inbox) Deliver(_ context.Context, adapter string, msg chat.ChannelMessage, late bool) error {
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

// waitMsgs waits for n deliveries and returns them.
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
	fake  *discordtest.Server
	a     *Adapter
	in    *inbox
	st    *store.Store
	logs  *syncBuffer
	start func()
}

func newFake(t *testing.T, hb time.Duration) *discordtest.Server {
	fake := discordtest.New(discordtest.Options{
		Channels: []discordtest.Channel{
			{ID: general, Type: discordtest.TypeText, Name: "general"},
			{ID: random, Type: discordtest.TypeText, Name: "random"},
		},
		Members:           []discordtest.User{mario, luigi},
		HeartbeatInterval: hb,
	})
	fake.AddChannel(discordtest.Channel{ID: dmChan, Type: discordtest.TypeDM, Recipients: []discordtest.User{mario}})
	t.Cleanup(fake.Close)
	return fake
}

func newFixture(t *testing.T, fake *discordtest.Server, opts Options) *fixture {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logs := &syncBuffer{}
	env := chat.Env{
		Name:   "discord",
		Config: config.Adapter{Type: "discord", Settings: &Settings{BotToken: "test-token", APIURL: fake.URL, GuildID: fake.GuildID()}},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Files:  st.AdapterFiles("discord"),
	}
	if opts.Grace == 0 {
		opts.Grace = 50 * time.Millisecond
	}
	a, err := New(env, opts)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{fake: fake, a: a, in: newInbox(), st: st, logs: logs}
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

func TestIdentifiesWithMothersIntents(t *testing.T) {
	t.Parallel()
	f := newFixture(t, newFake(t, 0), Options{})
	f.start()
	ids := f.fake.Identifies()
	if len(ids) != 1 {
		t.Fatalf("%d identifies", len(ids))
	}
	var id struct {
		Intents int `json:"intents"`
	}
	json.Unmarshal(ids[0], &id)
	// guilds 1<<0, guild messages 1<<9, direct messages 1<<12, message content 1<<15
	if want := 1<<0 | 1<<9 | 1<<12 | 1<<15; id.Intents != want {
		t.Errorf("intents = %b, want %b", id.Intents, want)
	}
	if f.a.SelfID() != f.fake.Bot().ID {
		t.Errorf("SelfID = %q", f.a.SelfID())
	}
	// GUILD_CREATE follows READY: wait for the guild to be known.
	deadline := time.Now().Add(5 * time.Second)
	for len(f.a.Channels()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	users := f.a.Users()
	chans := f.a.Channels()
	if len(users) != 3 || users[0].Username != "luigi" || users[1].Username != "mario" || users[1].DisplayName != "Mario Rossi" {
		t.Errorf("Users() = %+v, want guild members", users)
	}
	if len(chans) != 2 || chans[0].Name != "general" || chans[1].Name != "random" {
		t.Errorf("Channels() = %+v", chans)
	}
}

func TestMessagesBecomeChannelMessages(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{})
	f.start()
	bot := fake.Bot()

	fake.Say(general, luigi, "just chatting in <#"+random+">")
	fake.Say(general, mario, "<@"+bot.ID+"> look at this, <@"+luigi.ID+">", discordtest.WithAttachment("../../report.txt", "text/plain", []byte("numbers")))
	fake.Say(dmChan, mario, "a private word")
	// Malformed events are skipped without harm.
	fake.DispatchRaw("MESSAGE_CREATE", json.RawMessage(`{"id":"1","channel_id":"`+general+`","content":"no author"}`))
	fake.DispatchRaw("MESSAGE_CREATE", json.RawMessage(`{"id":5,"author":"nobody"}`))
	fake.DispatchRaw("MESSAGE_CREATE", json.RawMessage(`"just a string"`))
	// A system message (someone joined) is not something someone said.
	fake.DispatchRaw("MESSAGE_CREATE", json.RawMessage(`{"id":"1573993548443811999","type":7,"channel_id":"`+general+`","guild_id":"`+fake.GuildID()+`","content":"","author":{"id":"`+luigi.ID+`","username":"luigi"}}`))
	fake.Say(general, luigi, "still alive")

	got := f.in.waitMsgs(t, 4)
	if len(got) != 4 {
		t.Fatalf("delivered %d messages, want 4: %+v", len(got), got)
	}
	chat0, mention, dm, last := got[0].msg, got[1].msg, got[2].msg, got[3].msg
	if chat0.IsMention || chat0.IsDM || chat0.Text != "just chatting in #random" || chat0.ChannelID != general {
		t.Errorf("plain message = %+v", chat0)
	}
	if !mention.IsMention || mention.Text != "@mother look at this, @luigi" || mention.RawText == "" || mention.Sender.Username != "mario" || mention.Sender.DisplayName != "Mario Rossi" {
		t.Errorf("mention = %+v", mention)
	}
	if len(mention.Attachments) != 1 {
		t.Fatalf("attachments = %+v", mention.Attachments)
	}
	att := mention.Attachments[0]
	if !strings.HasPrefix(att.LocalPath, "attachments/") || strings.Contains(att.LocalPath, "..") || att.Size != 7 {
		t.Errorf("attachment = %+v", att)
	}
	dir, _ := f.a.env.Files.ChannelDir(general)
	if b, err := os.ReadFile(filepath.Join(dir, att.LocalPath)); err != nil || string(b) != "numbers" {
		t.Errorf("attachment content = %q, %v", b, err)
	}
	if !dm.IsDM || !dm.IsMention || dm.ChannelID != dmChan {
		t.Errorf("DM = %+v", dm)
	}
	if last.Text != "still alive" {
		t.Errorf("after malformed events: %+v", last)
	}
	if !strings.Contains(f.logs.String(), "skipping malformed message event") {
		t.Errorf("malformed event not logged:\n%s", f.logs.String())
	}
	for _, d := range got {
		if d.late {
			t.Errorf("live message marked late: %+v", d.msg)
		}
	}
}

func TestAnswerRenderedWithThreadAndStopButton(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{MinEdit: 50 * time.Millisecond})
	f.start()
	trig := fake.Say(general, mario, "<@"+fake.Bot().ID+"> list the files")
	msg := f.in.waitMsgs(t, 1)[0].msg

	r := f.a.NewReply(t.Context(), general, &msg, chat.ReplyOptions{})
	r.Event(t.Context(), agent.Event{Type: agent.EventToolStart, ToolCallID: "1", ToolName: "bash", Label: "listing files", Args: json.RawMessage(`{"command":"ls"}`)})
	// The working message shows the tool and carries a stop button.
	var mainID string
	fake.Wait(t, 5*time.Second, "working message", func() bool {
		for _, m := range fake.MessagesLocked(general) {
			if m.Author.ID == fake.Bot().ID && strings.Contains(m.Content, "→ listing files") && m.HasButton(stopButtonID) {
				mainID = m.ID
				return true
			}
		}
		return false
	})
	fake.Click(general, mainID, mario, stopButtonID)
	f.in.wait(t, "stop", func() bool { return len(f.in.stops) == 1 })
	if s := f.in.stops[0]; s != [3]string{"discord", general, mario.ID} {
		t.Errorf("Stop(%v), want discord/%s by mario", s, general)
	}
	r.Event(t.Context(), agent.Event{Type: agent.EventToolEnd, ToolCallID: "1", ToolName: "bash", Label: "listing files", Args: json.RawMessage(`{"command":"ls"}`), Result: "a.txt\nb.txt", Duration: 1200 * time.Millisecond})
	r.Event(t.Context(), agent.Event{Type: agent.EventRunEnd, StopReason: agent.StopDone, Usage: model.Usage{InputTokens: 1500, OutputTokens: 20}})
	id, err := r.Finish(t.Context(), "There are **two** files, @mario:\n\n- `a.txt`\n- `b.txt`")
	if err != nil {
		t.Fatal(err)
	}
	if id != mainID {
		t.Errorf("Finish id = %s, want the main message %s", id, mainID)
	}
	var main discordtest.Message
	for _, m := range fake.Messages(general) {
		if m.ID == mainID {
			main = m
		}
	}
	// The model's @mario is its words: shown, pinging nobody.
	want := "There are **two** files, @mario:\n\n- `a.txt`\n- `b.txt`"
	if parse, users := allowedOf(t, main); len(parse) != 0 || len(users) != 0 {
		t.Errorf("answer allowed_mentions = %s, want none", main.AllowedMentions)
	}
	if main.Content != want || main.ReplyTo != trig.ID || main.HasButton(stopButtonID) {
		t.Errorf("main message = %q (reply to %s, button %v), want %q replying to %s without button", main.Content, main.ReplyTo, main.HasButton(stopButtonID), want, trig.ID)
	}
	th, ok := fake.Channel(mainID)
	if !ok || th.ParentID != general || !strings.HasPrefix(th.Name, "Details: @mother list the files") {
		t.Fatalf("detail thread = %+v, %v", th, ok)
	}
	details := fake.Messages(mainID)
	if len(details) != 2 || !strings.Contains(details[0].Content, "**bash** · listing files · 1.2s") || !strings.Contains(details[0].Content, "a.txt\nb.txt") || !strings.Contains(details[0].Content, `{"command":"ls"}`) {
		t.Errorf("thread = %+v", details)
	}
	if !strings.Contains(details[len(details)-1].Content, "1,500 tokens in, 20 out") {
		t.Errorf("usage missing from thread: %+v", details)
	}
	// A reply in Mother's thread addresses her and maps to the channel.
	fake.Say(mainID, luigi, "why two?")
	d := f.in.waitMsgs(t, 2)[1].msg
	if !d.IsMention || d.ChannelID != general || d.Metadata["threadId"] != mainID {
		t.Errorf("thread reply = %+v", d)
	}
	// Answering it goes into the thread, without a nested thread.
	r2 := f.a.NewReply(t.Context(), general, &d, chat.ReplyOptions{})
	r2.Event(t.Context(), agent.Event{Type: agent.EventToolStart, ToolCallID: "2", ToolName: "bash", Label: "counting"})
	r2.Event(t.Context(), agent.Event{Type: agent.EventToolEnd, ToolCallID: "2", ToolName: "bash", Label: "counting", Result: "2"})
	if _, err := r2.Finish(t.Context(), "Because there are two."); err != nil {
		t.Fatal(err)
	}
	ms := fake.Messages(mainID)
	if last := ms[len(ms)-1]; last.Content != "Because there are two." || last.ReplyTo != d.ID {
		t.Errorf("thread answer = %+v", last)
	}
}

func TestLongAnswerSplitKeepsCodeBlocks(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{MinEdit: 10 * time.Millisecond})
	f.start()
	var code strings.Builder
	for i := range 150 {
		fmt.Fprintf(&code, "fmt.Println(%d) // a line of code to make this long\n", i)
	}
	answer := "Here is the program:\n\n```go\n" + code.String() + "```\n\nThat is all."
	r := f.a.NewReply(t.Context(), general, nil, chat.ReplyOptions{})
	if _, err := r.Finish(t.Context(), answer); err != nil {
		t.Fatal(err)
	}
	ms := fake.Messages(general)
	if len(ms) < 4 {
		t.Fatalf("%d messages, want the answer in several", len(ms))
	}
	var all strings.Builder
	for _, m := range ms {
		if render.Len(m.Content) > 2000 {
			t.Errorf("message of %d runes", render.Len(m.Content))
		}
		if n := strings.Count(m.Content, "```"); n%2 != 0 {
			t.Errorf("message leaves a code block open:\n%s", m.Content)
		}
		all.WriteString(m.Content + "\n")
	}
	for i := range 150 {
		if !strings.Contains(all.String(), fmt.Sprintf("fmt.Println(%d) //", i)) {
			t.Fatalf("line %d lost", i)
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
	for i := range 10 {
		for _, ch := range []string{general, random} {
			path := filepath.Join(dir, fmt.Sprintf("%s-%d.txt", ch, i))
			if err := os.WriteFile(path, []byte("for "+ch), 0o600); err != nil {
				t.Fatal(err)
			}
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
	for _, ch := range []string{general, random} {
		ms := fake.Messages(ch)
		if len(ms) != 10 {
			t.Errorf("channel %s got %d uploads, want 10", ch, len(ms))
		}
		for _, m := range ms {
			if len(m.Files) != 1 || !strings.HasPrefix(m.Files[0].Name, ch+"-") || string(m.Files[0].Data) != "for "+ch {
				t.Errorf("channel %s got %+v", ch, m.Files)
			}
		}
	}
	if err := f.a.Upload(t.Context(), general, dir, ""); err == nil {
		t.Errorf("uploading a directory did not fail")
	}
}

func TestReconnectsAfterDrop(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{BackoffMin: 50 * time.Millisecond})
	f.start()
	if st := f.a.Status(); st.State != chat.ConnConnected || st.Reconnects != 0 {
		t.Errorf("Status after start = %+v, want connected, 0 reconnects", st)
	}
	fake.Say(general, mario, "before")
	f.in.waitMsgs(t, 1)
	fake.DropConnections()
	fake.Wait(t, 10*time.Second, "a new gateway session", func() bool { return fake.ConnectedLocked() == 1 && fake.SessionsLocked() >= 2 })
	fake.Say(general, mario, "after")
	got := f.in.waitMsgs(t, 2)
	if got[1].msg.Text != "after" {
		t.Errorf("after reconnect got %+v", got[1].msg)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(f.logs.String(), "gateway connection was lost; reconnected") {
		if time.Now().After(deadline) {
			t.Fatalf("reconnect not logged:\n%s", f.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := f.a.Status(); st.State != chat.ConnConnected || st.Reconnects != 1 {
		t.Errorf("Status after a drop = %+v, want connected, 1 reconnect", st)
	}
	if err := f.a.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := f.a.Status(); st.State != chat.ConnDown || st.Reconnects != 1 {
		t.Errorf("Status after Stop = %+v, want down, 1 reconnect", st)
	}
}

func TestSilentGatewayIsDetected(t *testing.T) {
	t.Parallel()
	// Heartbeats every 200 ms; the adapter's own watchdog calls a gateway
	// dead after 700 ms without an acknowledgement (discordgo alone would
	// wait five intervals).
	fake := newFake(t, 200*time.Millisecond)
	f := newFixture(t, fake, Options{WatchdogInterval: 100 * time.Millisecond, StaleAfter: 700 * time.Millisecond, BackoffMin: 50 * time.Millisecond})
	f.start()
	fake.Say(general, mario, "before the silence")
	f.in.waitMsgs(t, 1)
	before := fake.Sessions()
	fake.SetSilent(true)
	fake.Say(general, mario, "lost in the void") // never delivered on the silent connection
	fake.Wait(t, 10*time.Second, "a new session after the silence", func() bool { return fake.SessionsLocked() > before })
	fake.SetSilent(false)
	// The reconnect's backfill fetches what the silent connection swallowed.
	got := f.in.waitMsgs(t, 2)
	if got[1].msg.Text != "lost in the void" || !got[1].late {
		t.Errorf("got %+v, want the swallowed message, late", got[1])
	}
	if !strings.Contains(f.logs.String(), "looks connected but has not acknowledged a heartbeat") {
		t.Errorf("silence not logged:\n%s", f.logs.String())
	}
}

func TestRateLimitedEditWaitsRetryAfter(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{MinEdit: 10 * time.Millisecond})
	f.start()
	r := f.a.NewReply(t.Context(), general, nil, chat.ReplyOptions{})
	r.Event(t.Context(), agent.Event{Type: agent.EventToolStart, ToolCallID: "1", ToolName: "bash", Label: "busy"})
	fake.Wait(t, 5*time.Second, "working message", func() bool { return len(fake.MessagesLocked(general)) == 1 })
	fake.RateLimit("PATCH", "/channels/"+general+"/messages/", 0.4, 1)
	if _, err := r.Finish(t.Context(), "final words"); err != nil {
		t.Fatal(err)
	}
	ms := fake.Messages(general)
	if len(ms) != 1 || ms[0].Content != "final words" {
		t.Fatalf("messages = %+v, want the working message replaced by the answer", ms)
	}
	var limited, retried time.Time
	for _, rq := range fake.Requests() {
		if rq.Method == "PATCH" && rq.Status == 429 {
			limited = rq.At
		} else if rq.Method == "PATCH" && !limited.IsZero() && rq.Status == 200 {
			retried = rq.At
		}
	}
	if limited.IsZero() || retried.IsZero() {
		t.Fatalf("no 429 then retry seen: %+v", fake.Requests())
	}
	if gap := retried.Sub(limited); gap < 400*time.Millisecond {
		t.Errorf("retried %v after the 429, before retry_after (400ms)", gap)
	}
	// Mother's path waited, not discordgo's own retry.
	if !strings.Contains(f.logs.String(), "rate limited; waiting") || !strings.Contains(f.logs.String(), "retry_after=400ms") {
		t.Errorf("the 429 did not reach runview's rate-limit path:\n%s", f.logs.String())
	}
}

// TestRateLimitedPostReachesMothersPath: a notice answered 429 comes back
// from discordgo as a RateLimitError, which the adapter maps to runview's
// and waits out itself, then posts.
func TestRateLimitedPostReachesMothersPath(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{})
	f.start()
	fake.RateLimit("POST", "/channels/"+general+"/messages", 0.3, 1)
	if _, err := f.a.Post(t.Context(), general, "after the wait"); err != nil {
		t.Fatal(err)
	}
	if ms := fake.Messages(general); len(ms) != 1 || ms[0].Content != "after the wait" {
		t.Fatalf("messages = %+v, want the notice posted after the wait", ms)
	}
	if !strings.Contains(f.logs.String(), "rate limited by Discord; waiting") || !strings.Contains(f.logs.String(), "retry_after=300ms") {
		t.Errorf("the 429 did not reach the adapter's rate-limit path:\n%s", f.logs.String())
	}
}

func TestRateLimitedMapsToRunview(t *testing.T) {
	t.Parallel()
	err := rateLimited(fmt.Errorf("post message: %w", &discordgo.RateLimitError{RateLimit: &discordgo.RateLimit{TooManyRequests: &discordgo.TooManyRequests{RetryAfter: 1500 * time.Millisecond}, URL: "x"}}))
	var rl *runview.RateLimitError
	if !errors.As(err, &rl) || rl.After != 1500*time.Millisecond {
		t.Errorf("rateLimited = %v, want a runview.RateLimitError after 1.5s", err)
	}
	if other := errors.New("boom"); rateLimited(other) != other {
		t.Errorf("a non-429 error was changed")
	}
}

func TestBackfillAfterRestart(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{})
	// What the log knew before the restart.
	old := fake.Say(general, mario, "old news", discordtest.Offline())
	ch, _ := f.st.Channel("discord", general)
	if _, err := ch.AppendMessage(chat.ChannelMessage{ID: old.ID, ChannelID: general, Text: "old news"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.AppendMessage(chat.ChannelMessage{ID: "1734567890123456789.3", ChannelID: general, Text: "an id Mother made up"}); err != nil {
		t.Fatal(err)
	}
	// While Mother was down: chatter, a mention, and a mention she had
	// answered just before going down.
	bot := fake.Bot()
	fake.Say(general, luigi, "chatter", discordtest.Offline())
	q := fake.Say(general, mario, "<@"+bot.ID+"> are you there?", discordtest.Offline())
	answered := fake.Say(general, luigi, "<@"+bot.ID+"> quick one", discordtest.Offline())
	fake.Say(general, bot, "yes, quick", discordtest.Offline(), discordtest.ReplyingTo(answered.ID))
	f.start()
	got := f.in.waitMsgs(t, 3)
	if len(got) != 3 {
		t.Fatalf("backfill delivered %d, want 3: %+v", len(got), got)
	}
	if got[0].msg.Text != "chatter" || got[1].msg.ID != q.ID || !got[1].msg.IsMention || got[2].msg.ID != answered.ID || got[2].msg.IsMention {
		t.Errorf("backfill = %+v", got)
	}
	for _, d := range got {
		if !d.late {
			t.Errorf("backfilled message not late: %+v", d.msg)
		}
	}
}

func TestAPIURLWithPathPrefix(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"` + general + `","type":0,"name":"general"}`))
	}))
	defer srv.Close()
	a, err := New(chat.Env{Name: "d", Config: config.Adapter{Type: "discord", Settings: &Settings{BotToken: "t", APIURL: srv.URL + "/discord-proxy/"}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.s.Channel(general); err != nil {
		t.Fatal(err)
	}
	if len(paths) != 1 || paths[0] != "/discord-proxy/api/v9/channels/"+general {
		t.Errorf("requests went to %q, want /discord-proxy/api/v9/channels/%s", paths, general)
	}
	if _, err := New(chat.Env{Name: "d", Config: config.Adapter{Type: "discord", Settings: &Settings{BotToken: "t", APIURL: "ftp://x"}}}, Options{}); err == nil {
		t.Errorf("an ftp apiURL was accepted")
	}
}
