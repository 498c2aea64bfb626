// Package loopback keeps the adapters' fuzz tests on this machine: fuzzed
// payloads carry attachment URLs for any host, and nothing may leave the
// machine, yet the download must still happen so that hostile file names
// reach the code that saves them.
package loopback

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// Transport returns a RoundTripper that sends requests for loopback
// addresses through base (nil: http.DefaultTransport) and every other
// request to a local file server, started for tb, that answers any path
// with a few bytes naming it.
func Transport(tb testing.TB, base http.RoundTripper) http.RoundTripper {
	tb.Helper()
	if base == nil {
		base = http.DefaultTransport
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "content of %s", r.URL.Path)
	}))
	tb.Cleanup(srv.Close)
	files, err := url.Parse(srv.URL)
	if err != nil {
		tb.Fatal(err)
	}
	return only{base, files}
}

type only struct {
	base  http.RoundTripper
	files *url.URL
}

func (l only) RoundTrip(r *http.Request) (*http.Response, error) {
	if ip := net.ParseIP(r.URL.Hostname()); ip == nil || !ip.IsLoopback() {
		r = r.Clone(r.Context())
		r.URL.Scheme, r.URL.Host, r.Host = l.files.Scheme, l.files.Host, l.files.Host
	}
	return l.base.RoundTrip(r)
}
