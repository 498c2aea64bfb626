package egress

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotRequestable is wrapped by ParseRequest's errors: the destination
// is not one a chick may ask for.
var ErrNotRequestable = errors.New("not a destination a chick may ask for")

// ParseRequest checks a destination a chick asks for with request_access
// (or an admin's approval names) and returns it in the form the policy
// keeps ("pypi.org:443", "192.0.2.7:8080", "[2001:db8::1]:443"). A chick
// may ask for exactly one host and one port: never a wildcard ("*.d",
// "*", "*:443"), an address range, or a destination without a port (that
// would allow every port). Those are the operator's to write in
// chicks.egress.allow. The chick's own checks are never relied on: the
// nest and Mother call this on what the chick sent.
func ParseRequest(d string) (string, error) {
	d = strings.TrimSpace(d)
	switch {
	case d == "":
		return "", fmt.Errorf("%w: empty destination; ask for one host and port, such as \"pypi.org:443\"", ErrNotRequestable)
	case len(d) > 300:
		return "", fmt.Errorf("%w: destination longer than 300 characters", ErrNotRequestable)
	case strings.Contains(d, "*"):
		return "", fmt.Errorf("%w: %q is a wildcard; a chick may ask for one host and port only (such as \"files.example.com:443\"): only the operator can allow a pattern, in chicks.egress.allow", ErrNotRequestable, d)
	case strings.Contains(d, "/"):
		return "", fmt.Errorf("%w: %q is not a host and port (an address range or a URL path?); a chick may ask for one host and port only, such as \"192.0.2.7:443\"", ErrNotRequestable, d)
	}
	e, err := parseEntry(d)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v; ask for one host and port, such as \"pypi.org:443\"", ErrNotRequestable, d, err)
	}
	if e.wildcard {
		// parseEntry takes "*.d" only; the check above already refused it.
		return "", fmt.Errorf("%w: %q is a wildcard", ErrNotRequestable, d)
	}
	if e.port == 0 {
		hint := netJoin(e.name, 443)
		if e.addr.IsValid() {
			hint = netJoin(e.addr.String(), 443)
		}
		return "", fmt.Errorf("%w: %q names no port; ask for one host and port, such as %q (without a port it would allow every port: only the operator can allow that)", ErrNotRequestable, d, hint)
	}
	return e.String(), nil
}
