package telegram

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/telegram/telegramtest"
	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/render"
)

// inbox records what the adapter delivers.
type inbox struct {
	mu    sync.Mutex
	msgs  []chat.ChannelMessage
	late  []bool
	stops []string
	// refuse, while > 0, is how many more deliveries fail as Mother's do
	// when she cannot store a message.
	refuse int
}

func (i *inbox) Deliver(_ context.Context, _ string, m chat.ChannelMessage, late bool) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.refuse > 0 {
		i.refuse--
		return &chat.NotStoredError{Err: errors.New("no space left on device")}
	}
	i.msgs = append(i.msgs, m)
	i.late = append(i.late, late)
	return nil
}

func (i *inbox) Stop(_ context.Context, _, channelID, userID string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.stops = append(i.stops, channelID+"/"+userID)
}

func (i *inbox) byText(text string) (chat.ChannelMessage, bool, int) {
	i.mu.Lock()
	defer i.mu.Unlock()
	n, idx := 0, -1
	for k, m := range i.msgs {
		if strings.Contains(m.Text, text) {
			n++
			if idx < 0 {
				idx = k
			}
		}
	}
	if idx < 0 {
		return chat.ChannelMessage{}, false, 0
	}
	return i.msgs[idx], i.late[idx], n
}

func (i *inbox) wait(t *testing.T, text string) (chat.ChannelMessage, bool) {
	t.Helper()
	// 30 s: under make test's load (the race detector, the e2e suites'
	// chicks) a poll after a restart has taken more than 10.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m, late, n := i.byText(text); n > 0 {
			return m, late
		}
		time.Sleep(10 * time.Millisecond)
	}
	i.mu.Lock()
	got := slices.Clone(i.msgs)
	i.mu.Unlock()
	t.Fatalf("%q never delivered; got %+v", text, got)
	return chat.ChannelMessage{}, false
}

func start(t *testing.T, a *Adapter) *inbox {
	t.Helper()
	in := &inbox{}
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

func TestGroupAddressing(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	a := newAdapter(t, fake, "", nil)
	in := start(t, a)
	fake.Post(group.ID, mario.ID, "just chatting")
	fake.Post(group.ID, mario.ID, "hey @Mother_Bot, what time is it?")
	fake.Post(group.ID, mario.ID, "/ask@mother_bot what is 2+2")
	fake.Post(group.ID, mario.ID, "/ask@other_bot not for you")
	fake.Post(group.ID, mario.ID, "/stop")
	fake.Post(group.ID, mario.ID, "an email like x@mother_bot.example is no mention")
	replied := fake.Post(group.ID, telegramtest.Bot.ID, "an answer of Mother's")
	fake.Post(group.ID, luigi.ID, "a reply to her", telegramtest.ReplyTo(replied))
	fake.Post(group.ID, mario.ID, "in a topic @mother_bot", telegramtest.InTopic(45))
	in.wait(t, "in a topic")
	cases := []struct {
		text    string
		mention bool
		channel string
	}{
		{"just chatting", false, "-1001234567890"},
		{"what time is it", true, "-1001234567890"},
		{"what is 2+2", true, "-1001234567890"},
		{"not for you", false, "-1001234567890"},
		{"stop", true, "-1001234567890"},
		{"an email like", false, "-1001234567890"},
		{"a reply to her", true, "-1001234567890"},
		{"in a topic", true, "-1001234567890_45"},
	}
	for _, c := range cases {
		m, late, n := in.byText(c.text)
		if n != 1 || m.IsMention != c.mention || m.ChannelID != c.channel || m.IsDM || late {
			t.Errorf("%q: delivered %d times as %+v (late %v), want mention %v in %s", c.text, n, m, late, c.mention, c.channel)
		}
		if err := chat.ValidID(m.ChannelID); err != nil {
			t.Errorf("channel id %q: %v", m.ChannelID, err)
		}
	}
	if m, _, _ := in.byText("what is 2+2"); m.RawText != "/ask@mother_bot what is 2+2" {
		t.Errorf("/ask raw text = %q", m.RawText)
	}
	if _, _, n := in.byText("an answer of Mother's"); n != 0 {
		t.Errorf("Mother's own message was delivered")
	}
	if m, _, _ := in.byText("a reply to her"); m.ReplyTo != strconv.Itoa(replied) || m.Sender.Username != "luigi" {
		t.Errorf("reply delivered as %+v", m)
	}
	chans := a.Channels()
	if len(chans) != 2 {
		t.Errorf("channels = %+v, want the group and its topic", chans)
	}
}

func TestRestartNeitherLosesNorRepeats(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	dir := t.TempDir()
	a := newAdapter(t, fake, dir, nil)
	in := start(t, a)
	fake.Post(group.ID, mario.ID, "first @mother_bot")
	fake.Post(dmChat.ID, mario.ID, "second")
	in.wait(t, "second")
	if err := a.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	// As if the bot had died before its next poll: Telegram offers the
	// delivered updates again, and only the offset file tells the next
	// run they were delivered.
	fake.Unconfirm(0)
	fake.Post(group.ID, luigi.ID, "while away @mother_bot")
	if matches, _ := filepath.Glob(filepath.Join(dir, "*", "channels", "telegram", offsetFile)); len(matches) != 1 {
		t.Fatalf("offset file not found under %s", dir)
	}
	b := newAdapter(t, fake, dir, nil)
	in2 := start(t, b)
	m, late := in2.wait(t, "while away")
	if !late || !m.IsMention {
		t.Errorf("the message sent while away: %+v late %v, want a late mention", m, late)
	}
	fake.Post(group.ID, mario.ID, "live again")
	in2.wait(t, "live again")
	for _, text := range []string{"first", "second"} {
		if _, _, n := in2.byText(text); n != 0 {
			t.Errorf("%q delivered again after the restart", text)
		}
	}
	if _, late, _ := in2.byText("live again"); late {
		t.Errorf("a live message marked late")
	}
}

func TestMalformedUpdatesAreSkipped(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	a := newAdapter(t, fake, "", nil)
	in := start(t, a)
	id := fake.NextUpdateID()
	fake.PostRaw(fmt.Sprintf(`{"update_id": %d, "message": {"message_id": "not a number"}}`, id))
	fake.PostRaw(`{"no_update_id": true}`)
	fake.PostRaw(fmt.Sprintf(`{"update_id": %d, "message": {"message_id": 7, "chat": {"id": 0}}}`, id+2))
	fake.PostRaw(fmt.Sprintf(`{"update_id": %d, "message": {"message_id": 8, "chat": {"id": -1001234567890, "type": "supergroup"}}}`, id+3))
	fake.PostRaw(fmt.Sprintf(`{"update_id": %d, "callback_query": {"id": "", "data": "mother:stop"}}`, id+4))
	fake.Post(group.ID, mario.ID, "still here")
	in.wait(t, "still here")
	if st := a.Status(); st.State != chat.ConnConnected {
		t.Errorf("status %+v after malformed updates", st)
	}
	in.mu.Lock()
	n := len(in.msgs)
	in.mu.Unlock()
	if n != 1 {
		t.Errorf("%d deliveries, want only the good message", n)
	}
}

func TestPlainTextFallback(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	a := newAdapter(t, fake, "", nil)
	start(t, a)
	fake.RejectMarkdown(1)
	if _, err := a.Post(t.Context(), "-1001234567890", "Done. **All** good (mostly)!"); err != nil {
		t.Fatalf("Post: %v", err)
	}
	msgs := fake.BotMessages(group.ID, 0)
	if len(msgs) != 1 || msgs[0].Parse != "" || msgs[0].Text != "Done. *All* good (mostly)!" {
		t.Errorf("messages = %+v, want the notice once, as plain text", msgs)
	}
	// Without a rejection it goes as MarkdownV2 that Telegram accepts.
	if _, err := a.Post(t.Context(), "-1001234567890_45", "a [link](https://example.com/a_(b)) and `x`"); err != nil {
		t.Fatalf("Post: %v", err)
	}
	if msgs := fake.BotMessages(group.ID, 45); len(msgs) != 1 || msgs[0].Parse != "MarkdownV2" {
		t.Errorf("topic messages = %+v, want one MarkdownV2 message in topic 45", msgs)
	}
}

func TestReplyProgressStopAndTyping(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	a := newAdapter(t, fake, "", nil)
	in := start(t, a)
	fake.Post(group.ID, mario.ID, "@mother_bot work hard")
	trigger, _ := in.wait(t, "work hard")
	r := a.NewReply(t.Context(), trigger.ChannelID, &trigger, chat.ReplyOptions{})
	r.Event(t.Context(), agent.Event{Type: agent.EventToolStart, ToolCallID: "1", ToolName: "bash", Label: "ls"})
	var working telegramtest.Message
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if ms := fake.BotMessages(group.ID, 0); len(ms) > 0 && ms[0].Button {
			working = ms[0]
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !working.Button || working.ReplyTo == 0 {
		t.Fatalf("no working message with a Stop button answering the trigger: %+v", fake.BotMessages(group.ID, 0))
	}
	// The typing action goes out beside the message, not before it.
	for deadline := time.Now().Add(5 * time.Second); fake.ChatActions(group.ID) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if fake.ChatActions(group.ID) == 0 {
		t.Errorf("no typing action while working")
	}
	// The button's requester is noted once sendMessage has answered.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		a.mu.Lock()
		known := a.stoppers[stopKey(group.ID, working.ID)] != ""
		a.mu.Unlock()
		if known {
			break
		}
	}
	// Luigi may not stop Mario's run; an admin (777) and Mario may.
	cb1 := fake.Click(group.ID, working.ID, luigi.ID, stopData)
	cb2 := fake.Click(group.ID, working.ID, 777, stopData)
	cb3 := fake.Click(group.ID, working.ID, mario.ID, stopData)
	deadline = time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && len(fake.Answers()) < 3 {
		time.Sleep(10 * time.Millisecond)
	}
	answers := strings.Join(fake.Answers(), "\n")
	if !strings.Contains(answers, cb1+":Only whoever asked") || !strings.Contains(answers, cb2+":Stopping") || !strings.Contains(answers, cb3+":Stopping") {
		t.Errorf("callback answers = %q", answers)
	}
	// The stops go to Mother on goroutines of their own: wait for the two
	// the adapter answered "Stopping" to. Luigi's refusal was decided and
	// answered while handling his click, before the other two clicks were
	// handled (one polling loop, updates in order), and that path starts
	// no stop: a stray one would show among those seen by then.
	var stops []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && len(stops) < 2; time.Sleep(5 * time.Millisecond) {
		in.mu.Lock()
		stops = append([]string(nil), in.stops...)
		in.mu.Unlock()
	}
	slices.Sort(stops)
	want := []string{trigger.ChannelID + "/" + strconv.FormatInt(mario.ID, 10), trigger.ChannelID + "/777"}
	slices.Sort(want)
	if !slices.Equal(stops, want) {
		t.Errorf("stops = %v, want the admin's and the requester's %v", stops, want)
	}
	r.Event(t.Context(), agent.Event{Type: agent.EventToolEnd, ToolCallID: "1", ToolName: "bash", Label: "ls", Result: "a.txt\nb_c.txt"})
	if _, err := r.Finish(t.Context(), "All *done*."); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	msgs := fake.BotMessages(group.ID, 0)
	if msgs[0].Button || msgs[0].Shown() != "All _done_." {
		t.Errorf("final message = %+v, want the answer without a button", msgs[0])
	}
	detail := false
	for _, m := range msgs[1:] {
		if m.ReplyTo == msgs[0].ID && strings.Contains(m.Shown(), "b_c.txt") {
			detail = true
		}
	}
	if !detail {
		t.Errorf("no tool detail replying to the answer: %+v", msgs)
	}
}

func TestQuietHidesDetails(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	a := newAdapter(t, fake, "", nil)
	start(t, a)
	r := a.NewReply(t.Context(), "-1001234567890", nil, chat.ReplyOptions{Quiet: true})
	r.Event(t.Context(), agent.Event{Type: agent.EventToolStart, ToolCallID: "1", ToolName: "bash", Label: "ls"})
	r.Event(t.Context(), agent.Event{Type: agent.EventToolEnd, ToolCallID: "1", ToolName: "bash", Label: "ls", Result: "secret-output"})
	if _, err := r.Finish(t.Context(), "ok"); err != nil {
		t.Fatal(err)
	}
	for _, m := range fake.BotMessages(group.ID, 0) {
		if strings.Contains(m.Text, "secret-output") {
			t.Errorf("quiet reply shows tool output: %+v", m)
		}
	}
}

func TestFilesInAndOut(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	a := newAdapter(t, fake, "", nil)
	in := start(t, a)
	fake.Post(dmChat.ID, mario.ID, "a picture", telegramtest.WithPhoto([]byte("\xff\xd8jpeg")))
	fake.Post(dmChat.ID, mario.ID, "a huge file", telegramtest.WithDocument("big.iso", []byte("x")), telegramtest.ClaimedSize(30<<20))
	m, _ := in.wait(t, "a picture")
	if len(m.Attachments) != 1 || !strings.HasPrefix(m.Attachments[0].Filename, "photo-") || m.Attachments[0].Size != 6 {
		t.Errorf("photo attachment = %+v", m.Attachments)
	}
	big, _ := in.wait(t, "a huge file")
	if len(big.Attachments) != 0 || !strings.Contains(big.Text, "big.iso not downloaded") || !strings.Contains(big.Text, "limit") {
		t.Errorf("over-limit file: %+v", big)
	}
	dir := t.TempDir()
	png := filepath.Join(dir, "chart.png")
	os.WriteFile(png, []byte("png"), 0o600)
	txt := filepath.Join(dir, "notes.txt")
	os.WriteFile(txt, []byte("notes"), 0o600)
	if err := a.Upload(t.Context(), "555", png, "the chart"); err != nil {
		t.Fatal(err)
	}
	fake.RateLimit("sendDocument", 1)
	if err := a.Upload(t.Context(), "555", txt, ""); err != nil {
		t.Fatal(err)
	}
	ups := fake.Uploads()
	if len(ups) != 2 || ups[0].Method != "sendPhoto" || ups[0].Caption != "the chart" || ups[1].Method != "sendDocument" || string(ups[1].Data) != "notes" {
		t.Errorf("uploads = %+v", ups)
	}
}

func TestWebhook(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	a := newAdapter(t, fake, "", func(s *Settings, _ *config.Adapter) {
		s.WebhookURL = "http://" + addr + "/hook"
		s.WebhookListen = addr
		s.WebhookSecret = "s3cret_token"
	})
	in := start(t, a)
	if url, secret := fake.Webhook(); url != "http://"+addr+"/hook" || secret != "s3cret_token" {
		t.Errorf("webhook registered as %q %q", url, secret)
	}
	resp, err := http.Post("http://"+addr+"/hook", "application/json", strings.NewReader(`{"update_id": 1, "message": {"message_id": 1, "date": 1, "chat": {"id": 555, "type": "private"}, "from": {"id": 555}, "text": "forged"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("request without the secret: HTTP %d, want 403", resp.StatusCode)
	}
	fake.Post(dmChat.ID, mario.ID, "through the hook")
	m, _ := in.wait(t, "through the hook")
	if !m.IsDM || !m.IsMention {
		t.Errorf("webhook DM delivered as %+v", m)
	}
	if _, _, n := in.byText("forged"); n != 0 {
		t.Errorf("a forged update was delivered")
	}
}

// TestWebhookNotStored: an update Mother could not store is answered 503,
// so Telegram sends it again; it is delivered once she takes it.
func TestWebhookNotStored(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	a := newAdapter(t, fake, "", func(s *Settings, _ *config.Adapter) {
		s.WebhookURL = "http://" + addr + "/hook"
		s.WebhookListen = addr
		s.WebhookSecret = "s3cret_token"
	})
	in := start(t, a)
	in.mu.Lock()
	in.refuse = 3
	in.mu.Unlock()
	id := fake.NextUpdateID()
	fake.Post(dmChat.ID, mario.ID, "while the disk is full")
	in.wait(t, "while the disk is full")
	if _, _, n := in.byText("while the disk is full"); n != 1 {
		t.Errorf("delivered %d times, want once", n)
	}
	for deadline := time.Now().Add(5 * time.Second); fake.Confirmed() < id && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	in.mu.Lock()
	refused := 3 - in.refuse
	in.mu.Unlock()
	if refused != 3 || fake.Confirmed() < id {
		t.Errorf("refused %d times, confirmed up to %d; want 3 refusals and update %d confirmed in the end", refused, fake.Confirmed(), id)
	}
}

func TestGetUpdatesRateLimitAndErrors(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	a := newAdapter(t, fake, "", nil)
	in := start(t, a)
	fake.RateLimit("getUpdates", 1)
	fake.Post(group.ID, mario.ID, "after the limit")
	in.wait(t, "after the limit")
	// A refused send is reported, not fatal.
	if _, err := a.Post(t.Context(), "-42", "to a chat that does not exist"); err == nil {
		t.Errorf("Post to an unknown chat succeeded")
	}
	fake.Post(group.ID, mario.ID, "still polling")
	in.wait(t, "still polling")
}

func TestNewRequiresToken(t *testing.T) {
	if _, err := New(chat.Env{Name: "tg", Config: config.Adapter{Type: "telegram", Settings: &Settings{}}}, Options{}); err == nil {
		t.Fatal("New without a token succeeded")
	}
}

func TestSettingsValidate(t *testing.T) {
	cases := []struct {
		s    Settings
		want []string
	}{
		{Settings{BotToken: "123:abc"}, nil},
		{Settings{}, []string{"botToken"}},
		{Settings{BotToken: "nocolon"}, []string{"botToken"}},
		{Settings{BotToken: "123:abc", APIURL: "ftp://x"}, []string{"apiURL"}},
		{Settings{BotToken: "123:abc", WebhookListen: ":8443"}, []string{"webhookListen"}},
		{Settings{BotToken: "123:abc", WebhookURL: "https://x.example/hook"}, []string{"webhookListen", "webhookSecret"}},
		{Settings{BotToken: "123:abc", WebhookURL: "https://x.example/hook", WebhookListen: "127.0.0.1:8443", WebhookSecret: "bad secret!"}, []string{"webhookSecret"}},
		{Settings{BotToken: "123:abc", WebhookURL: "https://x.example/hook", WebhookListen: "127.0.0.1:8443", WebhookSecret: "ok_secret-1"}, nil},
	}
	for _, c := range cases {
		var got []string
		c.s.Validate(func(field, format string, args ...any) { got = append(got, field) })
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%+v: problems in %v, want %v", c.s, got, c.want)
		}
	}
}

func TestRedactsToken(t *testing.T) {
	fake := newFake(t)
	a := newAdapter(t, fake, "", nil)
	err := errors.New("Post \"http://x/bot" + telegramtest.BotToken + "/getUpdates\": refused")
	if strings.Contains(a.redact(err), telegramtest.BotToken) {
		t.Errorf("token not redacted: %s", a.redact(err))
	}
}

// TestRenderedMarkdownParses: what the render package makes of every
// golden input is MarkdownV2 the fake (checking like Telegram) accepts.
func TestRenderedMarkdownParses(t *testing.T) {
	files, err := filepath.Glob("../../render/testdata/*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := telegramtest.CheckMarkdownV2(render.ToTelegram(string(src), []chat.Mention{{ID: "555", Username: "mario"}, {ID: "666", Username: "mario.rossi"}})); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestPacer: sends to a group wait for their turn once the window is
// full (private chats are not paced); edits are paced in every chat, one
// per window. Time is a fake clock: a blocked wait returns only when the
// clock moves.
func TestPacer(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Unix(1_700_000_000, 0))
	blocks := func(t *testing.T, p *pacer, chat int64, window time.Duration) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- p.wait(t.Context(), chat) }()
		for c.Pending() == 0 {
			select {
			case err := <-done:
				t.Fatalf("wait(%d) over the limit returned %v at once, want it to wait for the window", chat, err)
			default:
				runtime.Gosched()
			}
		}
		c.Advance(window)
		if err := <-done; err != nil {
			t.Fatalf("wait(%d) after the window = %v", chat, err)
		}
	}
	groups := &pacer{rate: 3, window: 300 * time.Millisecond, clock: c, sent: map[int64][]time.Time{}}
	for range 3 {
		if err := groups.wait(t.Context(), group.ID); err != nil {
			t.Fatal(err)
		}
	}
	if c.Pending() != 0 {
		t.Fatalf("the first 3 sends waited")
	}
	blocks(t, groups, group.ID, 300*time.Millisecond)
	for range 10 {
		if err := groups.wait(t.Context(), dmChat.ID); err != nil {
			t.Fatal(err)
		}
	}
	if c.Pending() != 0 {
		t.Errorf("private chats were paced for sends")
	}
	for range 2 { // the window holds 3 again
		if err := groups.wait(t.Context(), group.ID); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := groups.wait(ctx, group.ID); err == nil {
		t.Errorf("a cancelled wait over the limit returned nil")
	}

	edits := &pacer{rate: 1, window: time.Second, clock: c, private: true, sent: map[int64][]time.Time{}}
	for _, chat := range []int64{dmChat.ID, group.ID} {
		if err := edits.wait(t.Context(), chat); err != nil {
			t.Fatal(err)
		}
		blocks(t, edits, chat, time.Second)
	}
}
