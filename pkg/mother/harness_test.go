package mother

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/disk"
	"github.com/mother-chat/mother/pkg/egress"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/ollama"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/store"
)

// rec is one thing the adapter was asked to render.
type rec struct {
	Kind    string // "post", "finish", "tool" (a tool's start), "detail" (a tool's end: its result)
	Channel string
	Text    string
	Title   string
	Trigger string // trigger message id of a reply ("" for events)
	// ID is the platform id of a post; Choices the buttons of "choices";
	// ReplyTo the message an "end" edits or the click a "private" answers.
	ID      string
	Choices []chat.Choice
	ReplyTo string
}

// recAdapter is a chat.Adapter that records what Mother asks it to render.
// Like the platform adapters (Telegram's getMe, Discord's READY, Slack's
// auth.test), it knows its own id only once started: Mother's recovery,
// which runs before the adapters start, cannot ask it.
type recAdapter struct {
	name, self string
	onStart    func(in chat.Inbox)
	started    atomic.Bool

	mu   sync.Mutex
	recs []rec
	in   chat.Inbox
}

var _ chat.Adapter = (*recAdapter)(nil)

var platformSeq atomic.Int64 // platform ids unique across restarts

func newRecAdapter(name string) *recAdapter { return &recAdapter{name: name, self: "UMOTHER"} }

func (a *recAdapter) Name() string { return a.name }
func (a *recAdapter) Start(_ context.Context, in chat.Inbox) error {
	a.mu.Lock()
	a.in = in
	a.mu.Unlock()
	a.started.Store(true)
	if a.onStart != nil {
		a.onStart(in)
	}
	return nil
}
func (a *recAdapter) Stop(context.Context) error   { return nil }
func (a *recAdapter) Channels() []chat.ChannelInfo { return nil }
func (a *recAdapter) Users() []chat.UserInfo       { return nil }
func (a *recAdapter) SelfID() string {
	if !a.started.Load() {
		return ""
	}
	return a.self
}

func (a *recAdapter) add(r rec) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	r.ID = fmt.Sprintf("P%d", platformSeq.Add(1))
	a.recs = append(a.recs, r)
	return r.ID
}

// chooserAdapter is a recAdapter with buttons: it records "choices" (a
// post with buttons), "end" (the buttons taken away) and "private" (an
// answer to a click only the clicker sees).
type chooserAdapter struct{ *recAdapter }

var (
	_ chat.Chooser      = chooserAdapter{}
	_ chat.ClickReplier = chooserAdapter{}
)

func (a chooserAdapter) PostChoices(_ context.Context, channelID, markdown string, choices []chat.Choice) (string, error) {
	if err := chat.CheckChoices(choices); err != nil {
		return "", err
	}
	return a.add(rec{Kind: "choices", Channel: channelID, Text: markdown, Choices: choices}), nil
}

func (a chooserAdapter) EndChoices(_ context.Context, channelID, messageID, markdown string) error {
	a.add(rec{Kind: "end", Channel: channelID, Text: markdown, ReplyTo: messageID})
	return nil
}

func (a chooserAdapter) ReplyToClick(_ context.Context, click chat.ChannelMessage, markdown string) error {
	a.add(rec{Kind: "private", Channel: click.ChannelID, Text: markdown, ReplyTo: click.ID})
	return nil
}

// uploadAdapter is a recAdapter that posts files: it records "upload"
// with the file's title and, in Text, its content.
type uploadAdapter struct{ *recAdapter }

var _ chat.Uploader = uploadAdapter{}

func (a uploadAdapter) Upload(_ context.Context, channelID, path, title string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	a.add(rec{Kind: "upload", Channel: channelID, Title: title, Text: string(b)})
	return nil
}

func (a *recAdapter) Post(_ context.Context, channelID, markdown string) (string, error) {
	return a.add(rec{Kind: "post", Channel: channelID, Text: markdown}), nil
}

func (a *recAdapter) NewReply(_ context.Context, channelID string, trigger *chat.ChannelMessage, opts chat.ReplyOptions) chat.Reply {
	r := &recReply{a: a, channel: channelID, title: opts.Title}
	if trigger != nil {
		r.trigger = trigger.ID
	}
	return r
}

type recReply struct {
	a                       *recAdapter
	channel, title, trigger string
}

func (r *recReply) Event(_ context.Context, ev agent.Event) {
	switch ev.Type {
	case agent.EventToolStart:
		r.a.add(rec{Kind: "tool", Channel: r.channel, Text: ev.ToolName, Title: r.title, Trigger: r.trigger})
	case agent.EventToolEnd:
		r.a.add(rec{Kind: "detail", Channel: r.channel, Text: ev.ToolName + ": " + ev.Result, Title: r.title, Trigger: r.trigger})
	}
}

func (r *recReply) Finish(_ context.Context, markdown string) (string, error) {
	return r.a.add(rec{Kind: "finish", Channel: r.channel, Text: markdown, Title: r.title, Trigger: r.trigger}), nil
}

func (a *recAdapter) all() []rec {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]rec(nil), a.recs...)
}

func (a *recAdapter) of(kind string) []rec {
	var out []rec
	for _, r := range a.all() {
		if r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}

// waitFor polls cond (runs are asynchronous: they go through HTTP to the
// fake model server); it fails the test after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// blockTool blocks until released or until the run is aborted.
type blockTool struct {
	started chan chat.RunInfo
	release chan struct{}
	aborted atomic.Int32
}

func newBlockTool() *blockTool {
	return &blockTool{started: make(chan chat.RunInfo, 100), release: make(chan struct{}, 100)}
}

func (b *blockTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "block", Description: "waits", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}
}

func (b *blockTool) Run(ctx context.Context, _ json.RawMessage) (agent.Result, error) {
	info, _ := chat.RunInfoFrom(ctx)
	b.started <- info
	select {
	case <-ctx.Done():
		b.aborted.Add(1)
		return agent.Result{}, ctx.Err()
	case <-b.release:
		return agent.Result{Text: "released"}, nil
	}
}

func (b *blockTool) waitStarted(t *testing.T) chat.RunInfo {
	t.Helper()
	select {
	case info := <-b.started:
		return info
	case <-time.After(10 * time.Second):
		t.Fatal("the block tool did not start")
		return chat.RunInfo{}
	}
}

// script answers like a tiny model: it calls a tool when asked to, says
// what a tool returned, stays silent when asked to, and otherwise echoes
// the text of the last user message.
func script(req ollamatest.Request) ollamatest.Turn {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "tool" {
		return ollamatest.Turn{Text: "tool said: " + last.Content}
	}
	text := last.Content
	if i := strings.Index(text, "]: "); i >= 0 {
		text = text[i+3:]
	}
	for _, tool := range []string{"block", "spawn"} {
		if strings.Contains(text, "please "+tool) {
			return ollamatest.Turn{Calls: []ollamatest.Call{{Name: tool}}}
		}
	}
	if strings.Contains(text, "be silent") {
		return ollamatest.Turn{Text: "[SILENT] nothing to add"}
	}
	return ollamatest.Turn{Text: "answer to: " + text}
}

type harness struct {
	t      *testing.T
	data   string
	cfg    *config.Config
	fake   *ollamatest.Server
	tools  []agent.Tool
	chick  ChickCanceller
	st     *store.Store
	ad     *recAdapter
	m      *Mother
	logs   *strings.Builder
	logMu  *sync.Mutex
	script func(ollamatest.Request) ollamatest.Turn
	egress *egress.Policy
	clock  clock.Clock
	// crashHook is the next booted Mother's crash hook (see crashed).
	crashHook func(point string) bool
	// buttons: the adapter is a chooserAdapter.
	buttons bool
	// uploads: the adapter can post files (records "upload").
	uploads bool
	// dms: the adapter sends direct messages (records "dm"); disk is
	// the booted Mother's disk monitor.
	dms  bool
	disk *disk.Monitor
	// hatch is the hatchery of every Mother booted (nil: none).
	hatch Hatchery
}

type harnessOpt func(*harness)

func withTools(ts ...agent.Tool) harnessOpt {
	return func(h *harness) { h.tools = append(h.tools, ts...) }
}
func withScript(f func(ollamatest.Request) ollamatest.Turn) harnessOpt {
	return func(h *harness) { h.script = f }
}
func withChicks(c ChickCanceller) harnessOpt { return func(h *harness) { h.chick = c } }
func withHatchery(c Hatchery) harnessOpt     { return func(h *harness) { h.hatch = c } }
func withEgress(p *egress.Policy) harnessOpt { return func(h *harness) { h.egress = p } }
func withClock(c clock.Clock) harnessOpt     { return func(h *harness) { h.clock = c } }
func withButtons() harnessOpt                { return func(h *harness) { h.buttons = true } }
func withUploads() harnessOpt                { return func(h *harness) { h.uploads = true } }
func withChickResults(mode string) harnessOpt {
	return func(h *harness) { h.cfg.Chicks.Results = mode }
}
func withAdapterConfig(ac config.Adapter) harnessOpt {
	return func(h *harness) { h.cfg.Adapters["rec"] = ac }
}

func newHarness(t *testing.T, opts ...harnessOpt) *harness {
	t.Helper()
	h := &harness{t: t, data: t.TempDir(), logs: &strings.Builder{}, logMu: &sync.Mutex{}}
	h.cfg = &config.Config{Adapters: map[string]config.Adapter{"rec": {Type: "discord", Admins: []string{"UADMIN"}, DM: config.DMPolicy{Everyone: true}}}}
	h.cfg.SetDefaults(h.data)
	h.cfg.Model.ID = "tiny"
	h.script = script
	for _, o := range opts {
		o(h)
	}
	h.fake = ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn { return h.script(r) })
	t.Cleanup(h.fake.Close)
	h.boot()
	return h
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (h *harness) log() string {
	h.logMu.Lock()
	defer h.logMu.Unlock()
	return h.logs.String()
}

// boot builds a Mother (a new process, as far as the data directory can
// tell) and starts it with a fresh recording adapter.
func (h *harness) boot(extra ...func(*recAdapter)) {
	t := h.t
	t.Helper()
	st, err := store.Open(h.data, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ollama.New(h.fake.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(lockedWriter{h.logMu, h.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	tools := append([]agent.Tool{MemoryTool(st.Workspace())}, h.tools...)
	m, err := New(Options{Config: h.cfg, Store: st, Provider: p, Logger: logger, Tools: tools, Canceller: h.chick, Chicks: h.hatch, Egress: h.egress, Clock: h.clock, Disk: h.disk})
	if err != nil {
		t.Fatal(err)
	}
	m.crashHook, h.crashHook = h.crashHook, nil
	ad := newRecAdapter("rec")
	for _, f := range extra {
		f(ad)
	}
	var added chat.Adapter = ad
	if h.buttons {
		added = chooserAdapter{ad}
	}
	if h.uploads {
		added = uploadAdapter{ad}
	}
	if h.dms {
		added = dmAdapter{ad}
	}
	if err := m.AddAdapter(added); err != nil {
		t.Fatal(err)
	}
	h.st, h.ad, h.m = st, ad, m
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Shutdown(ctx)
		st.Close()
	})
}

// freezeAt makes the next booted Mother stop for good at crash point
// point (see crashed), as a process that died there: the returned channel
// is closed when she reaches it. Nothing of her runs on until the test
// ends.
func (h *harness) freezeAt(point string) <-chan struct{} {
	hit, frozen := make(chan struct{}), make(chan struct{})
	h.t.Cleanup(func() { close(frozen) })
	h.m.crashHook = func(p string) bool {
		if p != point {
			return false
		}
		close(hit)
		<-frozen
		return true
	}
	return hit
}

// waitClosed waits for ch, failing the test after 10 s.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

var msgSeq atomic.Int64

type msgOpt func(*chat.ChannelMessage)

func dm(m *chat.ChannelMessage)      { m.IsDM = true }
func mention(m *chat.ChannelMessage) { m.IsMention = true }
func from(id, name string) msgOpt {
	return func(m *chat.ChannelMessage) { m.Sender = chat.Sender{ID: id, Username: name} }
}
func inThreadOf(starter string) msgOpt {
	return func(m *chat.ChannelMessage) { m.Metadata = map[string]any{chat.MetaThreadStarter: starter} }
}

// say delivers a message to Mother as the adapter would.
func (h *harness) say(channel, text string, late bool, opts ...msgOpt) chat.ChannelMessage {
	msg := chat.ChannelMessage{
		ID: fmt.Sprintf("M%d", msgSeq.Add(1)), ChannelID: channel, Timestamp: time.Now(),
		Sender: chat.Sender{ID: "UMARIO", Username: "mario"}, Text: text, Attachments: []chat.ChannelAttachment{},
	}
	for _, o := range opts {
		o(&msg)
	}
	h.m.Deliver(h.t.Context(), "rec", msg, late)
	return msg
}

func (h *harness) idle() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.t.Context(), 10*time.Second)
	defer cancel()
	if err := h.m.Idle(ctx); err != nil {
		h.t.Fatalf("Mother did not become idle: %v", err)
	}
}

func (h *harness) logged(channel string) []chat.ChannelMessage {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.data, "workspace/channels/rec", channel, "log.jsonl"))
	if err != nil {
		h.t.Fatal(err)
	}
	var out []chat.ChannelMessage
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m chat.ChannelMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			h.t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func texts(rs []rec) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Text)
	}
	return out
}
