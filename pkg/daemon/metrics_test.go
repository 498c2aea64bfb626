package daemon

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestRequireToken: the token opens the listener as a bearer token or as
// a basic-auth password, and nothing else does.
func TestRequireToken(t *testing.T) {
	t.Parallel()
	const tok = "metrics-token-0123456789"
	srv := httptest.NewServer(requireToken(tok, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("in")) })))
	defer srv.Close()
	tests := []struct {
		name string
		set  func(r *http.Request)
		want int
	}{
		{"none", func(*http.Request) {}, http.StatusUnauthorized},
		{"bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }, http.StatusOK},
		{"bearer lower case", func(r *http.Request) { r.Header.Set("Authorization", "bearer "+tok) }, http.StatusOK},
		{"basic", func(r *http.Request) { r.SetBasicAuth("prometheus", tok) }, http.StatusOK},
		{"basic without user", func(r *http.Request) { r.SetBasicAuth("", tok) }, http.StatusOK},
		{"wrong bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok+"x") }, http.StatusUnauthorized},
		{"token as basic user", func(r *http.Request) { r.SetBasicAuth(tok, "") }, http.StatusUnauthorized},
		{"prefix", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok[:10]) }, http.StatusUnauthorized},
		{"query", func(r *http.Request) { r.URL.RawQuery = "token=" + tok }, http.StatusUnauthorized},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/status", nil)
		tt.set(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("%s: %s, want %d", tt.name, resp.Status, tt.want)
		}
		if tt.want == http.StatusUnauthorized && len(resp.Header.Values("WWW-Authenticate")) == 0 {
			t.Errorf("%s: a 401 without WWW-Authenticate (a browser would not ask)", tt.name)
		}
	}
}
