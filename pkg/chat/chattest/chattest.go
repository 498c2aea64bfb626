// Package chattest is the conformance suite every chat adapter passes:
// Run drives an adapter through its platform's wire-level fake (or, for the
// terminal, its real pipes) and checks what Mother relies on, whatever the
// platform.
//
// An adapter that lacks a capability (the terminal has no incoming files,
// no edits, no connection to lose) declares it in Harness.Lacks with the
// reason; the check is then skipped with that reason in the test output.
// A capability neither declared lacking nor backed by the Platform's
// optional method fails: nothing passes silently.
package chattest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
)

// Capability is one thing the suite checks.
type Capability string

// The capabilities, in the order Run checks them.
const (
	// Mentions: in a shared channel, a message naming Mother is a mention
	// and other chatter is delivered too, not as a mention.
	Mentions Capability = "mentions"
	// DMs: a direct message is delivered as a DM addressed to Mother.
	DMs Capability = "dms"
	// Split: a long answer is split within the platform's limit, each part
	// keeping its code blocks closed, nothing lost.
	Split Capability = "split"
	// AttachmentsIn: a file sent with a message is saved and listed.
	AttachmentsIn Capability = "attachments-in"
	// AttachmentsOut: Upload posts a file to the channel.
	AttachmentsOut Capability = "attachments-out"
	// Edits: a run's progress edits one working message, throttled (not
	// one edit per event).
	Edits Capability = "edits"
	// RateLimit: a rate-limited post is retried after the platform's wait
	// and lands.
	RateLimit Capability = "rate-limit"
	// Reconnect: after the connection drops, the adapter reconnects and
	// backfills what it missed, delivering each message exactly once.
	Reconnect Capability = "reconnect"
	// Stop: Stop is repeat-safe and nothing is delivered afterwards.
	Stop Capability = "stop"
	// Choices: PostChoices posts a message with buttons; a click is
	// acknowledged to the platform and delivered as a ChannelMessage with
	// Choice set, the choice's id as its text, from the user who clicked;
	// EndChoices takes the buttons away.
	Choices Capability = "choices"
	// ClickReplies: ReplyToClick shows a text to the user who clicked
	// and to nobody else.
	ClickReplies Capability = "click-replies"
	// NotStored: a message Mother could not store (Deliver's error) is
	// delivered again once she can (its Ready closed), exactly once, and
	// the message sent after it is not delivered before it. Where the
	// platform confirms what the adapter handled (Telegram's update
	// offset; Confirmer), the message is not confirmed meanwhile.
	NotStored Capability = "not-stored"
	// DirectMessages: DirectMessage (chat.DirectMessenger) reaches one
	// user privately, not the shared channel (how Mother tells the admins
	// of a full disk).
	DirectMessages Capability = "direct-messages"
)

// Harness is one adapter under test.
type Harness struct {
	// Limit is the platform's longest message in runes (0: none).
	Limit int
	// Lacks declares the capabilities the adapter does not have, each with
	// the reason shown when its check is skipped.
	Lacks map[Capability]string
	// New starts a fresh platform (fake server, pipes) and an adapter
	// connected to it, not yet started. It is called once per check.
	New func(t *testing.T) Platform
}

// Platform is the test's side of the platform: it plays the users and
// reads what Mother posted. Optional abilities are separate interfaces
// (Uploads, EditCounter, RateLimiter, Dropper).
type Platform interface {
	// Adapter is the adapter under test, not yet started.
	Adapter() chat.Adapter
	// Channel is a shared channel Mother is in; DM is a direct one.
	Channel() string
	DM() string
	// Send posts a user's message.
	Send(t *testing.T, in Incoming)
	// Answers are Mother's messages in a channel as users see them now
	// (after edits; thread replies included), oldest first.
	Answers(t *testing.T, channelID string) []string
}

// Incoming is a user's message.
type Incoming struct {
	Channel string
	Text    string
	// Mention addresses Mother the platform's way (Send adds the mention).
	Mention bool
	// File, if set, is attached.
	File *File
	// Offline posts it without the adapter hearing it live, as if the
	// connection were down: only a backfill can find it.
	Offline bool
}

// File is an attachment.
type File struct {
	Name string
	Data []byte
}

// Uploads is a Platform that lists the files posted to a channel.
type Uploads interface {
	Uploaded(t *testing.T, channelID string) []File
}

// EditCounter is a Platform that counts the edits of Mother's messages in
// a channel.
type EditCounter interface {
	EditCount(t *testing.T, channelID string) int
}

// RateLimiter is a Platform that answers the next post of a message to a
// channel with the platform's rate-limit error and a short wait.
type RateLimiter interface {
	RateLimitNextPost(t *testing.T, channelID string)
	// RateLimited reports whether that rate limit was hit.
	RateLimited(t *testing.T) bool
}

// Dropper is a Platform that drops the adapter's connection.
type Dropper interface {
	Drop(t *testing.T)
}

// Clicker is a Platform whose messages carry buttons users can click.
type Clicker interface {
	// Buttons lists the buttons of one of Mother's messages as the
	// platform shows them, decoded back into choices (none once they were
	// taken away).
	Buttons(t *testing.T, channelID, messageID string) []chat.Choice
	// Click presses, as a user, the button of choiceID on a message.
	Click(t *testing.T, channelID, messageID, choiceID string)
	// Acknowledged is how many clicks the adapter acknowledged to the
	// platform (Discord: an interaction response; Slack: the envelope).
	Acknowledged(t *testing.T) int
}

// Whispers is a Platform that lists what was shown to single users
// (ephemeral messages) in a channel.
type Whispers interface {
	Private(t *testing.T, channelID string) []string
}

// Run checks every capability of the adapter h builds.
func Run(t *testing.T, h Harness) {
	checks := []struct {
		c  Capability
		fn func(t *testing.T, h Harness)
	}{
		{Mentions, checkMentions},
		{DMs, checkDMs},
		{Split, checkSplit},
		{AttachmentsIn, checkAttachmentsIn},
		{AttachmentsOut, checkAttachmentsOut},
		{Edits, checkEdits},
		{RateLimit, checkRateLimit},
		{Reconnect, checkReconnect},
		{Stop, checkStop},
		{Choices, checkChoices},
		{ClickReplies, checkClickReplies},
		{NotStored, checkNotStored},
		{DirectMessages, checkDirectMessages},
	}
	for _, c := range checks {
		// A capability the adapter declares lacking is no claim: it is
		// logged, not run (a skip would fail the CI summary).
		if why, ok := h.Lacks[c.c]; ok {
			if why == "" {
				t.Errorf("capability %s declared lacking without a reason", c.c)
			}
			t.Logf("adapter lacks %s: %s", c.c, why)
			continue
		}
		t.Run(string(c.c), func(t *testing.T) { c.fn(t, h) })
	}
}

// need returns p as the optional interface T, or fails the check: an
// adapter either supports a capability or declares it lacking.
func need[T any](t *testing.T, p Platform, c Capability) T {
	t.Helper()
	v, ok := p.(T)
	if !ok {
		var zero T
		t.Fatalf("the harness neither declares %s lacking nor implements %T for it", c, &zero)
	}
	return v
}

// Delivery is one message the adapter delivered.
type Delivery struct {
	Msg  chat.ChannelMessage
	Late bool
}

// inbox records deliveries.
type inbox struct {
	mu      sync.Mutex
	got     []Delivery
	changed chan struct{}
	// refuse, while set, is a text whose messages Deliver does not take
	// (as Mother does not when she cannot store them); refused counts
	// them, and ready is the NotStoredError's channel.
	refuse  string
	refused int
	ready   chan struct{}
}

func (i *inbox) Deliver(_ context.Context, _ string, msg chat.ChannelMessage, late bool) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.refuse != "" && strings.Contains(msg.Text, i.refuse) {
		i.refused++
		return &chat.NotStoredError{Err: fmt.Errorf("write log.jsonl: no space left on device"), Ready: i.ready}
	}
	i.got = append(i.got, Delivery{Msg: msg, Late: late})
	close(i.changed)
	i.changed = make(chan struct{})
	return nil
}

func (i *inbox) refusals() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.refused
}

func (i *inbox) Stop(context.Context, string, string, string) {}

func (i *inbox) all() []Delivery {
	i.mu.Lock()
	defer i.mu.Unlock()
	return append([]Delivery(nil), i.got...)
}

// wait returns the deliveries once cond holds for them.
func (i *inbox) wait(t *testing.T, what string, cond func([]Delivery) bool) []Delivery {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		i.mu.Lock()
		got := append([]Delivery(nil), i.got...)
		ch := i.changed
		i.mu.Unlock()
		if cond(got) {
			return got
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; delivered: %+v", what, got)
		}
	}
}

func withText(text string) func([]Delivery) bool {
	return func(ds []Delivery) bool {
		for _, d := range ds {
			if strings.Contains(d.Msg.Text, text) {
				return true
			}
		}
		return false
	}
}

func find(ds []Delivery, text string) (Delivery, int) {
	var first Delivery
	n := 0
	for _, d := range ds {
		if strings.Contains(d.Msg.Text, text) {
			if n == 0 {
				first = d
			}
			n++
		}
	}
	return first, n
}

// started starts the adapter of a fresh platform and stops it at cleanup.
func started(t *testing.T, h Harness) (Platform, *inbox) {
	t.Helper()
	p := h.New(t)
	in := &inbox{changed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := p.Adapter().Start(ctx, in); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		if err := p.Adapter().Stop(sctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return p, in
}

func checkMentions(t *testing.T, h Harness) {
	p, in := started(t, h)
	p.Send(t, Incoming{Channel: p.Channel(), Text: "just chatting"})
	p.Send(t, Incoming{Channel: p.Channel(), Text: "are you there?", Mention: true})
	got := in.wait(t, "both messages", func(ds []Delivery) bool { return withText("just chatting")(ds) && withText("are you there?")(ds) })
	chatter, _ := find(got, "just chatting")
	mention, _ := find(got, "are you there?")
	if chatter.Msg.IsMention || chatter.Msg.IsDM || chatter.Msg.Choice || mention.Msg.Choice {
		t.Errorf("chatter delivered as %+v, want neither mention nor DM", chatter.Msg)
	}
	if !mention.Msg.IsMention || mention.Msg.IsDM {
		t.Errorf("mention delivered as %+v, want a mention, not a DM", mention.Msg)
	}
	for _, d := range []Delivery{chatter, mention} {
		if d.Msg.ID == "" || d.Msg.ChannelID != p.Channel() || d.Msg.Sender.ID == "" || d.Late {
			t.Errorf("delivered %+v (late %v), want an id, the channel %s, a sender, live", d.Msg, d.Late, p.Channel())
		}
	}
}

func checkDMs(t *testing.T, h Harness) {
	p, in := started(t, h)
	p.Send(t, Incoming{Channel: p.DM(), Text: "a private word"})
	got := in.wait(t, "the DM", withText("a private word"))
	d, _ := find(got, "a private word")
	if !d.Msg.IsDM || !d.Msg.IsMention || d.Msg.ChannelID != p.DM() {
		t.Errorf("DM delivered as %+v, want IsDM and IsMention in %s", d.Msg, p.DM())
	}
}

func checkSplit(t *testing.T, h Harness) {
	p, _ := started(t, h)
	var code strings.Builder
	for i := range 150 {
		fmt.Fprintf(&code, "fmt.Println(%d) // a line of code to make this long\n", i)
	}
	answer := "Here is the program:\n\n```go\n" + code.String() + "```\n\nThat is all."
	r := p.Adapter().NewReply(t.Context(), p.Channel(), nil, chat.ReplyOptions{})
	if _, err := r.Finish(t.Context(), answer); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	var all strings.Builder
	var parts []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		parts = p.Answers(t, p.Channel())
		all.Reset()
		for _, m := range parts {
			all.WriteString(m + "\n")
		}
		if strings.Contains(all.String(), "That is all.") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, m := range parts {
		if n := len([]rune(m)); h.Limit > 0 && n > h.Limit {
			t.Errorf("a message of %d runes, over the platform's %d", n, h.Limit)
		}
		if n := strings.Count(m, "```"); n%2 != 0 {
			t.Errorf("a message leaves a code block open:\n%s", m)
		}
	}
	if h.Limit > 0 && len(parts) < 2 {
		t.Errorf("%d message(s) for a %d-rune answer, want it split", len(parts), len([]rune(answer)))
	}
	for i := range 150 {
		if !strings.Contains(all.String(), fmt.Sprintf("fmt.Println(%d) //", i)) {
			t.Fatalf("line %d of the code lost", i)
		}
	}
}

func checkAttachmentsIn(t *testing.T, h Harness) {
	p, in := started(t, h)
	data := []byte("col1,col2\n1,2\n")
	p.Send(t, Incoming{Channel: p.Channel(), Text: "see the file", Mention: true, File: &File{Name: "data.csv", Data: data}})
	got := in.wait(t, "the message with a file", withText("see the file"))
	d, _ := find(got, "see the file")
	if len(d.Msg.Attachments) != 1 {
		t.Fatalf("attachments = %+v (text %q), want data.csv", d.Msg.Attachments, d.Msg.Text)
	}
	a := d.Msg.Attachments[0]
	if a.Filename != "data.csv" || a.Size != int64(len(data)) || !strings.HasPrefix(a.LocalPath, "attachments/") {
		t.Errorf("attachment = %+v, want data.csv of %d bytes under attachments/", a, len(data))
	}
}

func checkAttachmentsOut(t *testing.T, h Harness) {
	p, _ := started(t, h)
	up, ok := p.Adapter().(chat.Uploader)
	if !ok {
		t.Fatalf("the adapter is no chat.Uploader; declare %s lacking", AttachmentsOut)
	}
	lister := need[Uploads](t, p, AttachmentsOut)
	path := filepath.Join(t.TempDir(), "report.txt")
	if err := os.WriteFile(path, []byte("the report"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := up.Upload(t.Context(), p.Channel(), path, "report.txt"); err != nil {
		t.Fatalf("Upload: %v", err)
	}
	var files []File
	eventually(t, func() bool { files = lister.Uploaded(t, p.Channel()); return len(files) > 0 })
	if len(files) != 1 || !strings.Contains(files[0].Name, "report") || (files[0].Data != nil && string(files[0].Data) != "the report") {
		t.Errorf("uploaded = %+v, want report.txt with its content", files)
	}
}

func checkEdits(t *testing.T, h Harness) {
	p, _ := started(t, h)
	counter := need[EditCounter](t, p, Edits)
	r := p.Adapter().NewReply(t.Context(), p.Channel(), nil, chat.ReplyOptions{})
	const events = 40
	for i := range events {
		r.Event(t.Context(), agent.Event{Type: agent.EventToolStart, ToolCallID: fmt.Sprint(i), ToolName: "bash", Label: fmt.Sprintf("step %d", i)})
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := r.Finish(t.Context(), "done"); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	switch n := counter.EditCount(t, p.Channel()); {
	case n == 0:
		t.Errorf("no edit: the run's progress and answer did not go to one working message")
	case n >= events/2:
		t.Errorf("%d edits for %d events in %v: progress edits are not throttled", n, events, events*10*time.Millisecond)
	}
	var answers []string
	eventually(t, func() bool {
		answers = p.Answers(t, p.Channel())
		return strings.Contains(strings.Join(answers, "\n"), "done")
	})
	if !strings.Contains(strings.Join(answers, "\n"), "done") {
		t.Errorf("answers = %q, want the final answer", answers)
	}
}

func checkRateLimit(t *testing.T, h Harness) {
	p, _ := started(t, h)
	rl := need[RateLimiter](t, p, RateLimit)
	rl.RateLimitNextPost(t, p.Channel())
	if _, err := p.Adapter().Post(t.Context(), p.Channel(), "after the wait"); err != nil {
		t.Fatalf("Post under a rate limit: %v", err)
	}
	if !rl.RateLimited(t) {
		t.Errorf("the rate limit was never hit")
	}
	var got string
	eventually(t, func() bool {
		got = strings.Join(p.Answers(t, p.Channel()), "\n")
		return strings.Contains(got, "after the wait")
	})
	if !strings.Contains(got, "after the wait") {
		t.Errorf("answers = %q, want the rate-limited post to land", got)
	}
}

func checkReconnect(t *testing.T, h Harness) {
	p, in := started(t, h)
	dropper := need[Dropper](t, p, Reconnect)
	sr, ok := p.Adapter().(chat.StatusReporter)
	if !ok {
		t.Fatalf("the adapter is no chat.StatusReporter; declare %s lacking", Reconnect)
	}
	p.Send(t, Incoming{Channel: p.Channel(), Text: "before the drop"})
	in.wait(t, "the first message", withText("before the drop"))
	p.Send(t, Incoming{Channel: p.Channel(), Text: "missed while away", Offline: true})
	dropper.Drop(t)
	deadline := time.Now().Add(10 * time.Second)
	for sr.Status().Reconnects < 1 || sr.Status().State != chat.ConnConnected {
		if time.Now().After(deadline) {
			t.Fatalf("no reconnect: status %+v", sr.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Send(t, Incoming{Channel: p.Channel(), Text: "after the drop"})
	in.wait(t, "the backfilled and the live message", func(ds []Delivery) bool {
		return withText("missed while away")(ds) && withText("after the drop")(ds)
	})
	// A duplicate would come from the backfill or a replay of the live
	// stream, both ahead of a message sent now: every adapter with a
	// connection hands messages to Mother one at a time in the order it
	// takes them in (Discord and Slack: one queue for live events and the
	// backfill job, pushed at the reconnect, which has delivered "missed
	// while away" already; Telegram: one polling loop, update ids in
	// order). Once this marker is delivered, any duplicate has been too.
	p.Send(t, Incoming{Channel: p.Channel(), Text: "marker after the checks"})
	got := in.wait(t, "the marker", withText("marker after the checks"))
	for _, text := range []string{"before the drop", "missed while away", "after the drop", "marker after the checks"} {
		if _, n := find(got, text); n != 1 {
			t.Errorf("%q delivered %d times, want once; all: %+v", text, n, got)
		}
	}
	if d, _ := find(got, "missed while away"); !d.Late {
		t.Errorf("the backfilled message is not marked late: %+v", d.Msg)
	}
}

func checkStop(t *testing.T, h Harness) {
	p := h.New(t)
	in := &inbox{changed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := p.Adapter()
	if err := a.Start(ctx, in); err != nil {
		t.Fatalf("Start: %v", err)
	}
	p.Send(t, Incoming{Channel: p.Channel(), Text: "hello", Mention: true})
	in.wait(t, "a message", withText("hello"))
	for i := range 2 {
		if err := a.Stop(t.Context()); err != nil {
			t.Fatalf("Stop #%d: %v", i+1, err)
		}
	}
	cancel()
	p.Send(t, Incoming{Channel: p.Channel(), Text: "anyone?", Mention: true})
	time.Sleep(300 * time.Millisecond)
	if _, n := find(in.all(), "anyone?"); n != 0 {
		t.Errorf("a message was delivered after Stop")
	}
}

// question is what checkChoices and checkClickReplies ask.
var question = []chat.Choice{
	{ID: "allow c-7f3a91c2 pypi.org:443", Label: "Allow", Style: chat.ChoicePrimary},
	{ID: "always c-7f3a91c2 pypi.org:443", Label: "Always (this channel)"},
	{ID: "deny c-7f3a91c2 pypi.org:443", Label: "Deny", Style: chat.ChoiceDanger},
}

// ask posts question with its buttons and returns the message's id once
// the platform shows them.
func ask(t *testing.T, p Platform, clicker Clicker) string {
	t.Helper()
	ch, ok := p.Adapter().(chat.Chooser)
	if !ok {
		t.Fatalf("the adapter is no chat.Chooser; declare %s lacking", Choices)
	}
	id, err := ch.PostChoices(t.Context(), p.Channel(), "🔐 chick `c-7f3a91c2` asks to reach **pypi.org:443**.", question)
	if err != nil || id == "" {
		t.Fatalf("PostChoices = %q, %v", id, err)
	}
	var got []chat.Choice
	eventually(t, func() bool { got = clicker.Buttons(t, p.Channel(), id); return len(got) == len(question) })
	if fmt.Sprint(got) != fmt.Sprint(question) {
		t.Errorf("buttons on the message = %+v, want %+v", got, question)
	}
	return id
}

// clicked clicks choice on message id and returns the delivered click.
func clicked(t *testing.T, p Platform, in *inbox, clicker Clicker, id, choice string) Delivery {
	t.Helper()
	clicker.Click(t, p.Channel(), id, choice)
	got := in.wait(t, "the click", func(ds []Delivery) bool {
		for _, d := range ds {
			if d.Msg.Choice {
				return true
			}
		}
		return false
	})
	for _, d := range got {
		if d.Msg.Choice {
			return d
		}
	}
	t.Fatal("no click delivered")
	return Delivery{}
}

func checkChoices(t *testing.T, h Harness) {
	p, in := started(t, h)
	clicker := need[Clicker](t, p, Choices)
	ch, ok := p.Adapter().(chat.Chooser)
	if !ok {
		t.Fatalf("the adapter is no chat.Chooser; declare %s lacking", Choices)
	}
	for name, bad := range map[string][]chat.Choice{
		"none":      nil,
		"too many":  {{ID: "1", Label: "1"}, {ID: "2", Label: "2"}, {ID: "3", Label: "3"}, {ID: "4", Label: "4"}, {ID: "5", Label: "5"}, {ID: "6", Label: "6"}},
		"twice":     {{ID: "a", Label: "A"}, {ID: "a", Label: "B"}},
		"long id":   {{ID: strings.Repeat("x", chat.MaxChoiceID+1), Label: "X"}},
		"no label":  {{ID: "a"}},
		"bad style": {{ID: "a", Label: "A", Style: "green"}},
	} {
		if _, err := ch.PostChoices(t.Context(), p.Channel(), "a question", bad); err == nil {
			t.Errorf("PostChoices with %s choices: no error", name)
		}
	}
	id := ask(t, p, clicker)
	if a := strings.Join(p.Answers(t, p.Channel()), "\n"); !strings.Contains(a, "asks to reach") || !strings.Contains(a, "pypi.org:443") {
		t.Errorf("answers = %q, want the question's text", a)
	}
	d := clicked(t, p, in, clicker, id, question[2].ID)
	c := d.Msg
	if c.Text != question[2].ID || c.ChannelID != p.Channel() || c.Sender.ID == "" || c.Sender.Username == "" || c.ID == "" || c.ReplyTo != id || d.Late {
		t.Errorf("click delivered as %+v (late %v), want text %q in %s from a user, replying to %s, live", c, d.Late, question[2].ID, p.Channel(), id)
	}
	var acked int
	eventually(t, func() bool { acked = clicker.Acknowledged(t); return acked >= 1 })
	if acked != 1 {
		t.Errorf("%d clicks acknowledged to the platform, want 1", acked)
	}
	if err := ch.EndChoices(t.Context(), p.Channel(), id, "⛔ refused."); err != nil {
		t.Fatalf("EndChoices: %v", err)
	}
	var left []chat.Choice
	var answers string
	eventually(t, func() bool {
		left = clicker.Buttons(t, p.Channel(), id)
		answers = strings.Join(p.Answers(t, p.Channel()), "\n")
		return len(left) == 0 && strings.Contains(answers, "refused")
	})
	if len(left) != 0 || !strings.Contains(answers, "refused") || strings.Contains(answers, "asks to reach") {
		t.Errorf("after EndChoices: buttons %+v, answers %q; want no buttons and the new text in place of the question", left, answers)
	}
}

func checkClickReplies(t *testing.T, h Harness) {
	p, in := started(t, h)
	clicker := need[Clicker](t, p, ClickReplies)
	whispers := need[Whispers](t, p, ClickReplies)
	cr, ok := p.Adapter().(chat.ClickReplier)
	if !ok {
		t.Fatalf("the adapter is no chat.ClickReplier; declare %s lacking", ClickReplies)
	}
	id := ask(t, p, clicker)
	d := clicked(t, p, in, clicker, id, question[0].ID)
	if err := cr.ReplyToClick(t.Context(), d.Msg, "Only an admin can answer."); err != nil {
		t.Fatalf("ReplyToClick: %v", err)
	}
	var private []string
	eventually(t, func() bool { private = whispers.Private(t, p.Channel()); return len(private) > 0 })
	if len(private) != 1 || !strings.Contains(private[0], "Only an admin can answer.") {
		t.Errorf("shown privately: %q, want the reply", private)
	}
	if a := strings.Join(p.Answers(t, p.Channel()), "\n"); strings.Contains(a, "Only an admin") {
		t.Errorf("the private reply is in the channel for everyone: %q", a)
	}
}

// eventually polls cond for up to 10 s; the caller then checks what it
// saw (output read from a pipe or a fake arrives a little later).
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}
