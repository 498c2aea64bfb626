package chattest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
)

// The checks of what Mother needs from an adapter when her disk is full
// or failing: a message she could not store comes back (NotStored), and
// she can tell an admin privately (DirectMessages).

// Confirmer is a Platform that says whether the platform holds a message
// as handled by the adapter (Telegram: an update offset past it).
type Confirmer interface {
	Confirmed(t *testing.T, text string) bool
}

// DMReader is a Platform that names a user the adapter may write to
// directly and lists what that user got from Mother in private.
type DMReader interface {
	Admin() string
	DirectMessages(t *testing.T, userID string) []string
}

func checkNotStored(t *testing.T, h Harness) {
	p, in := started(t, h)
	p.Send(t, Incoming{Channel: p.Channel(), Text: "first, taken", Mention: true})
	in.wait(t, "the first message", withText("first, taken"))
	in.mu.Lock()
	in.refuse, in.ready = "held while the disk is full", make(chan struct{})
	ready := in.ready
	in.mu.Unlock()
	p.Send(t, Incoming{Channel: p.Channel(), Text: "held while the disk is full", Mention: true})
	deadline := time.Now().Add(10 * time.Second)
	for in.refusals() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the adapter never delivered the message")
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.Send(t, Incoming{Channel: p.Channel(), Text: "sent after it", Mention: true})
	// Held: not delivered, nor the one after it, nor confirmed.
	time.Sleep(300 * time.Millisecond)
	if _, n := find(in.all(), "sent after it"); n != 0 {
		t.Errorf("the message sent after the one Mother could not store was delivered before it")
	}
	if c, ok := p.(Confirmer); ok && c.Confirmed(t, "held while the disk is full") {
		t.Errorf("the platform holds the message Mother could not store as handled")
	}
	in.mu.Lock()
	in.refuse = ""
	in.mu.Unlock()
	close(ready)
	got := in.wait(t, "the held message and the next", func(ds []Delivery) bool {
		return withText("held while the disk is full")(ds) && withText("sent after it")(ds)
	})
	var order []string
	for _, d := range got {
		order = append(order, d.Msg.Text)
	}
	_, held := find(got, "held while the disk is full")
	_, after := find(got, "sent after it")
	if held != 1 || after != 1 {
		t.Errorf("delivered %q; want the held message and the next once each", order)
	}
	for i, text := range order {
		if strings.Contains(text, "sent after it") && (i == 0 || !strings.Contains(order[i-1], "held while the disk is full")) {
			t.Errorf("delivered %q; want the held message first", order)
		}
	}
	if c, ok := p.(Confirmer); ok {
		deadline := time.Now().Add(10 * time.Second)
		for !c.Confirmed(t, "sent after it") {
			if time.Now().After(deadline) {
				t.Fatal("the messages delivered were never confirmed to the platform")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	t.Logf("refused %d time(s) before the disk came back", in.refusals())
}

func checkDirectMessages(t *testing.T, h Harness) {
	p, _ := started(t, h)
	dm, ok := p.Adapter().(chat.DirectMessenger)
	if !ok {
		t.Fatalf("the adapter is no chat.DirectMessenger; declare %s lacking", DirectMessages)
	}
	r := need[DMReader](t, p, DirectMessages)
	const text = "disk full: I cannot write /data (a test)"
	if err := dm.DirectMessage(t.Context(), r.Admin(), text); err != nil {
		t.Fatalf("DirectMessage: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := r.DirectMessages(t, r.Admin())
		if slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, text) }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the user's direct messages are %q; want the one sent", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, a := range p.Answers(t, p.Channel()) {
		if strings.Contains(a, text) {
			t.Errorf("the direct message was posted in the shared channel too")
		}
	}
}
