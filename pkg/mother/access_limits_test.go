package mother

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/config"
)

// TestAccessPendingCapped: past chicks.egress.maxPendingPerChick a
// chick's request is refused at once, plainly, and nothing is posted;
// past maxPendingPerChannel another chick's of the same channel too; a
// chick of another channel is still asked; once answered, there is room
// again.
func TestAccessPendingCapped(t *testing.T) {
	t.Parallel()
	a := newAccessHarness(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	perChick, perChannel := config.DefaultAccessPendingPerChick, config.DefaultAccessPendingPerChannel
	first := chickIn("c-0001aaaa", "C1")
	for i := range perChick {
		a.ask(ctx, first, fmt.Sprintf("a%d.test:443", i), "needed")
	}
	a.posted(perChick, "asks to reach")
	r := answer(t, a.ask(ctx, first, "over.test:443", "one more"))
	if r.err != nil || r.g.Granted || !strings.Contains(r.g.Message, "maxPendingPerChick") || !strings.Contains(r.g.Message, "nobody was asked") {
		t.Errorf("past the cap per chick: %+v, %v", r.g, r.err)
	}
	// Other chicks of the channel fill it up to its cap.
	n := perChick
	for c := 1; n < perChannel; c++ {
		in := chickIn(fmt.Sprintf("c-%04dbbbb", c), "C1")
		for i := 0; i < perChick && n < perChannel; i++ {
			a.ask(ctx, in, fmt.Sprintf("b%d-%d.test:443", c, i), "needed")
			n++
		}
	}
	a.posted(perChannel, "asks to reach")
	r = answer(t, a.ask(ctx, chickIn("c-9999cccc", "C1"), "late.test:443", "needed"))
	if r.err != nil || r.g.Granted || !strings.Contains(r.g.Message, "maxPendingPerChannel") {
		t.Errorf("past the cap per channel: %+v, %v", r.g, r.err)
	}
	// Another channel is asked.
	a.ask(ctx, chickIn("c-8888dddd", "C2"), "other.test:443", "needed")
	a.posted(1, "`c-8888dddd` asks to reach")
	a.idle()
	if got := len(a.posted(0, "asks to reach")); got != perChannel+1 {
		t.Errorf("%d requests posted, want %d", got, perChannel+1)
	}
	// Answered, the first chick has room for one more.
	a.say("C1", "deny c-0001aaaa a0.test:443", false, from("UADMIN", "ana"))
	a.posted(1, "refused chick `c-0001aaaa` access to `a0.test:443`")
	done := a.ask(ctx, first, "again.test:443", "needed")
	a.posted(1, "asks to reach `again.test:443`")
	cancel()
	answer(t, done)
}

// TestAccessRefusedBeforeAsking: a destination the gate will refuse
// whatever an admin says (loopback, by literal or by the operator's hosts)
// is refused at once, with the reason, and nobody is asked.
func TestAccessRefusedBeforeAsking(t *testing.T) {
	t.Parallel()
	a := newAccessHarness(t)
	in := chickIn("c-7f3a91c2", "C1")
	for _, d := range []string{"127.0.0.1:8080", "[::ffff:127.0.0.1]:8080", "[64:ff9b::127.0.0.1]:8080", "localhost:8080", "10.0.0.1:22"} {
		r := answer(t, a.ask(t.Context(), in, d, "needed"))
		if r.err != nil || r.g.Granted || !strings.HasPrefix(r.g.Message, "refused: ") || !strings.Contains(r.g.Message, "the gate refuses it") {
			t.Errorf("RequestAccess(%s) = %+v, %v; want refused at once", d, r.g, r.err)
		}
	}
	a.idle()
	if got := len(a.posted(0, "asks to reach")); got != 0 {
		t.Errorf("%d requests posted for destinations the gate refuses", got)
	}
}

// TestAccessApprovalOfARefusedDestination: the operator maps the name to
// loopback after the chick asked; the admin's allow is not kept, the chick
// is told it is refused, and the channel's notice says why.
func TestAccessApprovalOfARefusedDestination(t *testing.T) {
	t.Parallel()
	a := newAccessHarness(t)
	in := chickIn("c-7f3a91c2", "C1")
	res := a.ask(t.Context(), in, "late.test:8080", "needed")
	a.posted(1, "asks to reach `late.test:8080`")
	cc := a.cc
	cc.Egress.Hosts = map[string]string{"late.test": "127.0.0.1"}
	a.policy.SetConfig(cc)
	a.say("C1", "allow c-7f3a91c2", false, from("UADMIN", "ana"))
	r := answer(t, res)
	if r.err != nil || r.g.Granted || !strings.HasPrefix(r.g.Message, "refused: late.test resolves (chicks.egress.hosts) to a loopback address 127.0.0.1") {
		t.Errorf("RequestAccess = %+v, %v; want refused", r.g, r.err)
	}
	a.posted(1, "⛔ @ana allowed chick `c-7f3a91c2` to reach `late.test:8080`, but late.test resolves")
	if ok, _ := a.policy.Allowed(ci(in), "late.test", 8080); ok {
		t.Error("the approval of a destination the gate refuses was kept")
	}
}
