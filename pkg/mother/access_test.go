package mother

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/egress"
	"github.com/mother-chat/mother/pkg/hatchery"
)

// accessHarness is Mother with an egress policy (state kept in dir, docs.rs
// allowed by config) on a fake clock.
type accessHarness struct {
	*harness
	clk    *clock.Fake
	policy *egress.Policy
	dir    string
	cc     config.Chicks
}

func newAccessHarness(t *testing.T, opts ...harnessOpt) *accessHarness {
	t.Helper()
	a := &accessHarness{clk: clock.NewFake(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)), dir: t.TempDir()}
	cfg := &config.Config{}
	cfg.SetDefaults(t.TempDir())
	cfg.Chicks.Egress.Allow = []string{"docs.rs"}
	a.cc = cfg.Chicks
	p, err := egress.NewPolicy(egress.Options{Config: a.cc, StateDir: a.dir})
	if err != nil {
		t.Fatal(err)
	}
	a.policy = p
	a.harness = newHarness(t, append([]harnessOpt{withEgress(p), withClock(a.clk)}, opts...)...)
	return a
}

func chickIn(id, channel string) hatchery.Info {
	return hatchery.Info{Record: hatchery.Record{ID: id, Adapter: "rec", ChannelID: channel, Tier: "local", State: hatchery.StateRunning}, Channel: "rec/" + channel}
}

func ci(in hatchery.Info) egress.ChickInfo {
	return egress.ChickInfo{ID: in.ID, Channel: in.Channel, Tier: in.Tier}
}

type grantOrErr struct {
	g   egress.Grant
	err error
}

// ask calls RequestAccess as the nest would, in the background.
func (a *accessHarness) ask(ctx context.Context, in hatchery.Info, dest, reason string) <-chan grantOrErr {
	out := make(chan grantOrErr, 1)
	go func() {
		g, err := a.m.RequestAccess(ctx, in, dest, reason)
		out <- grantOrErr{g, err}
	}()
	return out
}

// posted waits until n posts contain substr and returns them.
func (a *accessHarness) posted(n int, substr string) []string {
	a.t.Helper()
	var got []string
	waitFor(a.t, "a post with "+substr, func() bool {
		got = nil
		for _, r := range a.ad.of("post") {
			if strings.Contains(r.Text, substr) {
				got = append(got, r.Text)
			}
		}
		return len(got) >= n
	})
	return got
}

func answer(t *testing.T, ch <-chan grantOrErr) grantOrErr {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("RequestAccess did not return")
		return grantOrErr{}
	}
}

func (a *accessHarness) loggedTexts(channel string) string {
	var b strings.Builder
	for _, m := range a.logged(channel) {
		b.WriteString(m.Sender.ID + ": " + m.Text + "\n")
	}
	return b.String()
}

func TestAccessApprovedOnce(t *testing.T) {
	t.Parallel()
	a := newAccessHarness(t)
	in := chickIn("c-7f3a91c2", "C1")
	res := a.ask(t.Context(), in, "pypi.org:443", "install the requests package")
	req := a.posted(1, "asks to reach")[0]
	want := "🔐 chick `c-7f3a91c2` asks to reach `pypi.org:443`: install the requests package.\n" +
		"An admin answers `allow c-7f3a91c2` (this chick), `always c-7f3a91c2` (this channel, kept) or `deny c-7f3a91c2`."
	if req != want {
		t.Errorf("request posted as\n%s\nwant\n%s", req, want)
	}
	// The admin answers with a mention and a shortened id; the model never
	// sees it.
	a.say("C1", "@mother allow c-7f3a", false, mention, from("UADMIN", "ana"))
	r := answer(t, res)
	if r.err != nil || !r.g.Granted || r.g.Scope != egress.ScopeChick || r.g.Message != "approved by @ana for this chick; "+egress.RefusesPrivate {
		t.Fatalf("RequestAccess = %+v, %v", r.g, r.err)
	}
	if ok, _ := a.policy.Allowed(ci(in), "pypi.org", 443); !ok {
		t.Error("the approved destination is not allowed for the chick")
	}
	if ok, _ := a.policy.Allowed(ci(chickIn("c-other", "C1")), "pypi.org", 443); ok {
		t.Error("a once-approval reached another chick")
	}
	a.posted(1, "✅ @ana allowed chick `c-7f3a91c2` to reach `pypi.org:443` (this chick, until it ends).")
	a.idle()
	if n := len(a.ad.of("finish")); n != 0 {
		t.Errorf("the model answered the approval (%d replies)", n)
	}
	log := a.loggedTexts("C1")
	for _, w := range []string{"UMOTHER: 🔐 chick `c-7f3a91c2` asks to reach", "UADMIN: @mother allow c-7f3a", "UMOTHER: ✅ @ana allowed"} {
		if !strings.Contains(log, w) {
			t.Errorf("log.jsonl lacks %q:\n%s", w, log)
		}
	}
	// Asked again: already allowed, granted at once, nothing posted.
	r = answer(t, a.ask(t.Context(), in, "pypi.org:443", "again"))
	if !r.g.Granted || !strings.Contains(r.g.Message, "already allowed") {
		t.Errorf("asked again: %+v", r.g)
	}
	// The chick ends: its approval goes.
	a.m.ChickObserver().ChickEnded(in)
	must(t, a.policy.ChickEnded(in.ID)) // the daemon's subscriber does this
	if ok, _ := a.policy.Allowed(ci(in), "pypi.org", 443); ok {
		t.Error("the approval outlived the chick")
	}
	a.idle() // the chick's end answered, its marker written, before the cleanup
}

func TestAccessApprovedAlwaysSurvivesAReload(t *testing.T) {
	t.Parallel()
	a := newAccessHarness(t)
	in := chickIn("c-11112222", "C1")
	res := a.ask(t.Context(), in, "files.pythonhosted.org:443", "")
	if req := a.posted(1, "asks to reach")[0]; !strings.HasPrefix(req, "🔐 chick `c-11112222` asks to reach `files.pythonhosted.org:443`.\n") {
		t.Errorf("request without a reason: %q", req)
	}
	a.say("C1", "always c-11112222", false, from("UADMIN", "ana"))
	r := answer(t, res)
	if !r.g.Granted || r.g.Scope != egress.ScopeChannel || r.g.Message != "approved by @ana for this channel; "+egress.RefusesPrivate {
		t.Fatalf("RequestAccess = %+v, %v", r.g, r.err)
	}
	a.posted(1, "every chick of this channel from now on, to reach `files.pythonhosted.org:443` (kept)")
	// Mother restarts: the policy is read again from disk.
	p2, err := egress.NewPolicy(egress.Options{Config: a.cc, StateDir: a.dir})
	must(t, err)
	for _, c := range []struct {
		in   hatchery.Info
		want bool
	}{
		{chickIn("c-33334444", "C1"), true},
		{chickIn("c-55556666", "C2"), false},
	} {
		if ok, _ := p2.Allowed(ci(c.in), "files.pythonhosted.org", 443); ok != c.want {
			t.Errorf("after a reload, chick of %s: allowed %v, want %v", c.in.Channel, ok, c.want)
		}
	}
}

func TestAccessDenied(t *testing.T) {
	t.Parallel()
	a := newAccessHarness(t)
	in := chickIn("c-aaaabbbb", "C1")
	res := a.ask(t.Context(), in, "github.com:443", "clone @everyone's `repo`")
	req := a.posted(1, "asks to reach")[0]
	if strings.Contains(req, "@everyone") || strings.Contains(req, "`repo`") {
		t.Errorf("the chick's reason was posted raw: %q", req)
	}
	a.say("C1", "Deny c-aaaabbbb.", false, from("UADMIN", "ana"))
	r := answer(t, res)
	if r.err != nil || r.g.Granted || r.g.Message != "refused by @ana" {
		t.Fatalf("RequestAccess = %+v, %v", r.g, r.err)
	}
	if ok, _ := a.policy.Allowed(ci(in), "github.com", 443); ok {
		t.Error("a refused destination is allowed")
	}
	a.posted(1, "⛔ @ana refused chick `c-aaaabbbb` access to `github.com:443`.")
	if log := a.loggedTexts("C1"); !strings.Contains(log, "⛔ @ana refused") {
		t.Errorf("the refusal is not in log.jsonl:\n%s", log)
	}
}

func TestAccessNonAdminIgnored(t *testing.T) {
	t.Parallel()
	a := newAccessHarness(t)
	in := chickIn("c-cccc0000", "C1")
	res := a.ask(t.Context(), in, "pypi.org:443", "pip")
	a.posted(1, "asks to reach")
	a.say("C1", "allow c-cccc0000", false, from("UMARIO", "mario"))
	a.posted(1, "Only an admin can answer access requests")
	// Deliver is done: the request is still open, nothing approved.
	if open, _ := a.m.pendingIn("rec/C1", "c-cccc0000", ""); len(open) != 1 {
		t.Fatalf("after a non-admin's answer %d requests are open, want 1", len(open))
	}
	if ok, _ := a.policy.Allowed(ci(in), "pypi.org", 443); ok {
		t.Error("a non-admin's answer approved the destination")
	}
	// An admin in another channel does not answer it either.
	a.say("C2", "@mother allow c-cccc0000", false, mention, from("UADMIN", "ana"))
	a.posted(1, "There is no pending access request of chick `c-cccc0000` here.")
	a.say("C1", "deny c-cccc0000", false, from("UADMIN", "ana"))
	if r := answer(t, res); r.g.Granted || r.g.Message != "refused by @ana" {
		t.Errorf("RequestAccess = %+v", r.g)
	}
	a.idle()
	if n := len(a.ad.of("finish")); n != 0 {
		t.Errorf("the model answered an access answer (%d replies)", n)
	}
}

func TestAccessTimesOut(t *testing.T) {
	t.Parallel()
	a := newAccessHarness(t)
	in := chickIn("c-dddd0000", "C1")
	res := a.ask(t.Context(), in, "pypi.org:443", "pip")
	a.posted(1, "asks to reach")
	a.clk.Advance(10*time.Minute - time.Second)
	if open, _ := a.m.pendingIn("rec/C1", in.ID, ""); len(open) != 1 {
		t.Fatal("the request ended before its timeout")
	}
	a.clk.Advance(time.Second)
	r := answer(t, res)
	if r.err != nil || r.g.Granted || r.g.Message != "no admin answered within 10m" {
		t.Fatalf("RequestAccess = %+v, %v", r.g, r.err)
	}
	a.posted(1, "⌛ chick `c-dddd0000` asked to reach `pypi.org:443`: no admin answered within 10m")
	if log := a.loggedTexts("C1"); !strings.Contains(log, "⌛ chick") {
		t.Errorf("the timeout is not in log.jsonl:\n%s", log)
	}
	// An answer after the timeout finds nothing to answer.
	a.say("C1", "@mother allow c-dddd0000", false, mention, from("UADMIN", "ana"))
	a.posted(1, "There is no pending access request of chick `c-dddd0000` here.")
}

func TestAccessAskedTwiceJoinsTheWait(t *testing.T) {
	t.Parallel()
	a := newAccessHarness(t)
	in := chickIn("c-eeee0000", "C1")
	first := a.ask(t.Context(), in, "pypi.org:443", "pip")
	a.posted(1, "asks to reach")
	// The chick's call is cut (its gate restarted) and it asks again.
	second := a.ask(t.Context(), in, "PyPI.org:443", "pip")
	waitFor(t, "the second call to join", func() bool { return strings.Contains(a.log(), "chick asks again for access it is waiting for") })
	a.say("C1", "allow c-eeee0000", false, from("UADMIN", "ana"))
	for _, ch := range []<-chan grantOrErr{first, second} {
		if r := answer(t, ch); !r.g.Granted || r.g.Scope != egress.ScopeChick {
			t.Errorf("RequestAccess = %+v, %v", r.g, r.err)
		}
	}
	if n := len(a.posted(1, "asks to reach")); n != 1 {
		t.Errorf("the request was posted %d times, want once", n)
	}
	// Two destinations at once: each is named in the answer it asks for.
	r1 := a.ask(t.Context(), in, "docs.python.org:443", "")
	a.posted(2, "asks to reach")
	r2 := a.ask(t.Context(), in, "crates.io:443", "")
	second2 := a.posted(3, "asks to reach")
	if !strings.Contains(second2[2], "`deny c-eeee0000 crates.io:443`") {
		t.Errorf("the second request of the chick does not name its destination: %q", second2[2])
	}
	a.say("C1", "deny c-eeee0000 crates.io:443", false, from("UADMIN", "ana"))
	if r := answer(t, r2); r.g.Granted {
		t.Errorf("crates.io: %+v", r.g)
	}
	if open, _ := a.m.pendingIn("rec/C1", in.ID, ""); len(open) != 1 || open[0].dest != "docs.python.org:443" {
		t.Errorf("after answering one destination, open: %d", len(open))
	}
	// The chick ends while it waits.
	a.m.ChickObserver().ChickEnded(in)
	if r := answer(t, r1); r.g.Granted || r.g.Message != "the chick has ended" {
		t.Errorf("after the chick ended: %+v", r.g)
	}
	a.idle() // the chick's end answered, its marker written, before the cleanup
}

func TestAccessEndsAtShutdownAndCtx(t *testing.T) {
	t.Parallel()
	a := newAccessHarness(t)
	ctx, cancel := context.WithCancel(t.Context())
	cut := a.ask(ctx, chickIn("c-ffff0000", "C1"), "pypi.org:443", "")
	a.posted(1, "asks to reach")
	cancel()
	if r := answer(t, cut); !errors.Is(r.err, context.Canceled) {
		t.Errorf("call cancelled: %v", r.err)
	}
	res := a.ask(t.Context(), chickIn("c-ffff1111", "C1"), "pypi.org:443", "")
	a.posted(2, "asks to reach")
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	must(t, a.m.Shutdown(sctx))
	if r := answer(t, res); !errors.Is(r.err, egress.ErrUnavailable) {
		t.Errorf("at shutdown: %+v %v, want ErrUnavailable (the chick asks the next Mother)", r.g, r.err)
	}
	if r := answer(t, a.ask(t.Context(), chickIn("c-ffff2222", "C1"), "pypi.org:443", "")); !errors.Is(r.err, egress.ErrUnavailable) {
		t.Errorf("after shutdown: %v", r.err)
	}
}

func TestParseAccessAnswer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		text, verb, id, dest string
	}{
		{"allow c-7f3a", "allow", "c-7f3a", ""},
		{"<@U1> ALWAYS `c-7f3a91c2`.", "always", "c-7f3a91c2", ""},
		{"@mother deny c-7f3a pypi.org:443", "deny", "c-7f3a", "pypi.org:443"},
		{"allow me to explain", "", "", ""},
		{"allow c-", "", "", ""},
		{"allow", "", "", ""},
		{"please allow c-7f3a", "", "", ""},
		{"allow c-7f3a pypi.org and more", "", "", ""},
	} {
		verb, id, dest, ok := ParseAccessAnswer(c.text)
		if ok != (c.verb != "") || verb != c.verb || id != c.id || dest != c.dest {
			t.Errorf("ParseAccessAnswer(%q) = %q %q %q %v, want %q %q %q", c.text, verb, id, dest, ok, c.verb, c.id, c.dest)
		}
	}
}

// TestEgressLinesInTheChicksProgress: the gate's reports show as tool
// details of the chick's progress, each line once.
func TestEgressLinesInTheChicksProgress(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	obs := h.m.ChickObserver().(hatchery.EgressObserver)
	in := chickIn("c-12345678", "C1")
	for _, e := range []hatchery.Egress{
		{Host: "github.com", Port: 443, Outcome: hatchery.EgressRefused, Reason: "not allowed for this chick"},
		{Host: "pypi.org", Port: 443, Outcome: hatchery.EgressAllowed, BytesOut: 10},
		{Host: "pypi.org", Port: 443, Outcome: hatchery.EgressAllowed, BytesOut: 20}, // same line: once
		{Host: "evil.example", Port: 80, Outcome: hatchery.EgressBlockedAddress, Reason: "resolves to 127.0.0.1 (loopback)"},
		{Host: "2001:db8::1", Port: 443, Outcome: hatchery.EgressCapped},
		{Host: "mirror.lan", Port: 8080, Outcome: hatchery.EgressFailed, Reason: "connection refused"},
	} {
		obs.ChickEgress(in, e)
	}
	want := []string{
		"egress: blocked: github.com:443 (not allowed for this chick)",
		"egress: reached: pypi.org:443",
		"egress: blocked: evil.example:80 (resolves to 127.0.0.1 (loopback))",
		"egress: blocked: [2001:db8::1]:443 (byte cap reached)",
		"egress: failed: mirror.lan:8080 (connection refused)",
	}
	var got []string
	waitFor(t, "the egress lines", func() bool { got = texts(h.ad.of("detail")); return len(got) >= len(want) })
	if !slices.Equal(got, want) {
		t.Errorf("details\n%q\nwant\n%q", got, want)
	}
	for _, r := range h.ad.of("detail") {
		if r.Title != "chick c-12345678" {
			t.Errorf("detail titled %q", r.Title)
		}
	}
}

func TestShortDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{10 * time.Minute: "10m", 90 * time.Minute: "1h30m", 2 * time.Hour: "2h", 45 * time.Second: "45s", 90 * time.Second: "1m30s"} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
