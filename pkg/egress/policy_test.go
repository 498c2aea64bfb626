package egress

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/config"
)

func chicksConfig(t *testing.T, edit func(*config.Chicks)) config.Chicks {
	t.Helper()
	cfg := &config.Config{}
	cfg.SetDefaults(t.TempDir())
	edit(&cfg.Chicks)
	return cfg.Chicks
}

func newPolicy(t *testing.T, dir string, cc config.Chicks) *Policy {
	t.Helper()
	p, err := NewPolicy(Options{Config: cc, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAllowedMatching(t *testing.T) {
	t.Parallel()
	cc := chicksConfig(t, func(c *config.Chicks) {
		c.Egress.Allow = []string{"pypi.org:443", "*.githubusercontent.com", "Example.COM.", "192.0.2.7:8080", "[2001:db8::1]:443", "10.1.2.3"}
		c.Tiers["web"] = config.Tier{Provider: "ollama", Model: "m", Egress: config.TierEgress{Allow: []string{"registry.npmjs.org:443"}}}
		c.Egress.Channels = map[string][]string{"slack-acme/C1": {"proxy.golang.org"}}
	})
	p := newPolicy(t, "", cc)
	plain := ChickInfo{ID: "c-1", Channel: "slack-acme/C9", Tier: "local"}
	web := ChickInfo{ID: "c-2", Channel: "slack-acme/C9", Tier: "web"}
	inC1 := ChickInfo{ID: "c-3", Channel: "slack-acme/C1", Tier: "local"}
	cases := []struct {
		name  string
		chick ChickInfo
		host  string
		port  int
		want  bool
	}{
		{"exact name and port", plain, "pypi.org", 443, true},
		{"exact name, other port", plain, "pypi.org", 80, false},
		{"name in another case", plain, "PyPI.Org", 443, true},
		{"trailing dot", plain, "pypi.org.", 443, true},
		{"subdomain of an exact name", plain, "files.pypi.org", 443, false},
		{"wildcard subdomain, any port", plain, "raw.githubusercontent.com", 8443, true},
		{"wildcard deep subdomain", plain, "a.b.githubusercontent.com", 443, true},
		{"wildcard does not cover the domain itself", plain, "githubusercontent.com", 443, false},
		{"wildcard is no suffix match", plain, "evilgithubusercontent.com", 443, false},
		{"entry with case and trailing dot", plain, "example.com", 1234, true},
		{"address entry with port", plain, "192.0.2.7", 8080, true},
		{"address entry, other port", plain, "192.0.2.7", 80, false},
		{"IPv6 entry", plain, "2001:db8::1", 443, true},
		{"IPv6 entry, bracketed and spelled out", plain, "[2001:0db8:0:0::1]", 443, true},
		{"IPv4-mapped IPv6 of an address entry", plain, "::ffff:10.1.2.3", 22, true},
		{"address entry does not allow a name", plain, "ten.example", 22, false},
		{"name entry does not allow its address", plain, "151.101.0.223", 443, false},
		{"tier entry for its tier", web, "registry.npmjs.org", 443, true},
		{"tier entry not for another tier", plain, "registry.npmjs.org", 443, false},
		{"channel entry for its channel", inC1, "proxy.golang.org", 443, true},
		{"channel entry not for another channel", plain, "proxy.golang.org", 443, false},
		{"base entry in every channel", inC1, "pypi.org", 443, true},
		{"not listed", plain, "github.com", 443, false},
		{"empty host", plain, "", 443, false},
		{"port 0", plain, "pypi.org", 0, false},
		{"junk host", plain, "pypi.org/evil", 443, false},
	}
	for _, c := range cases {
		got, reason := p.Allowed(c.chick, c.host, c.port)
		if got != c.want {
			t.Errorf("%s: Allowed(%q, %d) = %v, want %v", c.name, c.host, c.port, got, c.want)
		}
		if !got && reason != ReasonNotAllowed {
			t.Errorf("%s: reason %q, want %q", c.name, reason, ReasonNotAllowed)
		}
	}
}

func TestCoveredRequests(t *testing.T) {
	t.Parallel()
	p := newPolicy(t, "", chicksConfig(t, func(c *config.Chicks) {
		c.Egress.Allow = []string{"pypi.org:443", "*.example.com", "docs.rs"}
	}))
	c := ChickInfo{ID: "c-1", Channel: "a/b", Tier: "local"}
	for _, tc := range []struct {
		dest string
		want bool
	}{
		{"pypi.org:443", true},
		{"pypi.org", false}, // any port is more than 443
		{"docs.rs", true},
		{"docs.rs:443", true},
		{"*.example.com", true},
		{"*.a.example.com", true},
		{"a.example.com:80", true},
		{"example.com", false},
		{"*.com", false},
	} {
		got, err := p.Covered(c, tc.dest)
		if err != nil || got != tc.want {
			t.Errorf("Covered(%q) = %v, %v; want %v", tc.dest, got, err, tc.want)
		}
	}
	if _, err := p.Covered(c, "bad host!"); err == nil {
		t.Error("Covered accepted a bad destination")
	}
}

func TestTrustedIsOperatorAddressesOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := newPolicy(t, dir, chicksConfig(t, func(c *config.Chicks) {
		c.Egress.Allow = []string{"10.0.0.5:8080", "pypi.org", "192.168.1.1", "[::ffff:10.0.0.8]:22"}
		c.Tiers["lan"] = config.Tier{Provider: "ollama", Model: "m", Egress: config.TierEgress{Allow: []string{"172.16.0.9"}}}
		c.Egress.Channels = map[string][]string{"a/C1": {"[fd00::7]:443"}}
		c.Egress.Hosts = map[string]string{"Mirror.LAN": "192.0.2.9"}
	}))
	c := ChickInfo{ID: "c-1", Channel: "a/C1", Tier: "lan"}
	// Approvals name addresses too, but never make them trusted.
	if err := p.Approve(c, ScopeChick, "10.9.9.9:443"); err != nil {
		t.Fatal(err)
	}
	if err := p.Approve(c, ScopeChannel, "127.0.0.1:22"); err != nil {
		t.Fatal(err)
	}
	other := ChickInfo{ID: "c-2", Channel: "a/C2", Tier: "local"}
	// Each address is trusted at the ports its entry admits, written with
	// the port asked for: an entry with a port trusts nothing at another.
	for _, tc := range []struct {
		chick ChickInfo
		port  int
		want  []string
	}{
		{c, 443, []string{"172.16.0.9:443", "192.168.1.1:443", "[fd00::7]:443"}},
		{c, 8080, []string{"10.0.0.5:8080", "172.16.0.9:8080", "192.168.1.1:8080"}},
		{c, 22, []string{"10.0.0.8:22", "172.16.0.9:22", "192.168.1.1:22"}},
		{other, 443, []string{"192.168.1.1:443"}},
		{other, 8080, []string{"10.0.0.5:8080", "192.168.1.1:8080"}},
		{other, 0, nil},
		{other, 65536, nil},
	} {
		if got := p.Trusted(tc.chick, tc.port); !slices.Equal(got, tc.want) {
			t.Errorf("Trusted(%s, %d) = %q, want %q", tc.chick.ID, tc.port, got, tc.want)
		}
	}
	if got := p.Addresses("mirror.lan."); !slices.Equal(got, []string{"192.0.2.9"}) {
		t.Errorf("Addresses(mirror.lan.) = %v", got)
	}
	if got := p.Addresses("pypi.org"); got != nil {
		t.Errorf("Addresses(pypi.org) = %v, want none", got)
	}
}

// TestParseRequest: what a chick may ask for is one host and one port;
// patterns and port-less destinations are the operator's.
func TestParseRequest(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want, err string }{
		{"pypi.org:443", "pypi.org:443", ""},
		{" PyPI.Org.:443 ", "pypi.org:443", ""},
		{"192.0.2.7:8080", "192.0.2.7:8080", ""},
		{"[::ffff:192.0.2.7]:8080", "192.0.2.7:8080", ""},
		{"[2001:DB8::1]:443", "[2001:db8::1]:443", ""},
		{"[::10.0.0.1]:22", "[::a00:1]:22", ""}, // another address; the gate judges it as 10.0.0.1
		{"*.example.com", "", "is a wildcard"},
		{"*.example.com:443", "", "is a wildcard"},
		{"*", "", "is a wildcard"},
		{"*:443", "", "is a wildcard"},
		{"a.*.com:443", "", "is a wildcard"},
		{"10.0.0.0/8", "", "not a host and port"},
		{"[2001:db8::/32]:443", "", "not a host and port"},
		{"pypi.org", "", `names no port; ask for one host and port, such as "pypi.org:443"`},
		{"192.0.2.7", "", `such as "192.0.2.7:443"`},
		{"2001:db8::1", "", `such as "[2001:db8::1]:443"`},
		{"pypi.org:0", "", "port must be 1-65535"},
		{"pypi.org:https", "", "port must be 1-65535"},
		{"bad host!:443", "", "bad host name"},
		{"[fe80::1%eth0]:443", "", "ask for one host and port"},
		{"", "", "empty destination"},
		{strings.Repeat("a", 301) + ":443", "", "longer than 300"},
	} {
		got, err := ParseRequest(c.in)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("ParseRequest(%q) = %q, %v; want %q", c.in, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrNotRequestable)):
			t.Errorf("ParseRequest(%q) = %q, %v; want an error saying %q", c.in, got, err, c.err)
		}
	}
}

// TestApproveTakesOneHostAndPort: an approval is what a chick may ask for
// (ParseRequest): a pattern or a port-less destination is refused and
// nothing changes.
func TestApproveTakesOneHostAndPort(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := newPolicy(t, dir, chicksConfig(t, func(*config.Chicks) {}))
	c := ChickInfo{ID: "c-1", Channel: "a/C1", Tier: "local"}
	for _, d := range []string{"*.golang.org", "*", "*:443", "pypi.org", "10.0.0.0/8"} {
		for _, scope := range []Scope{ScopeChick, ScopeChannel} {
			if err := p.Approve(c, scope, d); !errors.Is(err, ErrNotRequestable) {
				t.Errorf("Approve(%s, %q) = %v, want ErrNotRequestable", scope, d, err)
			}
		}
	}
	for _, host := range []string{"proxy.golang.org", "pypi.org", "10.0.0.1"} {
		if ok, _ := p.Allowed(c, host, 443); ok {
			t.Errorf("%s:443 allowed after refused approvals", host)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, StateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused approvals were saved: %v", err)
	}
}

func TestApprovalsPersistAcrossReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cc := chicksConfig(t, func(*config.Chicks) {})
	p := newPolicy(t, dir, cc)
	a := ChickInfo{ID: "c-a", Channel: "slack/C1", Tier: "local"}
	b := ChickInfo{ID: "c-b", Channel: "slack/C1", Tier: "local"}
	other := ChickInfo{ID: "c-o", Channel: "slack/C2", Tier: "local"}
	if ok, _ := p.Allowed(a, "pypi.org", 443); ok {
		t.Fatal("allowed before any approval")
	}
	must(t, p.Approve(a, ScopeChick, "PyPI.org.:443"))
	must(t, p.Approve(a, ScopeChannel, "proxy.golang.org:443"))
	must(t, p.Approve(a, ScopeChannel, "Proxy.golang.org:443")) // twice: kept once
	check := func(p *Policy, when string) {
		t.Helper()
		for _, c := range []struct {
			chick ChickInfo
			host  string
			want  bool
		}{
			{a, "pypi.org", true},
			{b, "pypi.org", false}, // once: this chick only
			{a, "proxy.golang.org", true},
			{b, "proxy.golang.org", true}, // always: the whole channel
			{other, "proxy.golang.org", false},
		} {
			if got, _ := p.Allowed(c.chick, c.host, 443); got != c.want {
				t.Errorf("%s: Allowed(%s, %s) = %v, want %v", when, c.chick.ID, c.host, got, c.want)
			}
		}
	}
	check(p, "before reload")
	// Mother restarts while chick a runs: both kinds survive.
	p2 := newPolicy(t, dir, cc)
	check(p2, "after reload")
	b2, _ := os.ReadFile(filepath.Join(dir, StateFile))
	if strings.Count(string(b2), "proxy.golang.org:443") != 1 || !strings.Contains(string(b2), `"pypi.org:443"`) {
		t.Errorf("state file:\n%s", b2)
	}
	// Chick a ends: its own approval goes, the channel's stays, on disk too.
	must(t, p2.ChickEnded("c-a"))
	p3 := newPolicy(t, dir, cc)
	for _, pp := range []*Policy{p2, p3} {
		if ok, _ := pp.Allowed(a, "pypi.org", 443); ok {
			t.Error("a once-approval outlived its chick")
		}
		if ok, _ := pp.Allowed(b, "proxy.golang.org", 443); !ok {
			t.Error("the channel's approval went with the chick")
		}
	}
	// Approvals of chicks that ended while Mother was down are dropped at start.
	must(t, p3.Approve(b, ScopeChick, "docs.rs:443"))
	p4 := newPolicy(t, dir, cc)
	must(t, p4.DropChicks(func(id string) bool { return id == "c-b" }))
	if ok, _ := p4.Allowed(b, "docs.rs", 443); ok {
		t.Error("DropChicks kept the approval of an ended chick")
	}
	// A config reload keeps the approvals.
	p4.SetConfig(chicksConfig(t, func(c *config.Chicks) { c.Egress.Allow = []string{"docs.rs"} }))
	if ok, _ := p4.Allowed(b, "proxy.golang.org", 443); !ok {
		t.Error("a reload dropped the channel's approval")
	}
	if ok, _ := p4.Allowed(other, "docs.rs", 443); !ok {
		t.Error("a reload did not apply the new allowlist")
	}
	if err := p4.Approve(a, ScopeChick, "not a host!"); err == nil {
		t.Error("Approve took a bad destination")
	}
}

func TestBadStateFileIsAClearError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, StateFile), []byte("{not json"), 0o600))
	_, err := NewPolicy(Options{Config: chicksConfig(t, func(*config.Chicks) {}), StateDir: dir})
	if err == nil || !strings.Contains(err.Error(), StateFile) {
		t.Fatalf("NewPolicy with a broken state file: %v", err)
	}
}

func TestSaveFailureChangesNothing(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state")
	p := newPolicy(t, dir, chicksConfig(t, func(*config.Chicks) {}))
	// A file where the state directory should be: the save fails.
	must(t, os.WriteFile(dir, []byte("x"), 0o600))
	c := ChickInfo{ID: "c-1", Channel: "a/b"}
	if err := p.Approve(c, ScopeChannel, "pypi.org:443"); err == nil {
		t.Fatal("Approve succeeded without saving")
	}
	if ok, _ := p.Allowed(c, "pypi.org", 443); ok {
		t.Error("an approval that was not saved is in force")
	}
}

func TestLedger(t *testing.T) {
	t.Parallel()
	var loads sync.Map
	cc := chicksConfig(t, func(c *config.Chicks) { c.Egress.MaxBytes = "1k" })
	p, err := NewPolicy(Options{Config: cc, LoadSent: func(id string) int64 {
		n, _ := loads.LoadOrStore(id, 0)
		loads.Store(id, n.(int)+1)
		if id == "c-old" {
			return 1000 // sent before a restart
		}
		return 0
	}})
	must(t, err)
	if rem, capped := p.Remaining("c-new"); !capped || rem != 1024 {
		t.Errorf("Remaining(new) = %d, %v; want 1024, capped", rem, capped)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); p.AddSent("c-new", 100) }()
	}
	wg.Wait()
	if got := p.Sent("c-new"); got != 800 {
		t.Errorf("Sent = %d, want 800", got)
	}
	if rem, _ := p.Remaining("c-old"); rem != 24 {
		t.Errorf("Remaining(old) = %d, want 24 (the restart did not reset it)", rem)
	}
	p.AddSent("c-old", 50)
	if rem, _ := p.Remaining("c-old"); rem != 0 {
		t.Errorf("Remaining over the cap = %d, want 0", rem)
	}
	for _, id := range []string{"c-new", "c-old"} {
		if n, _ := loads.Load(id); n.(int) != 1 {
			t.Errorf("LoadSent(%s) called %d times, want once", id, n)
		}
	}
	must(t, p.ChickEnded("c-new"))
	p.SetConfig(chicksConfig(t, func(c *config.Chicks) { c.Egress.MaxBytes = "unlimited" }))
	if rem, capped := p.Remaining("c-old"); capped || rem != 0 {
		t.Errorf("unlimited: Remaining = %d, %v; want no cap", rem, capped)
	}
	if p.RequestTimeout() != 10*time.Minute {
		t.Errorf("RequestTimeout = %v, want the default 10m", p.RequestTimeout())
	}
}

func TestDestination(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		host string
		port int
		want string
	}{
		{"github.com", 443, "github.com:443"},
		{"2001:db8::1", 443, "[2001:db8::1]:443"},
		{"[2001:db8::1]", 80, "[2001:db8::1]:80"},
		{"pypi.org", 0, "pypi.org"},
	} {
		if got := Destination(c.host, c.port); got != c.want {
			t.Errorf("Destination(%q, %d) = %q, want %q", c.host, c.port, got, c.want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestOlderApprovalsStillHold: a wildcard or port-less approval kept in
// the state file from before chicks could no longer ask for one still
// holds (an admin approved it); new ones cannot be made.
func TestOlderApprovalsStillHold(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, StateFile), []byte(`{"channels":{"a/C1":["*.golang.org","docs.rs"]}}`), 0o600))
	p := newPolicy(t, dir, chicksConfig(t, func(*config.Chicks) {}))
	c := ChickInfo{ID: "c-1", Channel: "a/C1", Tier: "local"}
	for _, host := range []string{"proxy.golang.org", "docs.rs"} {
		if ok, _ := p.Allowed(c, host, 8443); !ok {
			t.Errorf("the kept approval of %s does not hold", host)
		}
	}
	if err := p.Approve(c, ScopeChannel, "*.golang.org"); !errors.Is(err, ErrNotRequestable) {
		t.Errorf("Approve(*.golang.org) = %v, want ErrNotRequestable", err)
	}
}
