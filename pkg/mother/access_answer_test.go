package mother

import (
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/egress"
)

// TestAccessRequestRefusesPatterns: Mother, as the nest's desk, refuses a
// wildcard, a range or a destination without a port whatever the chick
// checked: the chick is told why, nothing is posted, nobody is asked.
func TestAccessRequestRefusesPatterns(t *testing.T) {
	t.Parallel()
	a := newAccessHarness(t)
	in := chickIn("c-7f3a91c2", "C1")
	for _, c := range []struct{ dest, want string }{
		{"*.example.com", "is a wildcard"},
		{"*", "is a wildcard"},
		{"*:443", "is a wildcard"},
		{"*.pythonhosted.org:443", "is a wildcard"},
		{"10.0.0.0/8", "not a host and port"},
		{"pypi.org", "names no port"},
	} {
		r := answer(t, a.ask(t.Context(), in, c.dest, "need it"))
		if r.err != nil || r.g.Granted || !strings.HasPrefix(r.g.Message, "refused: ") || !strings.Contains(r.g.Message, c.want) {
			t.Errorf("RequestAccess(%q) = %+v, %v; want refused, saying %q", c.dest, r.g, r.err, c.want)
		}
	}
	if open, _ := a.m.pendingIn("rec/C1", "c-", ""); len(open) != 0 {
		t.Errorf("%d requests pending after refused ones", len(open))
	}
	if n := len(a.ad.of("post")); n != 0 {
		t.Errorf("refused requests were posted (%d posts)", n)
	}
	// Already covered by the operator's docs.rs (any port): granted at
	// once, in the form the policy keeps.
	if r := answer(t, a.ask(t.Context(), in, "Docs.RS.:443", "")); !r.g.Granted || r.g.Message != "docs.rs:443 is already allowed for this chick" {
		t.Errorf("a covered request: %+v", r.g)
	}
}

// TestAccessBareAnswerNamesOneRequest: an answer answers exactly one
// request. The chick asks for pypi.org, the request reads `allow <id>`;
// it asks for crates.io before the admin answers; the admin types the
// `allow <id>` the first post showed: nothing is approved and the reply
// lists the answer that names each. The same for always and deny. An
// answer with the destination answers that one; with one request left,
// the bare answer answers it.
func TestAccessBareAnswerNamesOneRequest(t *testing.T) {
	t.Parallel()
	a := newAccessHarness(t)
	in := chickIn("c-7f3a91c2", "C1")
	pypi := a.ask(t.Context(), in, "pypi.org:443", "pip")
	first := a.posted(1, "asks to reach")[0]
	if !strings.Contains(first, "`allow c-7f3a91c2` (this chick)") {
		t.Fatalf("the first request reads %q", first)
	}
	crates := a.ask(t.Context(), in, "crates.io:443", "cargo")
	if second := a.posted(2, "asks to reach")[1]; !strings.Contains(second, "`allow c-7f3a91c2 crates.io:443`") {
		t.Errorf("the second request does not name its destination: %q", second)
	}
	for _, c := range []struct{ said, verb string }{
		{"allow c-7f3a", "allow"},
		{"@mother Always c-7f3a91c2", "always"},
		{"deny `c-7f3a91c2`", "deny"},
	} {
		a.say("C1", c.said, false, mention, from("UADMIN", "ana"))
		said := strings.TrimPrefix(strings.ReplaceAll(strings.ToLower(c.said), "`", ""), "@mother ")
		want := "`" + said + "` names 2 pending access requests, so it answered none of them. Name the one you mean:\n" +
			"• `" + c.verb + " c-7f3a91c2 crates.io:443`\n• `" + c.verb + " c-7f3a91c2 pypi.org:443`"
		a.posted(1, want)
		if open, _ := a.m.pendingIn("rec/C1", in.ID, ""); len(open) != 2 {
			t.Fatalf("after %q, %d requests are open, want both", c.said, len(open))
		}
		for _, host := range []string{"pypi.org", "crates.io"} {
			if ok, _ := a.policy.Allowed(ci(in), host, 443); ok {
				t.Errorf("after %q, %s is allowed", c.said, host)
			}
		}
	}
	// A destination the chick did not ask for: nothing, and what it did.
	a.say("C1", "allow c-7f3a91c2 github.com:443", false, from("UADMIN", "ana"))
	a.posted(1, "There is no pending access request of chick `c-7f3a91c2` for `github.com:443` here. Pending:\n"+
		"• `allow c-7f3a91c2 crates.io:443`\n• `allow c-7f3a91c2 pypi.org:443`")
	// With the destination: that one only, whatever its case.
	a.say("C1", "allow c-7f3a PyPI.org:443", false, from("UADMIN", "ana"))
	if r := answer(t, pypi); !r.g.Granted || r.g.Scope != egress.ScopeChick {
		t.Fatalf("pypi.org: %+v, %v", r.g, r.err)
	}
	if ok, _ := a.policy.Allowed(ci(in), "crates.io", 443); ok {
		t.Error("approving pypi.org approved crates.io")
	}
	// One left: the bare answer answers it.
	a.say("C1", "allow c-7f3a", false, from("UADMIN", "ana"))
	if r := answer(t, crates); !r.g.Granted || r.g.Scope != egress.ScopeChick {
		t.Fatalf("crates.io: %+v, %v", r.g, r.err)
	}
	for _, host := range []string{"pypi.org", "crates.io"} {
		if ok, _ := a.policy.Allowed(ci(in), host, 443); !ok {
			t.Errorf("%s is not allowed after its approval", host)
		}
	}
	a.idle()
	if n := len(a.ad.of("finish")); n != 0 {
		t.Errorf("the model answered access answers (%d replies)", n)
	}
}

// TestAccessAmbiguousPrefix: a prefix that names two chicks' requests
// answers none, even with the destination, and lists the full answers;
// the full id answers its chick only.
func TestAccessAmbiguousPrefix(t *testing.T) {
	t.Parallel()
	a := newAccessHarness(t)
	one, two := chickIn("c-7f000001", "C1"), chickIn("c-7f000002", "C1")
	r1 := a.ask(t.Context(), one, "pypi.org:443", "")
	a.posted(1, "asks to reach")
	r2 := a.ask(t.Context(), two, "pypi.org:443", "")
	a.posted(2, "asks to reach")
	for _, said := range []string{"allow c-7f", "allow c-7f pypi.org:443"} {
		a.say("C1", said, false, from("UADMIN", "ana"))
		a.posted(1, "`"+said+"` names 2 pending access requests, so it answered none of them. Name the one you mean:\n"+
			"• `allow c-7f000001 pypi.org:443`\n• `allow c-7f000002 pypi.org:443`")
	}
	for _, in := range []struct{ id string }{{one.ID}, {two.ID}} {
		if ok, _ := a.policy.Allowed(egress.ChickInfo{ID: in.id, Channel: "rec/C1", Tier: "local"}, "pypi.org", 443); ok {
			t.Errorf("an ambiguous answer approved %s", in.id)
		}
	}
	a.say("C1", "allow c-7f000002", false, from("UADMIN", "ana"))
	if r := answer(t, r2); !r.g.Granted {
		t.Fatalf("c-7f000002: %+v", r.g)
	}
	if ok, _ := a.policy.Allowed(ci(one), "pypi.org", 443); ok {
		t.Error("answering c-7f000002 approved c-7f000001")
	}
	a.say("C1", "deny c-7f", false, from("UADMIN", "ana")) // one left
	if r := answer(t, r1); r.g.Granted || r.g.Message != "refused by @ana" {
		t.Fatalf("c-7f000001: %+v", r.g)
	}
}

// TestAccessButtonsWithTwoPending: each button answers its own request
// while another of the same chick is pending.
func TestAccessButtonsWithTwoPending(t *testing.T) {
	t.Parallel()
	a := newAccessHarness(t, withButtons())
	in := chickIn("c-7f3a91c2", "C1")
	pypi := a.ask(t.Context(), in, "pypi.org:443", "")
	reqPypi := a.request()
	crates := a.ask(t.Context(), in, "crates.io:443", "")
	waitFor(t, "the second request", func() bool { return len(a.ad.of("choices")) == 2 })
	reqCrates := a.request()
	if reqPypi.Choices[0].ID != "allow c-7f3a91c2 pypi.org:443" || reqCrates.Choices[2].ID != "deny c-7f3a91c2 crates.io:443" {
		t.Fatalf("buttons %+v and %+v", reqPypi.Choices, reqCrates.Choices)
	}
	a.click("C1", reqPypi.ID, reqPypi.Choices[0].ID, from("UADMIN", "ana"))
	if r := answer(t, pypi); !r.g.Granted || r.g.Scope != egress.ScopeChick {
		t.Fatalf("pypi.org: %+v, %v", r.g, r.err)
	}
	if open, _ := a.m.pendingIn("rec/C1", in.ID, ""); len(open) != 1 || open[0].dest != "crates.io:443" {
		t.Fatalf("after the click on pypi.org's button, open: %d", len(open))
	}
	if ok, _ := a.policy.Allowed(ci(in), "crates.io", 443); ok {
		t.Error("pypi.org's button approved crates.io")
	}
	a.click("C1", reqCrates.ID, reqCrates.Choices[2].ID, from("UADMIN", "ana"))
	if r := answer(t, crates); r.g.Granted || r.g.Message != "refused by @ana" {
		t.Fatalf("crates.io: %+v, %v", r.g, r.err)
	}
}
