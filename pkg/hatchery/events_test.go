package hatchery_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/hatchery"
)

// TestRecordEventsBatches: batches share the chick's encoding buffer; an
// event that cannot be encoded stores and acknowledges the ones before it
// and nothing of itself, and the next batch (larger than the buffer kept
// between batches) is stored whole, every line as written.
func TestRecordEventsBatches(t *testing.T) {
	t.Parallel()
	h, id := runningFakeChick(t)
	tool := func(seq uint64, args string) hatchery.SeqEvent {
		return hatchery.SeqEvent{Seq: seq, Event: agent.Event{Type: agent.EventToolStart, ToolName: "read", Label: fmt.Sprint("call ", seq), Args: json.RawMessage(args)}}
	}
	ack, err := h.RecordEvents(id, []hatchery.SeqEvent{tool(1, `{"a":1}`), tool(2, `{"a":2}`), tool(3, `{not json`), tool(4, `{}`)})
	if err == nil || ack != 2 {
		t.Fatalf("RecordEvents with a bad third event = %d, %v; want ack 2 and an error", ack, err)
	}
	// A batch of large events: more than the buffer a chick keeps.
	big := string(make([]byte, 4096))
	var batch []hatchery.SeqEvent
	for seq := uint64(3); seq < 103; seq++ {
		ev := tool(seq, `{}`)
		ev.Event.Result = big
		batch = append(batch, ev)
	}
	ack, err = h.RecordEvents(id, batch)
	if err != nil || ack != 102 {
		t.Fatalf("RecordEvents of 100 large events = %d, %v; want 102, nil", ack, err)
	}
	ack, err = h.RecordEvents(id, []hatchery.SeqEvent{tool(103, `{"b":true}`)})
	if err != nil || ack != 103 {
		t.Fatalf("RecordEvents after the large batch = %d, %v; want 103, nil", ack, err)
	}
	var got []hatchery.StoredEvent
	must(t, h.FollowEvents(t.Context(), id, false, func(se hatchery.StoredEvent) error {
		got = append(got, se)
		return nil
	}))
	if len(got) != 103 {
		t.Fatalf("stored %d events, want 103", len(got))
	}
	for i, se := range got {
		if se.Seq != uint64(i+1) || se.Event.Label != fmt.Sprint("call ", i+1) {
			t.Fatalf("stored event %d = seq %d %q, want seq %d", i, se.Seq, se.Event.Label, i+1)
		}
	}
	if string(got[0].Event.Args) != `{"a":1}` || string(got[102].Event.Args) != `{"b":true}` || len(got[50].Event.Result) != len(big) {
		t.Fatalf("stored events differ from those recorded: %s, %s, result of %d bytes", got[0].Event.Args, got[102].Event.Args, len(got[50].Event.Result))
	}
}

// TestWriteEventsBeforeTheirCommit: batches written but not yet committed
// are not written twice when resent; the ack is only what a commit made
// durable, never less than before, whichever order commits return in; a
// gap is reported after the events before it are written.
func TestWriteEventsBeforeTheirCommit(t *testing.T) {
	t.Parallel()
	h, id := runningFakeChick(t)
	ev := func(seq uint64) hatchery.SeqEvent {
		return hatchery.SeqEvent{Seq: seq, Event: agent.Event{Type: agent.EventToolStart, ToolName: "bash", Label: fmt.Sprint("step ", seq)}}
	}
	w1, gap, err := h.WriteEvents(id, []hatchery.SeqEvent{ev(1), ev(2), ev(3)})
	if err != nil || gap != nil || w1.Seq != 3 || w1.Acked != 0 {
		t.Fatalf("first write = %+v, %v, %v", w1, gap, err)
	}
	if last, _ := h.LastSeq(id); last != 0 {
		t.Fatalf("LastSeq %d before any commit, want 0", last)
	}
	// A resend of 2 and 3 with 4 and 5: only 4 and 5 are new.
	w2, gap, err := h.WriteEvents(id, []hatchery.SeqEvent{ev(2), ev(3), ev(4), ev(5)})
	if err != nil || gap != nil || w2.Seq != 5 || w2.End <= w1.End {
		t.Fatalf("second write = %+v (first %+v), %v, %v", w2, w1, gap, err)
	}
	if ack, err := h.CommitEvents(id, w2); err != nil || ack != 5 {
		t.Fatalf("commit of the second write = %d, %v; want 5", ack, err)
	}
	// The first write's commit returning late does not take the ack back.
	if ack, err := h.CommitEvents(id, w1); err != nil || ack != 5 {
		t.Fatalf("late commit of the first write = %d, %v; want 5", ack, err)
	}
	w3, gap, err := h.WriteEvents(id, []hatchery.SeqEvent{ev(6), ev(8)})
	if err != nil || gap == nil || w3.Seq != 6 {
		t.Fatalf("write with a gap = %+v, %v, %v; want 6 written and a gap", w3, gap, err)
	}
	if ack, err := h.CommitEvents(id, w3); err != nil || ack != 6 {
		t.Fatalf("commit before the gap = %d, %v; want 6", ack, err)
	}
	var got []uint64
	must(t, h.FollowEvents(t.Context(), id, false, func(se hatchery.StoredEvent) error {
		got = append(got, se.Seq)
		return nil
	}))
	if fmt.Sprint(got) != "[1 2 3 4 5 6]" {
		t.Fatalf("stored %v, want 1..6 once each", got)
	}
}
