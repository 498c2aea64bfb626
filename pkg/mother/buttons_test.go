package mother

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/egress"
)

// These tests answer access requests with buttons through a recording
// adapter that has them (chooserAdapter); buttons_e2e_test.go does the
// same through the real Discord and Slack adapters and their fakes.

// click delivers a click on a button as the adapter would.
func (h *harness) click(channel, onMessage, value string, opts ...msgOpt) chat.ChannelMessage {
	msg := chat.ChannelMessage{
		ID: fmt.Sprintf("K%d", msgSeq.Add(1)), ChannelID: channel, Timestamp: time.Now(),
		Sender: chat.Sender{ID: "UMARIO", Username: "mario"}, Text: value, Attachments: []chat.ChannelAttachment{},
		ReplyTo: onMessage, Choice: true,
	}
	for _, o := range opts {
		o(&msg)
	}
	h.m.Deliver(h.t.Context(), "rec", msg, false)
	return msg
}

// request waits for the request posted with buttons.
func (a *accessHarness) request() rec {
	a.t.Helper()
	var r rec
	waitFor(a.t, "the request with buttons", func() bool {
		cs := a.ad.of("choices")
		if len(cs) > 0 {
			r = cs[len(cs)-1]
		}
		return len(cs) > 0
	})
	return r
}

func TestAccessButtonApproves(t *testing.T) {
	t.Parallel()
	a := newAccessHarness(t, withButtons())
	in := chickIn("c-7f3a91c2", "C1")
	res := a.ask(t.Context(), in, "pypi.org:443", "install the requests package")
	req := a.request()
	want := "🔐 chick `c-7f3a91c2` asks to reach `pypi.org:443`: install the requests package.\n" +
		"An admin answers `allow c-7f3a91c2` (this chick), `always c-7f3a91c2` (this channel, kept) or `deny c-7f3a91c2`."
	if req.Text != want || req.Channel != "C1" {
		t.Errorf("request posted in %s as\n%s\nwant (with the typed answers for clients without buttons)\n%s", req.Channel, req.Text, want)
	}
	wantChoices := []chat.Choice{
		{ID: "allow c-7f3a91c2 pypi.org:443", Label: "Allow this chick", Style: chat.ChoicePrimary},
		{ID: "always c-7f3a91c2 pypi.org:443", Label: "Always (this channel)"},
		{ID: "deny c-7f3a91c2 pypi.org:443", Label: "Deny", Style: chat.ChoiceDanger},
	}
	if !slices.Equal(req.Choices, wantChoices) {
		t.Errorf("buttons %+v, want %+v", req.Choices, wantChoices)
	}
	if n := len(a.ad.of("post")); n != 0 {
		t.Errorf("the request was also posted without buttons (%d posts)", n)
	}
	a.click("C1", req.ID, req.Choices[0].ID, from("UADMIN", "ana"))
	r := answer(t, res)
	if r.err != nil || !r.g.Granted || r.g.Scope != egress.ScopeChick || r.g.Message != "approved by @ana for this chick; "+egress.RefusesPrivate {
		t.Fatalf("RequestAccess = %+v, %v", r.g, r.err)
	}
	notice := "✅ @ana allowed chick `c-7f3a91c2` to reach `pypi.org:443` (this chick, until it ends)."
	a.posted(1, notice)
	var end rec
	waitFor(t, "the buttons taken away", func() bool {
		es := a.ad.of("end")
		if len(es) > 0 {
			end = es[0]
		}
		return len(es) > 0
	})
	if want := "🔐 chick `c-7f3a91c2` asks to reach `pypi.org:443`: install the requests package.\n" + notice; end.Text != want || end.ReplyTo != req.ID || end.Channel != "C1" {
		t.Errorf("buttons ended with %+v, want message %s to read\n%s", end, req.ID, want)
	}
	a.idle()
	if n := len(a.ad.of("finish")); n != 0 {
		t.Errorf("the model answered a click (%d replies)", n)
	}
	// The log holds the request (once) and the approval as Mother's, and
	// no line from the clicker: a click is not something said.
	var reqs int
	for _, l := range a.logged("C1") {
		if l.Sender.ID == "UADMIN" || l.Choice {
			t.Errorf("the click was logged as a message: %+v", l)
		}
		if strings.HasPrefix(l.Text, "🔐") {
			reqs++
			if l.ID != req.ID {
				t.Errorf("the request is logged under %s, not its platform id %s", l.ID, req.ID)
			}
		}
		if strings.HasPrefix(l.Text, "✅") && l.ReplyTo != req.ID {
			t.Errorf("the approval answers %q in the log, want the request %s", l.ReplyTo, req.ID)
		}
	}
	if reqs != 1 {
		t.Errorf("the request is logged %d times, want once:\n%s", reqs, a.loggedTexts("C1"))
	}
}

func TestAccessButtonAlwaysAndDeny(t *testing.T) {
	t.Parallel()
	a := newAccessHarness(t, withButtons())
	in := chickIn("c-11112222", "C1")
	res := a.ask(t.Context(), in, "crates.io:443", "")
	req := a.request()
	a.click("C1", req.ID, req.Choices[1].ID, from("UADMIN", "ana"))
	if r := answer(t, res); !r.g.Granted || r.g.Scope != egress.ScopeChannel {
		t.Fatalf("always: %+v, %v", r.g, r.err)
	}
	if ok, _ := a.policy.Allowed(ci(chickIn("c-33334444", "C1")), "crates.io", 443); !ok {
		t.Error("an 'always' click did not allow the channel's other chicks")
	}
	res = a.ask(t.Context(), in, "github.com:443", "")
	waitFor(t, "the second request", func() bool { return len(a.ad.of("choices")) == 2 })
	req = a.request()
	a.click("C1", req.ID, req.Choices[2].ID, from("UADMIN", "ana"))
	if r := answer(t, res); r.g.Granted || r.g.Message != "refused by @ana" {
		t.Fatalf("deny: %+v, %v", r.g, r.err)
	}
	a.posted(1, "⛔ @ana refused chick `c-11112222` access to `github.com:443`.")
}

// TestAccessButtonNonAdmin: a non-admin's click is refused (only to them)
// and the request stays open, buttons and all; an admin's typed answer
// then ends it and takes the buttons away.
func TestAccessButtonNonAdmin(t *testing.T) {
	t.Parallel()
	a := newAccessHarness(t, withButtons())
	in := chickIn("c-cccc0000", "C1")
	res := a.ask(t.Context(), in, "pypi.org:443", "pip")
	req := a.request()
	k := a.click("C1", req.ID, req.Choices[0].ID, from("UMARIO", "mario"))
	var priv []rec
	waitFor(t, "the private refusal", func() bool { priv = a.ad.of("private"); return len(priv) > 0 })
	if priv[0].Text != "Only an admin can answer access requests; yours was ignored." || priv[0].ReplyTo != k.ID {
		t.Errorf("the clicker was told %+v", priv[0])
	}
	if open, _ := a.m.pendingIn("rec/C1", in.ID, ""); len(open) != 1 {
		t.Fatalf("after a non-admin's click %d requests are open, want 1", len(open))
	}
	if ok, _ := a.policy.Allowed(ci(in), "pypi.org", 443); ok {
		t.Error("a non-admin's click approved the destination")
	}
	if n := len(a.ad.of("end")) + len(a.ad.of("post")); n != 0 {
		t.Errorf("a non-admin's click changed the channel: %+v", a.ad.all())
	}
	a.say("C1", "deny c-cccc0000", false, from("UADMIN", "ana"))
	if r := answer(t, res); r.g.Granted || r.g.Message != "refused by @ana" {
		t.Errorf("RequestAccess = %+v", r.g)
	}
	waitFor(t, "the buttons taken away after a typed answer", func() bool { return len(a.ad.of("end")) == 1 })
	if e := a.ad.of("end")[0]; e.ReplyTo != req.ID || !strings.Contains(e.Text, "⛔ @ana refused") {
		t.Errorf("end = %+v", e)
	}
	// A click on the answered request's button finds nothing to answer.
	a.click("C1", req.ID, req.Choices[0].ID, from("UADMIN", "ana"))
	waitFor(t, "the private answer", func() bool { return len(a.ad.of("private")) == 2 })
	if p := a.ad.of("private")[1].Text; p != "There is no pending access request of chick `c-cccc0000` for `pypi.org:443` here." {
		t.Errorf("a stale click was answered %q", p)
	}
	// A button Mother does not know.
	a.click("C1", req.ID, "launch the rockets", from("UADMIN", "ana"))
	waitFor(t, "the answer to an unknown button", func() bool { return len(a.ad.of("private")) == 3 })
	if p := a.ad.of("private")[2].Text; p != "This button no longer does anything." {
		t.Errorf("an unknown click was answered %q", p)
	}
	a.idle()
	if n := len(a.ad.of("finish")); n != 0 {
		t.Errorf("the model answered a click (%d replies)", n)
	}
	for _, l := range a.logged("C1") {
		if l.Choice || l.Sender.ID == "UMARIO" {
			t.Errorf("a click was logged: %+v", l)
		}
	}
}

// TestAccessButtonsLapse: a timed-out request and one whose chick ended
// lose their buttons.
func TestAccessButtonsLapse(t *testing.T) {
	t.Parallel()
	a := newAccessHarness(t, withButtons())
	res := a.ask(t.Context(), chickIn("c-dddd0000", "C1"), "pypi.org:443", "")
	req := a.request()
	a.clk.Advance(10 * time.Minute)
	answer(t, res)
	waitFor(t, "the buttons of the lapsed request taken away", func() bool { return len(a.ad.of("end")) == 1 })
	if e := a.ad.of("end")[0]; e.ReplyTo != req.ID || !strings.HasSuffix(e.Text, "\n⌛ no admin answered within 10m; the chick was told so.") {
		t.Errorf("end = %+v", e)
	}
	in := chickIn("c-eeee0000", "C1")
	res = a.ask(t.Context(), in, "pypi.org:443", "")
	waitFor(t, "the second request", func() bool { return len(a.ad.of("choices")) == 2 })
	req = a.request()
	a.m.ChickObserver().ChickEnded(in)
	answer(t, res)
	waitFor(t, "the buttons of the ended chick's request taken away", func() bool { return len(a.ad.of("end")) == 2 })
	if e := a.ad.of("end")[1]; e.ReplyTo != req.ID || !strings.HasSuffix(e.Text, "\nThe chick ended before an admin answered.") {
		t.Errorf("end = %+v", e)
	}
	a.idle() // the chick's end answered, its marker written, before the cleanup
}

// TestAccessClickWithoutClickReplier: an adapter that cannot answer a
// click privately gets the refusal in the channel, as a reply to the
// request.
func TestAccessClickWithoutClickReplier(t *testing.T) {
	t.Parallel()
	a := newAccessHarness(t)
	res := a.ask(t.Context(), chickIn("c-ffff0000", "C1"), "pypi.org:443", "")
	a.posted(1, "asks to reach")
	reqID := a.ad.of("post")[0].ID
	a.click("C1", reqID, "allow c-ffff0000 pypi.org:443", from("UMARIO", "mario"))
	a.posted(1, "Only an admin can answer access requests; yours was ignored.")
	for _, l := range a.logged("C1") {
		if strings.HasPrefix(l.Text, "Only an admin") && l.ReplyTo != reqID {
			t.Errorf("the refusal answers %q, want the request %s", l.ReplyTo, reqID)
		}
	}
	a.click("C1", reqID, "allow c-ffff0000 pypi.org:443", from("UADMIN", "ana"))
	if r := answer(t, res); !r.g.Granted {
		t.Errorf("an admin's click on an adapter without buttons of its own: %+v", r.g)
	}
}

func TestAccessChoices(t *testing.T) {
	t.Parallel()
	if c := accessChoices("c-7f3a91c2", "pypi.org:443"); len(c) != 3 || chat.CheckChoices(c) != nil {
		t.Errorf("accessChoices = %+v (%v)", c, chat.CheckChoices(c))
	}
	long := strings.Repeat("a", 60) + ".example.org:443"
	if c := accessChoices("c-7f3a91c2", long); c != nil {
		t.Errorf("a destination too long for a button's id got buttons: %+v", c)
	}
	for _, c := range accessChoices("c-7f3a91c2", "*.pythonhosted.org") {
		verb, id, dest, ok := ParseAccessAnswer(c.ID)
		if !ok || id != "c-7f3a91c2" || dest != "*.pythonhosted.org" || !strings.HasPrefix(c.ID, verb+" ") {
			t.Errorf("button %q reads as %q %q %q %v", c.ID, verb, id, dest, ok)
		}
	}
}
