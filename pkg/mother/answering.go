package mother

import (
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"maps"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/jsonl"
)

// The log's own lines are the in-flight marker of a message to answer
// (issue 45). A message Mother takes a job for is logged with
// MetaAnswering set, and the line's fsync (which the adapter's
// acknowledgement waits for) makes the message and its job durable in
// one: the marker is not fsynced per message, only once per channel and
// process (markerOnDisk) and then within store.FlushAfter of a change.
// A restart reads each channel's marker, whatever version of it a power
// cut left, and takes as queued jobs the answering lines logged after the
// marker's LogEnd that the marker does not name (recoverUnmarked): a line
// before LogEnd has its job in that marker or is done with.

// MetaAnswering marks, in log.jsonl, the line of a message Mother took a
// job for (its value is true). Lines without it (another bot's message,
// a refused DM, a stop, a message past a full queue) are not answered
// after a restart.
const MetaAnswering = "answering"

// answeringLine is msg as logged with its job: MetaAnswering set in a
// copy of its metadata (msg, the job's trigger, keeps its own).
func answeringLine(msg chat.ChannelMessage) chat.ChannelMessage {
	md := make(map[string]any, len(msg.Metadata)+1)
	maps.Copy(md, msg.Metadata)
	md[MetaAnswering] = true
	msg.Metadata = md
	return msg
}

// withoutAnswering is a logged line as the message it was delivered as.
func withoutAnswering(msg chat.ChannelMessage) chat.ChannelMessage {
	if _, ok := msg.Metadata[MetaAnswering]; !ok {
		return msg
	}
	md := maps.Clone(msg.Metadata)
	delete(md, MetaAnswering)
	if len(md) == 0 {
		md = nil
	}
	msg.Metadata = md
	return msg
}

// markerOnDisk makes sure, before the line of a message to answer is
// written, that a restart will find the channel's marker: fsynced (file
// and directory) once by this process, and again only after a write or
// fsync of it failed. Every later message costs the marker no fsync: the
// answering line carries its job.
func (m *Mother) markerOnDisk(cs *channelState) error {
	cs.persistMu.Lock()
	done := cs.markerKept && !cs.markerRewrite
	cs.persistMu.Unlock()
	if done {
		return nil
	}
	return m.syncInflightNow(cs)
}

// logEnd is the size of the channel's log.jsonl, for the marker (nil if
// the channel's store cannot be opened: then nothing is logged in it).
func (m *Mother) logEnd(cs *channelState) *int64 {
	ch, err := m.store.Channel(cs.adapter.Name(), cs.id)
	if err != nil {
		return nil
	}
	n := ch.LogSize()
	return &n
}

// recoverUnmarked returns, as queued jobs, the answering lines of the
// channel's log from offset from on whose message ids known does not
// hold: their jobs were reserved after the marker a power cut left was
// written.
func (m *Mother) recoverUnmarked(lg *slog.Logger, adapter, channel string, from int64, known map[string]bool) []inflightJob {
	ch, err := m.store.Channel(adapter, channel)
	if err != nil {
		lg.Error("cannot open channel store to look for messages to answer", "err", err)
		return nil
	}
	size := ch.LogSize()
	if from < 0 || from > size {
		// The log was replaced or cut since: nothing after the marker.
		return nil
	}
	var jobs []inflightJob
	err = jsonl.Scan(ch.LogPath(), from, size, func(line []byte, start, end int64) error {
		var msg chat.ChannelMessage
		if json.Unmarshal(line, &msg) != nil {
			return nil
		}
		if v, _ := msg.Metadata[MetaAnswering].(bool); !v || known[msg.ID] {
			return nil
		}
		known[msg.ID] = true
		t := withoutAnswering(msg)
		jobs = append(jobs, inflightJob{Kind: KindMessage, Trigger: &t, TriggerEnd: end, LogFrom: start})
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		lg.Error("cannot read the log for messages to answer", "err", err)
	}
	if len(jobs) > 0 {
		lg.Info("messages to answer found in the log past the in-flight marker", "n", len(jobs))
	}
	return jobs
}
