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
