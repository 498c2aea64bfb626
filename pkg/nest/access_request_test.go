package nest_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/egress"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// TestRequestAccessRefusesPatterns: over the chick's real gRPC
// connection, a request_access for a wildcard, an address range or a
// destination without a port is refused by the nest with a message that
// says why, whatever the chick checked, and never reaches the desk (no
// admin is asked); one host and port goes to the desk in the form the
// policy keeps.
func TestRequestAccessRefusesPatterns(t *testing.T) {
	t.Parallel()
	g := newGateFixture(t)
	id, tok := g.spawn(t)
	ctx := wire.Credentials(t.Context(), id, tok)
	d := &accessDesk{grant: egress.Grant{Granted: true, Scope: egress.ScopeChick}}
	g.srv.SetAccess(d)
	for _, c := range []struct{ dest, want string }{
		{"*.example.com", "is a wildcard"},
		{"*.example.com:443", "is a wildcard"},
		{"*", "is a wildcard"},
		{"*:443", "is a wildcard"},
		{"pypi.*:443", "is a wildcard"},
		{"10.0.0.0/8", "not a host and port"},
		{"10.0.0.0/8:443", "not a host and port"},
		{"pypi.org", "names no port"},
		{"192.0.2.7", "names no port"},
		{"2001:db8::1", "names no port"},
		{"", "empty destination"},
		{"not a host!:443", "ask for one host and port"},
	} {
		_, err := g.client.RequestAccess(ctx, &pb.RequestAccessRequest{Destination: c.dest, Reason: "r"})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.want) {
			t.Errorf("request_access %q: %v, want InvalidArgument saying %q", c.dest, err, c.want)
		}
	}
	asked := func() []string {
		d.mu.Lock()
		defer d.mu.Unlock()
		out := d.asked
		d.asked = nil
		return out
	}
	if got := asked(); len(got) != 0 {
		t.Errorf("refused requests reached the desk: %q", got)
	}
	for _, c := range []struct{ dest, want string }{
		{"PyPI.org.:443", "pypi.org:443"},
		{"[::ffff:192.0.2.7]:8080", "192.0.2.7:8080"},
		{"[2001:DB8::1]:443", "[2001:db8::1]:443"},
	} {
		if _, err := g.client.RequestAccess(ctx, &pb.RequestAccessRequest{Destination: c.dest, Reason: "r"}); err != nil {
			t.Errorf("request_access %q: %v", c.dest, err)
			continue
		}
		if want, got := id+" cli/local "+c.want+" r", asked(); len(got) != 1 || got[0] != want {
			t.Errorf("request_access %q: the desk was asked %q, want %q", c.dest, got, want)
		}
	}
}
