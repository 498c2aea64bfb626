package mother

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/store"
)

// In-flight markers: <data>/state/inflight/<adapter>/<channel>.json holds a
// channel's running and queued jobs, rewritten whenever they change; an
// idle channel's marker says it holds none. At start, a marker left behind
// with work in it (a crash, or a shutdown with work in flight) tells
// Mother what to resume and what to tell the channel; every marker read
// is then removed or rewritten.
//
// A marker changes three or four times per message, so it is rewritten in
// place (atomicfile.Overwrite: one write into the page cache, where a temp
// file and a rename cost a busy ext4 disk a data flush and two journalled
// directory changes each time) and not fsynced on every change: a killed
// process loses nothing (the page cache survives it), and the marker is
// fsynced store.FlushAfter after a change (its directory too while its
// name is new). A power loss within that second may leave the previous
// marker, or one that does not parse (moved aside at start): a message's
// job is in its own log.jsonl line as well (answering.go), found past the
// marker's LogEnd; at worst a restart notice is missed or a run is
// resumed whose answer was already posted.

type inflightFile struct {
	Adapter string        `json:"adapter"`
	Channel string        `json:"channel"`
	Running *inflightJob  `json:"running,omitempty"`
	Queued  []inflightJob `json:"queued,omitempty"`
	Updated time.Time     `json:"updated"`
	// LogEnd is the size of the channel's log.jsonl when this marker's
	// state was taken: every line marked MetaAnswering that ends at or
	// before it has its job here (or is done with); those after it are
	// jobs too (answering.go). Nil in markers from before it existed.
	LogEnd *int64 `json:"logEnd,omitempty"`
}

type inflightJob struct {
	Kind       JobKind              `json:"kind"`
	Trigger    *chat.ChannelMessage `json:"trigger,omitempty"`
	TriggerEnd int64                `json:"triggerEnd,omitempty"`
	Late       bool                 `json:"late,omitempty"`
	Event      string               `json:"event,omitempty"`
	Resumes    int                  `json:"resumes,omitempty"`
	// LogFrom: where in log.jsonl to look for the trigger when TriggerEnd
	// is 0 (the marker was written before the message was logged).
	LogFrom int64 `json:"logFrom,omitempty"`
	// Interrupted: a queued job whose run a restart cut off (it was
	// recovered and has not run again yet).
	Interrupted bool `json:"interrupted,omitempty"`
	// Graceful: a shutdown (not a crash) cut the run short; that does not
	// count towards the crash-loop guard.
	Graceful bool `json:"graceful,omitempty"`
	// Chick: the ended chick a chick job answers (its report is the
	// trigger).
	Chick *ChickEnd `json:"chick,omitempty"`
}

func toInflight(j *Job) inflightJob {
	ij := inflightJob{Kind: j.kind(), Late: j.Late, Event: j.EventFile, Resumes: j.resumes, Interrupted: j.interrupted}
	if ij.Kind == KindMessage || ij.Kind == KindChick || ij.Kind == KindEvent && j.Trigger.ID != "" {
		// An event's line, once logged: what the restart notice looks up.
		t := j.Trigger
		ij.Trigger, ij.TriggerEnd, ij.LogFrom = &t, j.TriggerEnd, j.logFrom
		ij.Chick = j.Chick
	}
	return ij
}

func (m *Mother) inflightDir() string { return filepath.Join(m.store.DataDir(), "state", "inflight") }

func (m *Mother) inflightPath(adapter, channel string) string {
	return filepath.Join(m.inflightDir(), adapter, channel+".json")
}

// persist writes the channel's in-flight marker (or removes it when the
// channel is idle). Concurrent callers write in state order: a snapshot
// older than the last one written is dropped.
func (m *Mother) persist(cs *channelState) {
	// Read before the state: a line marked MetaAnswering that was
	// written before this read had its job reserved before it, so the
	// state below holds the job, or the job is done.
	logEnd := m.logEnd(cs)
	m.mu.Lock()
	seq := cs.seq
	f := inflightFile{Adapter: cs.adapter.Name(), Channel: cs.id, Updated: m.now(), LogEnd: logEnd}
	if run := cs.current; run != nil {
		ij := toInflight(run)
		f.Running = &ij
	} else if run := cs.interrupted; run != nil {
		ij := toInflight(run)
		ij.Graceful = true
		f.Running = &ij
	}
	for i := range cs.pending {
		f.Queued = append(f.Queued, toInflight(&cs.pending[i]))
	}
	if cs.incoming != nil {
		f.Queued = append(f.Queued, toInflight(cs.incoming))
	}
	m.mu.Unlock()

	cs.persistMu.Lock()
	defer cs.persistMu.Unlock()
	if seq < cs.written {
		return
	}
	cs.written = seq
	path := m.inflightPath(f.Adapter, f.Channel)
	idle := f.Running == nil && len(f.Queued) == 0
	if idle && !cs.marker {
		// No marker on disk, and none needed: nor a rewrite of one that
		// could not be written.
		cs.markerRewrite, cs.markerData = false, nil
		return
	}
	b, _ := json.Marshal(f)
	if !cs.marker {
		if err := fsync.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			m.logger.Error("cannot write in-flight marker; a crash now would not be reported", "channel", cs.qid(), "err", err)
			return
		}
	}
	if !cs.marker || max(cs.markerLen, len(b)) > os.Getpagesize() {
		cs.markerNamed = false // a new file, or replaced through a rename
	}
	cs.markerData = b
	if err := atomicfile.Overwrite(path, b, 0o600); err != nil {
		m.logger.Error("cannot write in-flight marker; a crash now would not be reported", "channel", cs.qid(), "err", err)
		// Written again, whole, before its next fsync.
		cs.markerRewrite = true
		m.armMarkerFlush(cs, path)
		return
	}
	cs.marker = true
	cs.markerLen = max(cs.markerLen, len(b)) // padded to the old length
	if len(b) > os.Getpagesize() {
		cs.markerLen = len(b)
	}
	m.armMarkerFlush(cs, path)
}

// armMarkerFlush arms the fsync of the channel's marker, store.FlushAfter
// from now, unless one is pending. A failed fsync is never retried on what
// the file holds (fsyncgate: the kernel may have dropped the page it could
// not write and marked it clean): the marker is written again, whole, from
// the last state (markerData), then fsynced, FlushAfter later, until that
// works. Caller holds cs.persistMu.
func (m *Mother) armMarkerFlush(cs *channelState, path string) {
	if cs.markerFlush != nil {
		return
	}
	cs.markerFlush = clock.Real{}.AfterFunc(store.FlushAfter, func() {
		cs.persistMu.Lock()
		defer cs.persistMu.Unlock()
		cs.markerFlush = nil
		err := error(nil)
		if cs.markerRewrite {
			err = atomicfile.Overwrite(path, cs.markerData, 0o600)
		}
		switch {
		case err != nil:
		case cs.markerNamed && !cs.markerRewrite:
			// Its name is durable: the file's content is what is new.
			err = syncMarkerFile(path)
		default:
			err = syncMarker(path)
		}
		if err != nil {
			if !cs.markerRewrite {
				m.logger.Warn("cannot fsync in-flight marker; writing it again whole until it can be", "channel", cs.qid(), "err", err)
			}
			cs.markerRewrite = true
			if m.ctx.Err() == nil {
				m.armMarkerFlush(cs, path)
			} // stopped: not again; the next start recovers from what the log holds
			return
		}
		cs.markerNamed, cs.markerKept = true, true // syncMarker fsyncs the file, then its directory
		if cs.markerRewrite {
			m.logger.Info("in-flight marker written and fsynced again after a failure", "channel", cs.qid())
			cs.markerRewrite, cs.marker = false, true
		}
	})
}

// syncInflightNow makes the channel's in-flight marker durable now, as
// written last: answerChickEnd calls it for a chick's result, whose job
// the marker names, before the report's line goes into log.jsonl, and
// markerOnDisk before a channel's first answering line (a message's job
// is otherwise carried by its own line: answering.go). Left to the
// deferred fsync, a power cut in that second kept the line and lost its
// job (the power-cut soak, issue 35). One fsync of the file; the
// directory's too while the marker's name is new.
func (m *Mother) syncInflightNow(cs *channelState) error {
	cs.persistMu.Lock()
	defer cs.persistMu.Unlock()
	if !cs.marker {
		return nil
	}
	path := m.inflightPath(cs.adapter.Name(), cs.id)
	if cs.markerRewrite {
		// Its last write or fsync failed: what the file holds is not
		// trusted (fsyncgate). Written again, whole, then fsynced.
		if err := atomicfile.Overwrite(path, cs.markerData, 0o600); err != nil {
			return err
		}
		cs.markerNamed = false
	}
	if !cs.markerNamed {
		if err := syncMarker(path); err != nil {
			cs.markerRewrite = true
			return err
		}
		cs.markerNamed, cs.markerKept, cs.markerRewrite = true, true, false
		return nil
	}
	if err := syncMarkerFile(path); err != nil {
		cs.markerRewrite = true
		return err
	}
	return nil
}

// syncMarkerFile fsyncs the marker at path, if it is there; not its
// directory.
func syncMarkerFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return errors.Join(fsync.File(f, fsync.KindInflight), f.Close())
}

// syncMarker fsyncs the marker at path, if it is there, and its directory.
func syncMarker(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := syncMarkerFile(path); err != nil {
		return err
	}
	return fsync.Dir(filepath.Dir(path))
}

// restartNotice is what one channel is told after a restart.
type restartNotice struct {
	adapter chat.Adapter
	channel string
	text    string
}

// recoverInflight reads the markers left by the previous process, queues
// the message jobs to resume (runners wait for Start to finish) and
// returns the notices to post. Caller: Start, before adapters start.
func (m *Mother) recoverInflight() []restartNotice {
	root := m.inflightDir()
	adapters, err := os.ReadDir(root)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			m.logger.Error("cannot read in-flight markers", "err", err)
		}
		return nil
	}
	var notices []restartNotice
	for _, ad := range adapters {
		files, _ := os.ReadDir(filepath.Join(root, ad.Name()))
		for _, fe := range files {
			if !strings.HasSuffix(fe.Name(), ".json") || strings.HasPrefix(fe.Name(), ".") {
				continue
			}
			path := filepath.Join(root, ad.Name(), fe.Name())
			if n, ok := m.recoverOne(path); ok {
				notices = append(notices, n)
			}
		}
	}
	sort.Slice(notices, func(i, j int) bool {
		return chat.QualifiedID(notices[i].adapter.Name(), notices[i].channel) < chat.QualifiedID(notices[j].adapter.Name(), notices[j].channel)
	})
	return notices
}

func (m *Mother) recoverOne(path string) (restartNotice, bool) {
	b, err := os.ReadFile(path)
	if err == nil && len(bytes.TrimSpace(b)) == 0 {
		// Created, and the process ended before its first write.
		_ = os.Remove(path)
		return restartNotice{}, false
	}
	var f inflightFile
	if err == nil {
		err = json.Unmarshal(b, &f)
	}
	if err != nil {
		m.logger.Error("unreadable in-flight marker; moved aside", "path", path, "err", err)
		_ = os.Rename(path, path+".bad")
		return restartNotice{}, false
	}
	lg := m.logger.With("channel", chat.QualifiedID(f.Adapter, f.Channel))
	a, ok := m.Adapter(f.Adapter)
	if !ok || store.ValidName(f.Channel) != nil {
		lg.Warn("in-flight work for an adapter that is not configured; kept for when it is", "path", path)
		return restartNotice{}, false
	}
	var resumed, lost, evs, carried []string
	var jobs []Job
	add := func(ij inflightJob, wasRunning bool) {
		if ij.Kind == KindEvent {
			if ij.Trigger != nil && m.loggedAnswer(lg, a, f.Channel, *ij.Trigger, ij.TriggerEnd) != nil {
				// Answered, and a power cut took the marker's last word:
				// the events watcher may offer it again, and Mother finds
				// the answer (resumeEvent); nothing to tell.
				return
			}
			state := "was waiting"
			if wasRunning {
				state = "was cut off"
			}
			evs = append(evs, fmt.Sprintf("The event %s %s; it runs again.", ij.Event, state))
			return
		}
		if ij.Trigger == nil || ij.Kind == KindChick && ij.Chick == nil {
			return
		}
		who := describe(*ij.Trigger)
		if ij.Kind == KindChick {
			who = "chick " + ij.Chick.ID + "'s result"
			carried = append(carried, ij.Chick.ID)
		}
		if ij.TriggerEnd == 0 {
			ij.TriggerEnd = m.findTrigger(lg, f.Adapter, f.Channel, ij)
		}
		if ans := m.loggedAnswer(lg, a, f.Channel, *ij.Trigger, ij.TriggerEnd); ans != nil {
			// Its answer is in log.jsonl, fsynced before the marker could
			// say the job was done: the crash came after the answer, so
			// the channel is told nothing. The job is queued all the
			// same, and its run (answeredBefore) only keeps the context
			// in step with the log.
			jobs = append(jobs, Job{Kind: ij.Kind, Trigger: *ij.Trigger, TriggerEnd: ij.TriggerEnd, Chick: ij.Chick, recovered: true, answer: ans})
			return
		}
		if wasRunning && ij.Resumes >= 1 && !ij.Graceful {
			if ij.Kind == KindChick {
				// The result itself is not lost: it is posted as it came.
				lost = append(lost, fmt.Sprintf("My answer to %s was cut off by a restart twice, so here it is as it came:\n\n%s", who, ij.Chick.Relay))
				return
			}
			lost = append(lost, fmt.Sprintf("Lost: my answer to %s was cut off by a restart twice, so I am not trying again. Ask again if you still need it.", who))
			return
		}
		j := Job{Kind: KindMessage, Trigger: *ij.Trigger, TriggerEnd: ij.TriggerEnd, Late: true,
			LateNote: "(Late answer: I restarted before I could answer this.)", resumes: ij.Resumes, recovered: true}
		if ij.Kind == KindChick {
			j.Kind, j.Chick, j.Title = KindChick, ij.Chick, "chick "+ij.Chick.ID
			j.LateNote = "(Late answer: I restarted before I could answer this chick's result.)"
		}
		if wasRunning || ij.Interrupted {
			// Cut off by this restart (running), or by an earlier one and
			// not run again since (queued, interrupted).
			j.interrupted = true
			if wasRunning && !ij.Graceful {
				j.resumes++
			}
			j.LateNote = "(Resumed after a restart.)"
			resumed = append(resumed, fmt.Sprintf("Resuming my answer to %s, which was cut off.", who))
		} else {
			resumed = append(resumed, fmt.Sprintf("Answering %s, which was waiting.", who))
		}
		jobs = append(jobs, j)
	}
	known := map[string]bool{}
	if f.Running != nil {
		add(*f.Running, true)
		if f.Running.Trigger != nil {
			known[f.Running.Trigger.ID] = true
		}
	}
	for _, q := range f.Queued {
		add(q, false)
		if q.Trigger != nil {
			known[q.Trigger.ID] = true
		}
	}
	if f.LogEnd != nil {
		for _, q := range m.recoverUnmarked(lg, f.Adapter, f.Channel, *f.LogEnd, known) {
			add(q, false)
		}
	}
	lines := append(append(append([]string{}, resumed...), evs...), lost...)
	if len(lines) == 0 && len(jobs) == 0 {
		_ = os.Remove(path)
		return restartNotice{}, false
	}
	m.mu.Lock()
	cs := m.channelFor(a, f.Channel)
	for _, j := range jobs {
		m.pushLocked(cs, j) // past the queue limits: nothing recovered is dropped
	}
	m.mu.Unlock()
	m.persist(cs)
	m.chicksCarried(carried)
	lg.Info("recovered in-flight work after a restart", "resumed", len(jobs), "events", len(evs), "lost", len(lost))
	if len(lines) == 0 {
		return restartNotice{}, false
	}
	text := "I restarted (after a crash or an upgrade) while I had work in this channel.\n- " + strings.Join(lines, "\n- ")
	return restartNotice{adapter: a, channel: f.Channel, text: text}, true
}

// chicksCarried takes over the chick ends an in-flight marker carried
// over a restart (their answer runs are queued again, and the marker
// rewritten with them, or their results are in the restart notice): the
// marker, not the hatchery, owns them now. The crash may have come before
// the previous process told the hatchery so (answerChickEnd tells it only
// once the run is in the marker), so the hatchery may still hold them as
// unreported. They are marked ended, so an announcement of them in this
// process is dropped, and the hatchery is told they were reported, so it
// does not announce them at all (Mother starts before the hatchery
// reconciles) nor at any later start. Without this, an announcement that
// came after the recovered run had answered, or at the next start, was
// answered a second time.
func (m *Mother) chicksCarried(ids []string) {
	if len(ids) == 0 {
		return
	}
	m.mu.Lock()
	for _, id := range ids {
		m.markEndedLocked(id)
	}
	m.mu.Unlock()
	if m.chicks == nil {
		return
	}
	for _, id := range ids {
		m.chicks.Reported(id)
	}
}

// loggedAnswer is Mother's answer to a recovered job's trigger that the
// channel's log.jsonl holds after from (her message replying to it), or
// nil: looked up once, when the job is recovered.
func (m *Mother) loggedAnswer(lg *slog.Logger, a chat.Adapter, channel string, trigger chat.ChannelMessage, from int64) *chat.ChannelMessage {
	ch, err := m.store.Channel(a.Name(), channel)
	if err != nil {
		return nil
	}
	self := a.SelfID()
	lm, found, err := ch.FindMessage(from, func(msg chat.ChannelMessage) bool {
		return answers(msg, self, trigger.ID)
	})
	if err != nil {
		lg.Warn("cannot look for a recovered job's answer in the log; resuming it", "msg_id", trigger.ID, "err", err)
		return nil
	}
	if !found {
		return nil
	}
	return &lm.Msg
}

// findTrigger returns the end offset in log.jsonl of the message of a job
// written to the marker before its message was logged: found in the log,
// or logged now if the crash came first (the adapter had handed it over,
// so it is Mother's to keep). 0 if the log cannot be read or written: the
// run then reads the whole log.
func (m *Mother) findTrigger(lg *slog.Logger, adapter, channel string, ij inflightJob) int64 {
	ch, err := m.store.Channel(adapter, channel)
	if err != nil {
		lg.Error("cannot open channel store to find a recovered message", "msg_id", ij.Trigger.ID, "err", err)
		return 0
	}
	lm, ok, err := ch.FindMessage(ij.LogFrom, func(msg chat.ChannelMessage) bool { return msg.ID == ij.Trigger.ID })
	if err != nil {
		lg.Error("cannot look for a recovered message in the log", "msg_id", ij.Trigger.ID, "err", err)
		return 0
	}
	if !ok {
		if lm, err = ch.AppendMessage(*ij.Trigger); err != nil {
			lg.Error("cannot log a recovered message", "msg_id", ij.Trigger.ID, "err", err)
			return 0
		}
		lg.Info("logged a message the previous process had received but not logged", "msg_id", ij.Trigger.ID)
	}
	return lm.End
}

// describe names a message for a notice: @user ("first words…").
func describe(msg chat.ChannelMessage) string {
	name := msg.Sender.Username
	if name == "" {
		name = msg.Sender.ID
	}
	text := strings.Join(strings.Fields(msg.Text), " ")
	if r := []rune(text); len(r) > 60 {
		text = string(r[:60]) + "…"
	}
	return fmt.Sprintf("@%s (%q)", name, text)
}
