package mother

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
)

func TestTriggers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.say("C1", "just chatting among humans", false)
	h.say("C1", "a bot talking", false, func(m *chat.ChannelMessage) {
		m.Sender = chat.Sender{ID: "UBOT", Username: "ci", IsBot: true}
		m.IsMention = true
	})
	h.say("C1", "my own words", false, func(m *chat.ChannelMessage) { m.Sender = chat.Sender{ID: "UMOTHER", Username: "mother", IsBot: true} })
	h.say("C1", "someone else's thread", false, inThreadOf("UANNA"))
	h.idle()
	if n := len(h.fake.Requests()); n != 0 {
		t.Fatalf("%d model calls for messages not addressed to Mother, want 0", n)
	}
	if n := len(h.logged("C1")); n != 4 {
		t.Errorf("log.jsonl has %d messages, want all 4 logged", n)
	}

	h.say("C1", "hello via mention", false, mention)
	h.idle()
	h.say("D1", "hello via dm", false, dm)
	h.idle()
	h.say("C1", "hello in her thread", false, inThreadOf("UMOTHER"))
	h.idle()
	got := texts(h.ad.of("finish"))
	want := []string{"answer to: hello via mention", "answer to: hello via dm", "answer to: hello in her thread"}
	if !slices.Equal(got, want) {
		t.Fatalf("replies = %q, want %q", got, want)
	}
	// The unanswered channel messages reached the model's context with the
	// first mention's run.
	reqs := h.fake.Requests()
	var ctxText []string
	for _, m := range reqs[0].Messages {
		ctxText = append(ctxText, m.Content)
	}
	joined := strings.Join(ctxText, "\n")
	if !strings.Contains(joined, "just chatting among humans") || !strings.Contains(joined, "someone else's thread") {
		t.Errorf("first run's context lacks the logged channel messages:\n%s", joined)
	}
	if strings.Contains(joined, "my own words") && !strings.Contains(joined, "assistant") {
		t.Errorf("Mother's own message came back as a user message")
	}
}

func TestAddressed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		msg  chat.ChannelMessage
		want bool
	}{
		{"plain", chat.ChannelMessage{}, false},
		{"mention", chat.ChannelMessage{IsMention: true}, true},
		{"dm", chat.ChannelMessage{IsDM: true}, true},
		{"her thread", chat.ChannelMessage{Metadata: map[string]any{chat.MetaThreadStarter: "ME"}}, true},
		{"other thread", chat.ChannelMessage{Metadata: map[string]any{chat.MetaThreadStarter: "YOU"}}, false},
		{"odd metadata", chat.ChannelMessage{Metadata: map[string]any{chat.MetaThreadStarter: 42}}, false},
	}
	for _, c := range cases {
		if got := Addressed("ME", c.msg); got != c.want {
			t.Errorf("Addressed(%s) = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestParseStop(t *testing.T) {
	t.Parallel()
	cases := []struct {
		text    string
		all, ok bool
	}{
		{"stop", false, true},
		{"STOP", false, true},
		{"  Stop!  ", false, true},
		{"@mother stop", false, true},
		{"<@U123> stop.", false, true},
		{"@mother: Stop", false, true},
		{"stop all", true, true},
		{"@mother STOP ALL", true, true},
		{"stop everything!", true, true},
		{"please stop", false, false},
		{"stop the music", false, false},
		{"stopping", false, false},
		{"", false, false},
	}
	for _, c := range cases {
		all, ok := ParseStop(c.text)
		if all != c.all || ok != c.ok {
			t.Errorf("ParseStop(%q) = %v, %v; want %v, %v", c.text, all, ok, c.all, c.ok)
		}
	}
}

func TestQueueFullTellsUserAndLosesNothing(t *testing.T) {
	t.Parallel()
	block := newBlockTool()
	h := newHarness(t, withTools(block))
	h.say("C1", "please block", false, mention)
	block.waitStarted(t)
	for i := 1; i <= 5; i++ {
		h.say("C1", fmt.Sprintf("queued %d", i), false, mention)
	}
	if posts := h.ad.of("post"); len(posts) != 0 {
		t.Fatalf("notices with a queue of 5: %q", texts(posts))
	}
	h.say("C1", "one too many", false, mention)
	posts := h.ad.of("post")
	if len(posts) != 1 || !strings.Contains(posts[0].Text, "5 messages are already waiting") || !strings.Contains(posts[0].Text, "logged") {
		t.Fatalf("notices = %q, want one busy notice saying the message is logged", texts(posts))
	}
	block.release <- struct{}{}
	h.idle()
	got := texts(h.ad.of("finish"))
	want := []string{"tool said: released", "answer to: queued 1", "answer to: queued 2", "answer to: queued 3", "answer to: queued 4", "answer to: queued 5"}
	if !slices.Equal(got, want) {
		t.Fatalf("replies = %q\nwant %q", got, want)
	}
	// The overflowing message is not lost: the next run reads it.
	h.say("C1", "anything else?", false, mention)
	h.idle()
	reqs := h.fake.Requests()
	last := reqs[len(reqs)-1]
	var all []string
	for _, m := range last.Messages {
		all = append(all, m.Content)
	}
	if !strings.Contains(strings.Join(all, "\n"), "one too many") {
		t.Error("the message that did not fit the queue never reached the model")
	}
}

func TestStopDuringTool(t *testing.T) {
	t.Parallel()
	block := newBlockTool()
	h := newHarness(t, withTools(block))
	h.say("C1", "stop", false, mention)
	if p := h.ad.of("post"); len(p) != 1 || p[0].Text != NoticeNothingRun {
		t.Fatalf("stop with nothing running: posts %q", texts(p))
	}
	h.say("C1", "please block", false, mention)
	block.waitStarted(t)
	h.say("C1", "then this", false, mention) // queued behind the run
	before := len(h.fake.Requests())
	h.say("C1", "@mother STOP", false, mention)
	waitFor(t, "the stopped run's reply", func() bool { return len(h.ad.of("finish")) >= 1 })
	h.idle()
	if block.aborted.Load() != 1 {
		t.Errorf("the tool's context was not cancelled")
	}
	var seq []string
	for _, r := range h.ad.all() {
		if r.Kind != "tool" && r.Kind != "detail" {
			seq = append(seq, r.Kind+":"+r.Text)
		}
	}
	want := []string{"post:" + NoticeNothingRun, "post:" + NoticeStopping, "finish:" + NoticeStopped, "finish:answer to: then this"}
	if !slices.Equal(seq, want) {
		t.Fatalf("rendered %q\nwant %q", seq, want)
	}
	// "stop" was not queued as a message: the only model call after it is
	// the queued message's.
	if n := len(h.fake.Requests()) - before; n != 1 {
		t.Errorf("%d model calls after stop, want 1 (the queued message)", n)
	}
}

func TestBareStopOnlyWhileRunning(t *testing.T) {
	t.Parallel()
	block := newBlockTool()
	h := newHarness(t, withTools(block))
	h.say("C1", "stop", false) // humans talking; nothing running: ignored
	if p := h.ad.of("post"); len(p) != 0 {
		t.Fatalf("bare stop while idle got %q", texts(p))
	}
	h.say("C1", "please block", false, mention)
	block.waitStarted(t)
	h.say("C1", "Stop", false) // no mention, but she is working here
	h.idle()
	if got := texts(h.ad.of("finish")); !slices.Equal(got, []string{NoticeStopped}) {
		t.Errorf("replies = %q, want Stopped.", got)
	}
}

// bgTool starts a background task that lives until cancelled, like a
// chick, on behalf of the run's user.
type bgTool struct {
	tasks   *Tasks
	causes  chan error
	started chan struct{}
}

func (s *bgTool) Spec() model.ToolSpec { return specOf("spawn") }

func (s *bgTool) Run(ctx context.Context, _ json.RawMessage) (agent.Result, error) {
	info, _ := chat.RunInfoFrom(ctx)
	s.tasks.Go(context.Background(), info.QualifiedChannel(), info.UserID, func(ctx context.Context) {
		s.started <- struct{}{}
		<-ctx.Done()
		s.causes <- context.Cause(ctx)
	})
	<-s.started
	return agent.Result{Text: "chick started"}, nil
}

func TestStopAllCancelsChicks(t *testing.T) {
	t.Parallel()
	tasks := &Tasks{}
	spawn := &bgTool{tasks: tasks, causes: make(chan error, 10), started: make(chan struct{}, 10)}
	block := newBlockTool()
	h := newHarness(t, withTools(spawn, block), withChicks(tasks))
	h.say("C1", "please spawn", false, mention, from("UMARIO", "mario"))
	h.say("C1", "please spawn", false, mention, from("UANNA", "anna"))
	h.say("C2", "please spawn", false, mention, from("UANNA", "anna"))
	h.idle()
	if n := tasks.Running("rec/C1", ""); n != 2 {
		t.Fatalf("%d chicks in C1, want 2", n)
	}
	// Stopping Mother's run leaves the chicks alone.
	h.say("C1", "please block", false, mention)
	block.waitStarted(t)
	h.say("C1", "stop", false, mention)
	h.idle()
	if n := tasks.Running("rec/C1", ""); n != 2 {
		t.Fatalf("plain stop: %d chicks left in C1, want 2", n)
	}
	// A user's "stop all" cancels their own chicks only.
	h.say("C1", "stop all", false, mention, from("UMARIO", "mario"))
	if err := <-spawn.causes; !errors.Is(err, ErrCancelledByStop) {
		t.Errorf("chick ended with %v, want ErrCancelledByStop", err)
	}
	if tasks.Running("rec/C1", "UMARIO") != 0 || tasks.Running("rec/C1", "UANNA") != 1 {
		t.Errorf("after mario's stop all: mario %d, anna %d chicks; want 0 and 1", tasks.Running("rec/C1", "UMARIO"), tasks.Running("rec/C1", "UANNA"))
	}
	// An admin's cancels every chick of the channel, not other channels'.
	h.say("C1", "@mother stop all", false, mention, from("UADMIN", "boss"))
	<-spawn.causes
	if tasks.Running("rec/C1", "") != 0 || tasks.Running("rec/C2", "") != 1 {
		t.Errorf("after admin's stop all: C1 %d, C2 %d chicks; want 0 and 1", tasks.Running("rec/C1", ""), tasks.Running("rec/C2", ""))
	}
	h.say("C1", "stop all", false, mention, from("UMARIO", "mario"))
	posts := texts(h.ad.of("post"))
	want := []string{
		NoticeStopping,
		NoticeNothingRun + " Cancelled 1 of your chick(s); an admin can cancel the others.",
		NoticeNothingRun + " Cancelled 1 chick(s).",
		NoticeNothingRun + " You have no chicks running here.",
	}
	if !slices.Equal(posts, want) {
		t.Errorf("notices = %q\nwant %q", posts, want)
	}
	tasks.CancelChicks(context.Background(), "rec/C2", "")
	tasks.Wait()
}

func TestDMPolicies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		policy  config.DMPolicy
		user    string
		allowed bool
	}{
		{"everyone", config.DMPolicy{Everyone: true}, "UANY", true},
		{"none refuses", config.DMPolicy{}, "UANY", false},
		{"none still lets admins in", config.DMPolicy{}, "UADMIN", true},
		{"list allows listed", config.DMPolicy{Users: []string{"UFRIEND"}}, "UFRIEND", true},
		{"list refuses others", config.DMPolicy{Users: []string{"UFRIEND"}}, "USTRANGER", false},
		{"list still lets admins in", config.DMPolicy{Users: []string{"UFRIEND"}}, "UADMIN", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, withAdapterConfig(config.Adapter{Type: "slack", Admins: []string{"UADMIN"}, DM: c.policy}))
			h.say("D1", "hi there", false, dm, from(c.user, "someone"))
			h.idle()
			reqs, posts, replies := len(h.fake.Requests()), texts(h.ad.of("post")), texts(h.ad.of("finish"))
			if c.allowed {
				if reqs != 1 || len(replies) != 1 || len(posts) != 0 {
					t.Fatalf("allowed DM: %d model calls, replies %q, posts %q", reqs, replies, posts)
				}
				return
			}
			if reqs != 0 || len(replies) != 0 || !slices.Equal(posts, []string{DMRefusal}) {
				t.Fatalf("refused DM: %d model calls (want 0), replies %q, posts %q (want one refusal)", reqs, replies, posts)
			}
			logged := h.logged("D1")
			if len(logged) != 2 || logged[0].Text != "hi there" || logged[1].Text != DMRefusal || !logged[1].Sender.IsBot {
				t.Errorf("log.jsonl = %+v, want the DM and the refusal", logged)
			}
			if !strings.Contains(h.log(), "direct message refused by access control") || strings.Contains(h.log(), "hi there") {
				t.Errorf("Mother's log should record the refusal without the message body:\n%s", h.log())
			}
		})
	}
}

func TestTerminalAdapterIsNotRestricted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withAdapterConfig(config.Adapter{Type: "cli", DM: config.DMPolicy{}}))
	h.say("local", "hi", false, dm, from("local-user", "me"))
	h.idle()
	if got := texts(h.ad.of("finish")); len(got) != 1 {
		t.Errorf("terminal DM answered %q, want one answer", got)
	}
}

func TestLateMessages(t *testing.T) {
	t.Parallel()
	block := newBlockTool()
	h := newHarness(t, withTools(block))
	h.say("C1", "what happened overnight?", true, mention)
	h.say("C1", "be silent", true, mention)
	h.idle()
	got := texts(h.ad.of("finish"))
	if len(got) != 2 || !strings.HasPrefix(got[0], "(Late answer: your message arrived while I was offline.)\n\nanswer to: what happened") {
		t.Fatalf("late replies = %q", got)
	}
	if got[1] != "" {
		t.Errorf("late [SILENT] answer rendered %q, want nothing (the marker is checked before the late header)", got[1])
	}
	for _, m := range h.logged("C1") {
		if strings.Contains(m.Text, SilentMarker) {
			t.Errorf("silent answer logged: %q", m.Text)
		}
	}

	// A backlog of late messages larger than the queue is folded into the
	// last queued late message rather than refused.
	h.say("C1", "please block", false, mention)
	block.waitStarted(t)
	for i := 1; i <= 7; i++ {
		h.say("C1", fmt.Sprintf("late %d", i), true, mention)
	}
	if p := h.ad.of("post"); len(p) != 0 {
		t.Fatalf("late backlog produced notices %q", texts(p))
	}
	block.release <- struct{}{}
	h.idle()
	replies := texts(h.ad.of("finish"))
	if len(replies) != 3+5 {
		t.Fatalf("%d replies, want 8 (3 before, 5 for the backlog): %q", len(replies), replies)
	}
	reqs := h.fake.Requests()
	last := reqs[len(reqs)-1]
	if u := last.LastUser(); !strings.Contains(u, "late 7") {
		t.Errorf("last run's last user message = %q, want late 7 (folded in)", u)
	}
	if !strings.Contains(h.log(), "folded into an earlier queued late message") {
		t.Error("folding not logged")
	}
}

func TestMemoryTool(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws := t.TempDir()
	tool := MemoryTool(ws)
	ctx := chat.WithRunInfo(t.Context(), chat.RunInfo{Adapter: "rec", ChannelID: "C1", ChannelDir: dir})
	run := func(ctx context.Context, args string) (string, error) {
		r, err := tool.Run(ctx, json.RawMessage(args))
		return r.Text, err
	}
	if out, err := run(ctx, `{"scope":"channel","mode":"append","content":"Mario likes tea."}`); err != nil || !strings.Contains(out, "17 of 1000") {
		t.Fatalf("append: %q, %v", out, err)
	}
	if _, err := run(ctx, `{"scope":"channel","mode":"append","content":"Anna likes coffee."}`); err != nil {
		t.Fatal(err)
	}
	if b := readFile(t, dir+"/MEMORY.md"); b != "Mario likes tea.\nAnna likes coffee.\n" {
		t.Errorf("channel MEMORY.md = %q", b)
	}
	long := strings.Repeat("x", 990)
	_, err := run(ctx, `{"scope":"channel","mode":"append","content":"`+long+`"}`)
	if err == nil || !strings.Contains(err.Error(), "over its budget of 1000") || !strings.Contains(err.Error(), "Nothing was written") {
		t.Fatalf("over-budget append: %v", err)
	}
	if b := readFile(t, dir+"/MEMORY.md"); b != "Mario likes tea.\nAnna likes coffee.\n" {
		t.Errorf("refused write changed the file: %q", b)
	}
	if _, err := run(ctx, `{"scope":"channel","mode":"replace","content":"`+long+`"}`); err != nil {
		t.Errorf("replace within budget: %v", err)
	}
	if _, err := run(ctx, `{"scope":"workspace","mode":"replace","content":"`+strings.Repeat("y", 1501)+`"}`); err == nil || !strings.Contains(err.Error(), "budget of 1500") {
		t.Errorf("workspace over budget: %v", err)
	}
	if _, err := run(t.Context(), `{"scope":"workspace","mode":"replace","content":"Team: Mario, Anna."}`); err != nil {
		t.Errorf("workspace replace: %v", err)
	}
	if b := readFile(t, ws+"/MEMORY.md"); b != "Team: Mario, Anna.\n" {
		t.Errorf("workspace MEMORY.md = %q", b)
	}
	if _, err := run(t.Context(), `{"scope":"channel","mode":"append","content":"x"}`); err == nil {
		t.Error("channel scope without a run's channel: no error")
	}
	if _, err := run(ctx, `{"scope":"galaxy","mode":"append","content":"x"}`); err == nil {
		t.Error("bad scope accepted")
	}
	entries, _ := readDirNames(dir)
	for _, e := range entries {
		if strings.Contains(e, ".tmp") {
			t.Errorf("temp file left behind: %s", e)
		}
	}
}
