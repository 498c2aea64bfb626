package mother

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/hatchery"
)

// Results Mother answers herself (chicks.results "answer"): when a chick
// ends, its report (outcome, goal, files, result) is logged in the channel
// as a message from the "chick" sender and a KindChick job is queued in
// the channel like an event's run. Mother's own model reads the report in
// its context and answers in her own words; the chick's usage line is
// added to her answer, and a long result is attached as a file after it.
// The job is in the channel's in-flight marker before the report is
// logged (as a message's is), and the hatchery is told the end was
// reported only then: a crash at any point leaves an unreported chick
// (announced again at start), a marker (resumed at start), or, between
// the two writes, both: then the marker answers it, and the chick is
// marked reported and its announcements dropped (chicksCarried), so it is
// answered once.

// ChickSenderID is the sender id of chick reports in log.jsonl.
const ChickSenderID = "chick"

// LongResult is the length, in characters, above which a chick's result is
// attached to Mother's answer as a file: about what one chat message holds
// (Discord's limit is 2,000), so she quotes and the file has it all.
const LongResult = 2000

// ChickEnd is what a KindChick job needs besides its logged report; it is
// kept in the in-flight marker.
type ChickEnd struct {
	ID string `json:"id"`
	// StartedBy is the user who asked for the chick: the run acts for
	// them (a chick it spawns is theirs).
	StartedBy string `json:"startedBy,omitempty"`
	// Usage is the usage line added to Mother's answer.
	Usage string `json:"usage"`
	// Relay is the result as relay mode posts it: posted instead of an
	// answer when her run gives none (an error, a stop, silence).
	Relay string `json:"relay"`
	// File is the full result's path relative to the channel directory
	// when it is long (attached after the answer); "" otherwise.
	File string `json:"file,omitempty"`
}

// answerChickEnd queues Mother's run on a chick's result. If it cannot be
// queued (the log cannot be written) the result is relayed as is.
func (m *Mother) answerChickEnd(ctx context.Context, v *chickView, in hatchery.Info) {
	lg := m.logger.With("channel", chat.QualifiedID(v.adapter.Name(), v.channel), "chick", in.ID)
	if v.reply != nil {
		// The progress view gives way to her answer (an empty finish
		// removes it).
		if _, err := v.reply.Finish(ctx, ""); err != nil {
			lg.Warn("cannot close the chick's progress view", "err", err)
		}
		v.reply = nil // a fallback to relay posts a new one
	}
	_, cs, err := m.state(v.adapter.Name(), v.channel)
	if err != nil {
		lg.Error("cannot queue the answer to a chick's result; posting it as is", "err", err)
		m.relayChickEnd(ctx, v, in)
		return
	}
	ch, err := m.store.Channel(v.adapter.Name(), v.channel)
	if err != nil {
		lg.Error("cannot open the channel store; posting the chick's result as is", "err", err)
		m.relayChickEnd(ctx, v, in)
		return
	}
	end := &ChickEnd{ID: in.ID, StartedBy: in.StartedBy, Usage: chickUsage(in), Relay: chickSummary(in, v.files)}
	result := chickResultText(in)
	if utf8.RuneCountInString(result) > LongResult {
		rel := filepath.Join("scratch", "chicks", in.ID, "result.md")
		path := filepath.Join(ch.Dir(), rel)
		err := fsync.MkdirAll(filepath.Dir(path), 0o700)
		if err == nil {
			err = atomicfile.WriteFile(path, []byte(result+"\n"), 0o600)
		}
		if err != nil {
			lg.Error("cannot store the chick's long result as a file; answering without it", "err", err)
		} else {
			end.File = rel
		}
	}
	msg := chat.ChannelMessage{
		ID: m.newID(), ChannelID: v.channel, Timestamp: m.now(),
		Sender:      chat.Sender{ID: ChickSenderID, Username: "chick " + in.ID, IsBot: true},
		Text:        chickReport(in, v.attached, v.files, end.File),
		Attachments: []chat.ChannelAttachment{},
	}
	job := Job{Kind: KindChick, Trigger: msg, Title: "chick " + in.ID, Chick: end}
	cs.order.Lock()
	m.mu.Lock()
	dup := chickJobLocked(cs, in.ID)
	m.mu.Unlock()
	if dup {
		// Carried over a crash by the in-flight marker, and announced
		// again by the hatchery: it is being answered already.
		cs.order.Unlock()
		lg.Info("the chick's result is already queued or being answered")
		if m.chicks != nil {
			m.chicks.Reported(in.ID)
		}
		return
	}
	if err := m.reserve(cs, ch, &job); err != nil {
		cs.order.Unlock()
		// Only a shutdown refuses it: the hatchery announces the chick
		// again at the next start.
		lg.Info("shutting down; the chick's result is answered after the restart", "err", err)
		return
	}
	// Durable before the report's line and before the hatchery is told
	// the end was reported (as a message's job, Deliver): left to the
	// marker's deferred fsync, a power cut after Reported's fsync lost
	// the job and left the hatchery with nothing to announce again.
	if err := m.syncInflightNow(cs); err != nil {
		lg.Warn("cannot fsync in-flight marker; a power cut now could leave this chick's result unanswered", "err", err)
	}
	if m.crashed("chick reserved") {
		cs.order.Unlock()
		return
	}
	lm, err := ch.AppendMessage(msg)
	if err != nil {
		m.unreserve(cs)
		cs.order.Unlock()
		lg.Error("cannot log the chick's result; posting it as is", "err", err)
		m.relayChickEnd(ctx, v, in)
		return
	}
	if m.crashed("chick logged") {
		cs.order.Unlock()
		return
	}
	job.TriggerEnd = lm.End
	m.chargeReport(in, msg.Text)
	if err := m.queue(cs, job); err != nil {
		lg.Info("shutting down; the answer to the chick's result is kept for the next start")
	}
	cs.order.Unlock()
	// The job is in the marker from here on: the marker, not the
	// hatchery, carries it over a crash.
	if m.chicks != nil {
		m.chicks.Reported(in.ID)
	}
}

// chickJobLocked reports whether the channel holds a job answering chick
// id. Caller holds m.mu.
func chickJobLocked(cs *channelState, id string) bool {
	is := func(j *Job) bool { return j != nil && j.Chick != nil && j.Chick.ID == id }
	if is(cs.current) || is(cs.interrupted) || is(cs.incoming) {
		return true
	}
	for i := range cs.pending {
		if is(&cs.pending[i]) {
			return true
		}
	}
	return false
}

// chickResultText is the chick's final message, trimmed.
func chickResultText(in hatchery.Info) string {
	if in.Result == nil {
		return ""
	}
	return strings.TrimSpace(in.Result.Text)
}

// chickOutcome says how a chick ended: "done", or its state, reason and
// what happened ("killed (hung): missed its heartbeats").
func chickOutcome(in hatchery.Info) string {
	if in.Reason == hatchery.ReasonDone {
		return "done"
	}
	s := string(in.State)
	if in.Reason != "" && string(in.Reason) != s {
		s += " (" + string(in.Reason) + ")"
	}
	if o := strings.TrimSuffix(strings.TrimSpace(in.Outcome), "."); o != "" {
		s += ": " + o
	}
	return s
}

// chickReport is the report Mother's model reads: what the chick was
// asked, how it ended, its files and its result. It is logged, so later
// runs have it in their context for follow-ups.
func chickReport(in hatchery.Info, attached, saved []string, file string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[chick %s ended] Outcome: %s.\nGoal: %s", in.ID, chickOutcome(in), oneLine(in.Goal, 300))
	if len(attached) > 0 {
		names := make([]string, 0, foldNames)
		for _, a := range attached[:min(len(attached), foldNames)] {
			names = append(names, clipName(a))
		}
		b.WriteString("\nFiles it attached (already posted to the channel): " + nameList(names, len(attached)))
	}
	if len(saved) > 0 {
		b.WriteString("\nFiles it saved in this channel's directory: " + fileList(in.ID, saved))
	}
	result := chickResultText(in)
	if file != "" {
		fmt.Fprintf(&b, "\nIts full result (%d characters) is attached to your answer as `%s`.", utf8.RuneCountInString(result), file)
	}
	switch {
	case result == "" && in.Reason == hatchery.ReasonDone:
		b.WriteString("\n\nIt finished without a final message.")
	case result == "":
		b.WriteString("\n\nIt left no final message.")
	case in.Reason == hatchery.ReasonDone:
		b.WriteString("\n\nResult:\n" + reportResult(result, file))
	default:
		b.WriteString("\n\nIts last words:\n" + reportResult(result, file))
	}
	b.WriteString("\n\nTell the channel what this chick found, in your own words: what matters first, quoting the key parts. ")
	if in.Reason != hatchery.ReasonDone {
		b.WriteString("Say plainly that it did not finish, and why. ")
	}
	b.WriteString("Its attached files are already posted and its usage line is added to your answer.")
	return b.String()
}

// maxReportResult bounds, in characters, the result a report holds when
// the whole is in a file attached to her answer: enough to answer from,
// about 2,000 tokens.
const maxReportResult = 8000

// reportResult is result as a report holds it: whole, or its first
// maxReportResult characters when the whole is in file.
func reportResult(result, file string) string {
	if file == "" || utf8.RuneCountInString(result) <= maxReportResult {
		return result
	}
	return string([]rune(result)[:maxReportResult]) + fmt.Sprintf("\n[… cut here: the whole is in `%s`]", file)
}

// chickAnswer turns the outcome of Mother's run on a chick's result into
// what is posted: her answer with the chick's usage line; when her run
// gives no answer (an error, a stop, silence) the result as it came, so it
// is never lost. A run cut off by a shutdown keeps its notice (it resumes
// after the restart). It is pure.
func chickAnswer(out agent.Output, c *ChickEnd, final string, silent, stopped, shutdown bool) string {
	switch {
	case out.StopReason == agent.StopAborted && shutdown:
		return final
	case out.StopReason == agent.StopDone && !silent && final != "":
		return final + "\n\n" + c.Usage
	case out.StopReason == agent.StopDone || stopped && out.StopReason == agent.StopAborted:
		return c.Relay
	}
	return joinNonEmpty(final, "Here is chick "+c.ID+"'s result as it came:\n\n"+c.Relay)
}

// attachChickResult posts a long result's file after Mother's answer (or
// says where it is, on a platform without uploads).
func (m *Mother) attachChickResult(ctx context.Context, a chat.Adapter, ch string, dir string, c *ChickEnd) {
	if c == nil || c.File == "" {
		return
	}
	ctx = context.WithoutCancel(ctx)
	title := "chick " + c.ID + " result.md"
	up, ok := a.(chat.Uploader)
	if !ok {
		m.post(ctx, a, ch, fmt.Sprintf("The full result of chick %s is stored at `%s`.", c.ID, c.File))
		return
	}
	if err := up.Upload(ctx, ch, filepath.Join(dir, c.File), title); err != nil {
		m.logger.Error("cannot post the chick's full result", "chick", c.ID, "err", err)
		m.post(ctx, a, ch, fmt.Sprintf("I could not post the full result of chick %s; it is stored at `%s`.", c.ID, c.File))
		return
	}
	m.metrics.MessageOut(a.Name())
}
