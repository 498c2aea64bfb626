package mother

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/semaphore"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/prompt"
	"github.com/mother-chat/mother/pkg/wire"
)

// Hatchery runs chicks for Mother (pkg/hatchery).
type Hatchery interface {
	Spawn(ctx context.Context, req hatchery.SpawnRequest) (hatchery.Info, error)
	Stop(id string, reason hatchery.Reason, outcome string, grace time.Duration) (hatchery.State, error)
	List(all bool) []hatchery.Info
	Get(id string) (hatchery.Info, error)
	Config() config.Chicks
	// Reported records that a chick's end has been told to its channel.
	Reported(id string)
	// Spawned returns the chick spawned for a request key
	// (hatchery.SpawnRequest.Key), if there is one.
	Spawned(key string) (hatchery.Info, bool)
}

// chickView renders one chick in its channel: events in order on their own
// goroutine, so a slow platform never holds up the nest. Every view counts
// as work for Idle until the chick's end has been posted.
type chickView struct {
	id      string
	adapter chat.Adapter
	channel string
	reply   chat.Reply
	calls   chan func()
	// done is closed once the end has been posted; later calls are dropped.
	done  chan struct{}
	files []string
	// attached are the titles of the files posted to the channel.
	attached []string
	// evicted is what the channel quota removed on its account (quota.go).
	evicted evictions
	// egressSeen are the connection lines shown (only the view's
	// goroutine touches it).
	egressSeen map[string]bool
	// queued bounds the bytes of the events waiting in calls
	// (maxViewQueueBytes); queueEnd releases its waiters once the view is
	// done.
	queued   *semaphore.Weighted
	queueCtx context.Context
	queueEnd context.CancelFunc
}

// maxViewQueueBytes bounds the bytes of a chick's events waiting for its
// view (a platform slower than the chick): past it the hatchery waits, and
// with it the chick's session (chicks.events bounds each event).
const maxViewQueueBytes = 2 << 20

// maxViewLabelBytes clips an event's label before it reaches a view: it is
// a one-line status, and a view keeps the labels of the tools running.
const maxViewLabelBytes = 512

// reserve waits until an event of n bytes may wait for the view (one
// bigger than maxViewQueueBytes takes the whole of it, so it waits alone);
// false once the view is done.
func (v *chickView) reserve(n int64) bool {
	return v.queued.Acquire(v.queueCtx, min(n, maxViewQueueBytes)) == nil
}

// unreserve gives back what reserve took, once the event was rendered.
func (v *chickView) unreserve(n int64) { v.queued.Release(min(n, maxViewQueueBytes)) }

// viewEvent is ev as a view needs it: its label clipped, and its size
// (what it holds while it waits).
func viewEvent(ev agent.Event) (agent.Event, int64) {
	if len(ev.Label) > maxViewLabelBytes {
		cut := maxViewLabelBytes
		for cut > 0 && !utf8.RuneStart(ev.Label[cut]) {
			cut--
		}
		ev.Label = ev.Label[:cut] + "…"
	}
	return ev, int64(len(ev.Text) + len(ev.Label) + len(ev.Args) + len(ev.Result) + len(ev.Err) + len(ev.ToolName) + len(ev.ToolCallID) + 64)
}

// do queues f for the view's goroutine; after the end it is dropped.
func (v *chickView) do(f func()) {
	select {
	case v.calls <- f:
	case <-v.done:
	}
}

// maxEndedViews bounds the ended chicks Mother remembers (see endedOrder).
const maxEndedViews = 1024

// ChickObserver is what the hatchery reports chicks to.
func (m *Mother) ChickObserver() hatchery.Observer { return chickObserver{m} }

type chickObserver struct{ m *Mother }

var _ hatchery.Observer = chickObserver{}

// view returns the chick's view, creating it (and its worker) on first
// use; nil for a chick whose end was already posted or whose adapter is
// not configured.
func (m *Mother) view(in hatchery.Info) *chickView {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.viewLocked(in)
}

func (m *Mother) viewLocked(in hatchery.Info) *chickView {
	if m.chicksEnded[in.ID] {
		return nil
	}
	if v, ok := m.chickViews[in.ID]; ok {
		return v
	}
	a, ok := m.adapters[in.Adapter]
	if !ok {
		return nil
	}
	v := &chickView{id: in.ID, adapter: a, channel: in.ChannelID, calls: make(chan func(), 256), done: make(chan struct{}), queued: semaphore.NewWeighted(maxViewQueueBytes)}
	v.queueCtx, v.queueEnd = context.WithCancel(context.Background())
	m.chickViews[in.ID] = v
	go func() {
		for {
			select {
			case f := <-v.calls:
				f()
			case <-v.done:
				return
			}
		}
	}()
	return v
}

func (v *chickView) replyFor(m *Mother, ctx context.Context) chat.Reply {
	if v.reply == nil {
		v.reply = v.adapter.NewReply(context.WithoutCancel(ctx), v.channel, nil, chat.ReplyOptions{Title: "chick " + v.id, Quiet: m.quiet(v.adapter.Name(), v.channel)})
	}
	return v.reply
}

func (o chickObserver) ChickEvent(in hatchery.Info, ev agent.Event) {
	m := o.m
	m.trimmer.Touch() // a relay is work: her code stays mapped through it
	v := m.view(in)
	if v == nil {
		return
	}
	if !m.paceProgress(in, ev) {
		return
	}
	ev, n := viewEvent(ev)
	if !v.reserve(n) {
		return
	}
	v.do(func() {
		v.unreserve(n)
		v.replyFor(m, m.ctx).Event(context.WithoutCancel(m.ctx), ev)
	})
}

func (o chickObserver) ChickFile(in hatchery.Info, f hatchery.File) {
	m := o.m
	v := m.view(in)
	if v == nil {
		return
	}
	v.do(func() {
		ctx := context.WithoutCancel(m.ctx)
		if !f.Attach {
			v.files = append(v.files, f.RelPath)
			return
		}
		title := f.Title
		if title == "" {
			title = filepath.Base(f.Path)
		}
		if !m.paceNotice(in, noticeFile, strings.TrimPrefix(f.RelPath, filepath.Join("scratch", "chicks", in.ID)+"/")) {
			// Folded: on disk, named in the folded post and in its result.
			v.files = append(v.files, f.RelPath)
			return
		}
		v.attached = append(v.attached, title)
		if up, ok := v.adapter.(chat.Uploader); ok {
			if err := up.Upload(ctx, v.channel, f.Path, title); err != nil {
				m.logger.Error("cannot post chick file", "chick", v.id, "file", f.RelPath, "err", err)
				m.post(ctx, v.adapter, v.channel, fmt.Sprintf("Chick %s attached %s but I could not post it; it is stored at `%s`.", v.id, title, f.RelPath))
			} else {
				m.metrics.MessageOut(v.adapter.Name())
			}
			return
		}
		m.post(ctx, v.adapter, v.channel, fmt.Sprintf("Chick %s attached %s: stored at `%s`.", v.id, title, f.RelPath))
	})
}

func (o chickObserver) ChickResumed(in hatchery.Info) {
	m := o.m
	v := m.view(in)
	if v == nil {
		m.logger.Warn("resumed chick of an adapter that is not configured", "chick", in.ID, "adapter", in.Adapter)
		return
	}
	v.do(func() {
		m.post(context.WithoutCancel(m.ctx), v.adapter, v.channel, fmt.Sprintf("I restarted; chick %s is still working on: %s", in.ID, oneLine(in.Goal, 200)))
	})
}

func (o chickObserver) ChickEnded(in hatchery.Info) {
	m := o.m
	m.accessChickEnded(in.ID)
	m.mu.Lock()
	_, seen := m.chickViews[in.ID]
	v := m.viewLocked(in)
	_, known := m.adapters[in.Adapter]
	if v != nil {
		m.markEndedLocked(in.ID)
	}
	m.mu.Unlock()
	if v == nil {
		m.paceEnd(in)
		if !known {
			m.logger.Warn("chick of an adapter that is not configured ended", "chick", in.ID, "adapter", in.Adapter, "outcome", in.Outcome)
			if m.chicks != nil {
				m.chicks.Reported(in.ID) // nobody to tell, now or after a restart
			}
			return
		}
		// Its end was already posted, or is being answered: by this
		// process, or by a run an in-flight marker carried over a restart
		// (recoverInflight marks those ended before the hatchery can
		// announce them).
		m.logger.Info("the chick's end is already told or being answered; not again", "chick", in.ID)
		return
	}
	v.do(func() {
		defer func() {
			m.mu.Lock()
			delete(m.chickViews, in.ID)
			m.settled.Broadcast()
			m.mu.Unlock()
			close(v.done)
			v.queueEnd()
		}()
		m.paceEnd(in)
		ctx := context.WithoutCancel(m.ctx)
		m.postEvicted(v)
		if m.cfg.Chicks.Results != config.ResultsRelay {
			m.answerChickEnd(ctx, v, in)
			return
		}
		if !seen && m.relayedBefore(v, in.ID) {
			// An end announced again after a restart (no view of it in
			// this process) that the previous process had relayed and
			// logged, and crashed before telling the hatchery.
			m.logger.Info("the chick's result was relayed before the restart; not again", "chick", in.ID)
			if m.chicks != nil {
				m.chicks.Reported(in.ID)
			}
			return
		}
		m.relayChickEnd(ctx, v, in)
	})
}

// markEndedLocked records that chick id's end is told (or being
// answered): its late events, and any announcement of its end again, are
// dropped. Only the newest maxEndedViews are kept. Caller holds m.mu.
func (m *Mother) markEndedLocked(id string) {
	if m.chicksEnded[id] {
		return
	}
	m.chicksEnded[id] = true
	m.endedOrder = append(m.endedOrder, id)
	if len(m.endedOrder) > maxEndedViews {
		delete(m.chicksEnded, m.endedOrder[0])
		m.endedOrder = m.endedOrder[1:]
	}
}

// relayedBefore reports whether the channel's log holds the relayed
// result of chick id (logChickResult's line). It reads the whole log, so
// it is asked only of an end this process has not seen the chick of: one
// announced again after a restart.
func (m *Mother) relayedBefore(v *chickView, id string) bool {
	ch, err := m.store.Channel(v.adapter.Name(), v.channel)
	if err != nil {
		return false
	}
	self, prefix := v.adapter.SelfID(), "[chick "+id+", goal: "
	_, found, err := ch.FindMessage(0, func(msg chat.ChannelMessage) bool {
		return ownLine(msg, self) && strings.HasPrefix(msg.Text, prefix)
	})
	if err != nil {
		m.logger.Warn("cannot look for the chick's relayed result in the log; relaying it", "chick", id, "err", err)
		return false
	}
	return found
}

// relayChickEnd posts the chick's result as is (chicks.results "relay")
// and logs it as Mother's message.
func (m *Mother) relayChickEnd(ctx context.Context, v *chickView, in hatchery.Info) {
	text := chickSummary(in, v.files)
	id, err := v.replyFor(m, ctx).Finish(ctx, text)
	if err != nil {
		m.logger.Error("cannot post chick result", "chick", in.ID, "err", err)
	} else {
		m.metrics.MessageOut(v.adapter.Name())
	}
	m.logChickResult(v, in, id, text)
	if m.chicks != nil {
		m.chicks.Reported(in.ID)
	}
}

// logChickResult logs the result as a message from Mother in log.jsonl, so
// the next run's sync brings it into her model's context (she can answer
// follow-ups about it).
func (m *Mother) logChickResult(v *chickView, in hatchery.Info, platformID, text string) {
	ch, err := m.store.Channel(v.adapter.Name(), v.channel)
	if err != nil {
		m.logger.Error("cannot log chick result", "chick", in.ID, "err", err)
		return
	}
	if platformID == "" {
		platformID = m.newID()
	}
	msg := chat.ChannelMessage{
		ID: platformID, ChannelID: v.channel, Timestamp: m.now(),
		Sender: ownSender(v.adapter),
		Text:   fmt.Sprintf("[chick %s, goal: %s]\n%s", in.ID, oneLine(in.Goal, 300), text),
	}
	if _, err := ch.AppendMessage(msg); err != nil {
		m.logger.Error("cannot log chick result", "chick", in.ID, "err", err)
		return
	}
	m.chargeReport(in, msg.Text)
	m.logger.Info("chick result stored", "chick", in.ID, "channel", chat.QualifiedID(v.adapter.Name(), v.channel), "reply_id", platformID)
}

// chickSummary is the text posted when a chick ends: its answer (or what
// went wrong) and a usage line.
func chickSummary(in hatchery.Info, files []string) string {
	var b strings.Builder
	answer := ""
	if in.Result != nil {
		answer = strings.TrimSpace(in.Result.Text)
	}
	switch in.Reason {
	case hatchery.ReasonDone:
		if answer == "" {
			answer = "(the chick finished without a final message)"
		}
		b.WriteString(answer)
	default:
		b.WriteString(chickEnd(in))
		if answer != "" {
			b.WriteString("\n\nIts last words: " + answer)
		}
	}
	if len(files) > 0 {
		b.WriteString("\n\nFiles: " + fileList(in.ID, files))
	}
	b.WriteString("\n\n" + chickUsage(in))
	return b.String()
}

// chickEnd says in one plain sentence why chick in ended without its
// answer, and what to do; the hatchery's record and Mother's log keep the
// outcome as it was.
func chickEnd(in hatchery.Info) string {
	d := plainDetail(in.Outcome)
	switch in.Reason {
	case hatchery.ReasonBudget:
		return fmt.Sprintf("Chick %s was stopped because a budget ran out: %s.", in.ID, d)
	case hatchery.ReasonKilled:
		return fmt.Sprintf("Chick %s was stopped: %s.", in.ID, d)
	case hatchery.ReasonHung:
		return fmt.Sprintf("Chick %s stopped answering (%s), so it was stopped; try again, and if it happens again the owner can find the details in Mother's log.", in.ID, d)
	case hatchery.ReasonTimeout:
		return fmt.Sprintf("Chick %s ran out of time (%s) and was stopped; give it a smaller goal, or the owner can raise chicks.timeout.", in.ID, d)
	case hatchery.ReasonCrashed:
		return fmt.Sprintf("Chick %s crashed (%s); try again, and if it happens again the owner can find the details in Mother's log.", in.ID, d)
	case hatchery.ReasonFlooding:
		return fmt.Sprintf("Chick %s was stopped for sending too much: %s.", in.ID, d)
	case hatchery.ReasonLost:
		return fmt.Sprintf("Chick %s was lost (%s); ask again if its goal still matters.", in.ID, d)
	case hatchery.ReasonNoStart:
		return fmt.Sprintf("Chick %s could not start (%s); the owner can find the details in Mother's log.", in.ID, d)
	case hatchery.ReasonShutdown:
		return fmt.Sprintf("Chick %s was stopped because Mother is shutting down.", in.ID)
	}
	if modelFailure(in.Outcome) {
		return fmt.Sprintf("Chick %s failed. %s", in.ID, model.Sentence(errors.New(in.Outcome)))
	}
	return fmt.Sprintf("Chick %s failed: %s.", in.ID, d)
}

// chainPrefix is the labels an error chain puts before its message
// ("failed: transient: ollama: HTTP 500: "): lower-case words and a colon.
var chainPrefix = regexp.MustCompile(`^(?:(?:[a-z]+(?: [a-z]+){0,2}|HTTP \d+|rpc error): |code = \w+ desc = )+`)

// plainDetail is an outcome without the labels of an error chain, on one
// line and bounded, without its final full stop.
func plainDetail(s string) string {
	s = firstLine(s)
	for {
		t := chainPrefix.ReplaceAllString(s, "")
		if t == s {
			break
		}
		s = t
	}
	return strings.TrimSuffix(strings.TrimSpace(s), ".")
}

// modelFailure reports whether a chick's failure came from its model
// server (the chick's run ended on a model error), which model.Sentence
// says in plain words.
func modelFailure(outcome string) bool {
	for _, w := range []string{"ollama", "openai", "anthropic", "transient", "response line", "model provider", "HTTP "} {
		if strings.Contains(outcome, w) {
			return true
		}
	}
	return false
}

// chickUsage is the usage line that ends every chick's result, in either
// mode.
func chickUsage(in hatchery.Info) string {
	dur := ""
	if !in.StartedAt.IsZero() && !in.EndedAt.IsZero() {
		dur = " · " + in.EndedAt.Sub(in.StartedAt).Round(time.Second).String()
	}
	by := ""
	if len(in.AnsweredBy) > 0 {
		by = " · answered by fallback " + strings.Join(in.AnsweredBy, ", ")
	}
	return fmt.Sprintf("(chick %s · %s · tier %s%s · %d tokens: %d in, %d out%s)", in.ID, in.State, in.Tier, by,
		in.Usage.Total(), in.Usage.InputTokens, in.Usage.OutputTokens, dur)
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len([]rune(s)) > n {
		s = string([]rune(s)[:n]) + "..."
	}
	return s
}

// chickTools are Mother's tools for chicks.
func (m *Mother) chickTools() []agent.Tool {
	return []agent.Tool{spawnTool{m}, listTool{m}, cancelTool{m}}
}

type spawnTool struct{ m *Mother }

func (t spawnTool) Spec() model.ToolSpec {
	cc := t.m.chicks.Config()
	names := make([]string, 0, len(cc.Tiers))
	for n := range cc.Tiers {
		names = append(names, n)
	}
	sort.Strings(names)
	var desc strings.Builder
	for _, n := range names {
		tier := cc.Tiers[n]
		fmt.Fprintf(&desc, "\n- %s: %s/%s. %s", n, tier.Provider, tier.Model, tier.Description)
	}
	tiers, _ := json.Marshal(names)
	params := fmt.Sprintf(`{"type":"object","properties":{
"label":{"type":"string","description":"a few words shown to users"},
"goal":{"type":"string","description":"the complete goal for the chick, with every detail it needs: it does not see this conversation"},
"tier":{"type":"string","enum":%s,"description":"model tier (default %s)"},
"skills":{"type":"string","enum":["channel","workspace"],"description":"where skills the chick creates or changes under skills/ go: this channel's (default) or the workspace's, shared by every channel (only when an admin asks for it)"}},
"required":["goal"]}`, tiers, cc.DefaultTier)
	return model.ToolSpec{
		Name: "spawn_chick",
		Description: "Hand a heavy goal (coding, running commands, analysing files, multi-step work) to a chick: a disposable worker " +
			"with bash, read, write, edit and attach in a copy of this channel's files. It runs in the background; " +
			t.m.chickEndsWith() + ", so do not wait for it. Answer simple chat yourself. Tiers:" + desc.String(),
		Parameters: json.RawMessage(params),
	}
}

func (t spawnTool) Run(ctx context.Context, args json.RawMessage) (agent.Result, error) {
	var in struct {
		Goal   string `json:"goal"`
		Tier   string `json:"tier"`
		Skills string `json:"skills"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return agent.Result{}, fmt.Errorf("spawn_chick: bad arguments: %w", err)
	}
	if strings.TrimSpace(in.Goal) == "" {
		return agent.Result{}, errors.New("spawn_chick: goal is required")
	}
	ri, ok := chat.RunInfoFrom(ctx)
	if !ok {
		return agent.Result{}, errors.New("spawn_chick: no channel in this run")
	}
	m := t.m
	a, ok := m.Adapter(ri.Adapter)
	if !ok {
		return agent.Result{}, fmt.Errorf("spawn_chick: unknown adapter %q", ri.Adapter)
	}
	skillsTo, err := chickSkillsTo(in.Skills, ri.IsAdmin)
	if err != nil {
		return agent.Result{Text: err.Error(), IsError: true}, nil
	}
	// Hold m.mu across the spawn, so the chick is counted as work before
	// any of its callbacks (even a fast end) can run.
	m.mu.Lock()
	info, err := m.chicks.Spawn(ctx, hatchery.SpawnRequest{
		Adapter: ri.Adapter, ChannelID: ri.ChannelID, Goal: in.Goal, Tier: in.Tier, StartedBy: ri.UserID, SkillsTo: skillsTo,
		System: m.chickPrompt(ri, a),
		Files:  hatchery.Files{ChannelDir: ri.ChannelDir, SharedSkills: filepath.Join(m.store.Workspace(), "skills")},
		Key:    spawnKey(ctx),
	})
	if err == nil || errors.Is(err, hatchery.ErrSpawnedBefore) && !info.State.Final() {
		m.viewLocked(info)
	}
	m.mu.Unlock()
	if err == nil && m.crashed("chick spawned") {
		return agent.Result{}, errors.New("crashed")
	}
	var refused *hatchery.RefusedError
	switch {
	case errors.Is(err, hatchery.ErrSpawnedBefore):
		m.logger.Info("spawn_chick asked again for a chick hatched before a restart; not hatching another", "chick", info.ID, "channel", ri.QualifiedChannel(), "state", info.State)
		return agent.Result{Text: m.spawnedBefore(info)}, nil
	case errors.Is(err, hatchery.ErrQueueFull):
		return agent.Result{Text: "Not started: every chick slot is busy and the queue is full. Tell the user to try again later.", IsError: true}, nil
	case errors.Is(err, hatchery.ErrImageMissing):
		return agent.Result{Text: "Not started: " + strings.TrimPrefix(err.Error(), "spawn chick: ") + ". Tell the user plainly that no chick can start until the operator does that; do not try again before then, and do what you can yourself.", IsError: true}, nil
	case errors.Is(err, hatchery.ErrImageIncompatible):
		return agent.Result{Text: "Not started: " + strings.TrimPrefix(err.Error(), "spawn chick: "+hatchery.ErrImageIncompatible.Error()+": ") + ". Tell the user plainly, in those words, that no chick can start until the operator does that; do not try again before then, and do what you can yourself.", IsError: true}, nil
	case errors.Is(err, hatchery.ErrDisk):
		return agent.Result{Text: "Not started: " + strings.TrimPrefix(err.Error(), "spawn chick: ") + ". Tell the user plainly that no chick can start until the operator frees the disk (the admins have been told); do not try again before then, and do what you can yourself.", IsError: true}, nil
	case errors.As(err, &refused):
		return agent.Result{Text: "Not started, a per-person limit: " + refused.Reason + ". Tell the user which limit stopped it and when it frees up; do not try again before then.", IsError: true}, nil
	case err != nil:
		return agent.Result{}, err
	}
	m.logger.Info("chick spawned", "chick", info.ID, "channel", ri.QualifiedChannel(), "tier", info.Tier, "state", info.State)
	where := "It is starting now"
	if info.State == hatchery.StateQueued {
		where = "It is queued until a slot frees up"
	}
	return agent.Result{Text: fmt.Sprintf("Chick %s hatched (tier %s). %s; %s. Do not wait for it: tell the user briefly that it is on its way.", info.ID, info.Tier, where, m.chickEndsWith())}, nil
}

// chickEndsWith tells Mother's model what happens when a chick ends
// (chicks.results).
func (m *Mother) chickEndsWith() string {
	if m.cfg.Chicks.Results == config.ResultsRelay {
		return "its progress and result are posted to the channel when it ends"
	}
	return "its progress is shown in the channel, and when it ends its result comes back to you in a run of your own in this channel, to answer in your own words"
}

// chickSkillsTo checks spawn_chick's skills argument: "workspace" only
// for a run an admin asked for.
func chickSkillsTo(arg string, admin bool) (string, error) {
	switch arg {
	case "", "channel":
		return "", nil
	case "workspace":
		if !admin {
			return "", errors.New("spawn_chick: skills \"workspace\" refused: only an admin can ask for a chick whose skills go to the workspace; spawn it with skills \"channel\" or leave skills out")
		}
		return hatchery.SkillsToWorkspace, nil
	}
	return "", fmt.Errorf("spawn_chick: skills: %q is not \"channel\" or \"workspace\"", arg)
}

// chickHostTools are the host tools chicks may ask Mother to run.
func (m *Mother) chickHostTools() []prompt.HostTool {
	if m.chickHostToolsFn == nil {
		return nil
	}
	return m.chickHostToolsFn()
}

// chickPrompt is the chick's system prompt, built on Mother's side from
// what the chick receives (pkg/prompt, chick flavour).
func (m *Mother) chickPrompt(ri chat.RunInfo, a chat.Adapter) string {
	return prompt.Build(prompt.Input{
		Flavour:    prompt.Chick,
		Workspace:  m.store.Workspace(),
		ChannelDir: ri.ChannelDir,
		ChickRoot:  hatchery.Workspace,
		Channel:    ri.QualifiedChannel(),
		Users:      a.Users(),
		Channels:   a.Channels(),
		Now:        m.now(),
		HostTools:  m.chickHostTools(),
		Extra: []prompt.Section{{Title: "Outputs", Body: "Files you write under " + hatchery.Workspace + "/" + wire.OutputsDir +
			"/ are sent back to Mother when you end; attached files are posted to the channel. Everything else ends with your container."}},
	})
}

type listTool struct{ m *Mother }

func (listTool) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name:        "list_chicks",
		Description: "List the chicks of this channel that are running or queued (with all=true also the recently ended ones).",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"label":{"type":"string"},"all":{"type":"boolean"}}}`),
	}
}

func (t listTool) Run(ctx context.Context, args json.RawMessage) (agent.Result, error) {
	var in struct {
		All bool `json:"all"`
	}
	_ = json.Unmarshal(args, &in)
	ri, ok := chat.RunInfoFrom(ctx)
	if !ok {
		return agent.Result{}, errors.New("list_chicks: no channel in this run")
	}
	now := t.m.now()
	var b strings.Builder
	n := 0
	for _, c := range t.m.chicks.List(in.All) {
		if c.Adapter != ri.Adapter || c.ChannelID != ri.ChannelID {
			continue
		}
		n++
		fmt.Fprintf(&b, "- %s [%s, tier %s, %s old, %d tokens] %s", c.ID, c.State, c.Tier, now.Sub(c.CreatedAt).Round(time.Second), c.Usage.Total(), oneLine(c.Goal, 120))
		if c.Outcome != "" {
			b.WriteString(" -> " + c.Outcome)
		}
		b.WriteString("\n")
	}
	if n == 0 {
		return agent.Result{Text: "No chicks in this channel."}, nil
	}
	return agent.Result{Text: b.String()}, nil
}

type cancelTool struct{ m *Mother }

func (cancelTool) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name:        "cancel_chick",
		Description: "Cancel a chick of this channel by id (it is asked to stop, then killed after a grace period).",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"label":{"type":"string"},"id":{"type":"string"}},"required":["id"]}`),
	}
}

func (t cancelTool) Run(ctx context.Context, args json.RawMessage) (agent.Result, error) {
	var in struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(args, &in); err != nil || in.ID == "" {
		return agent.Result{}, errors.New("cancel_chick: id is required")
	}
	ri, ok := chat.RunInfoFrom(ctx)
	if !ok {
		return agent.Result{}, errors.New("cancel_chick: no channel in this run")
	}
	c, err := t.m.chicks.Get(in.ID)
	if err != nil || c.Adapter != ri.Adapter || c.ChannelID != ri.ChannelID {
		return agent.Result{}, fmt.Errorf("cancel_chick: no chick %q in this channel", in.ID)
	}
	who := ri.UserID
	if who == "" {
		who = "an event"
	}
	st, err := t.m.chicks.Stop(in.ID, hatchery.ReasonKilled, "cancelled at the request of "+who, t.m.cfg.Chicks.KillGrace.Duration)
	if err != nil {
		return agent.Result{}, err
	}
	if st.Final() {
		return agent.Result{Text: fmt.Sprintf("Chick %s had already ended (%s).", in.ID, c.Outcome)}, nil
	}
	return agent.Result{Text: fmt.Sprintf("Chick %s is being cancelled; its end will be posted to the channel.", in.ID)}, nil
}

// chickCanceller serves "stop all" with the hatchery's chicks.
type chickCanceller struct{ m *Mother }

var _ ChickCanceller = chickCanceller{}

// CancelChicks implements ChickCanceller: the live chicks of channel (of
// startedBy only, if set) are cancelled, then killed after the grace.
func (c chickCanceller) CancelChicks(_ context.Context, channel, startedBy string) (int, error) {
	n := 0
	var errs []error
	for _, in := range c.m.chicks.List(false) {
		if in.Channel != channel || (startedBy != "" && in.StartedBy != startedBy) {
			continue
		}
		st, err := c.m.chicks.Stop(in.ID, hatchery.ReasonKilled, "cancelled by stop all", c.m.cfg.Chicks.KillGrace.Duration)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !st.Final() {
			n++
		}
	}
	return n, errors.Join(errs...)
}
