// Package enginetest is a fake Docker Engine API at the wire: an HTTP
// server on a unix socket that the real Docker client talks to, answering
// each call as a test says (a status and body, a hang, a dropped
// connection), so the driver's error paths run through the real client.
package enginetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// APIVersion is the Engine API version the fake announces.
const APIVersion = "1.41"

// Answer is how the fake answers one call.
type Answer struct {
	// Status and Body (JSON) are the response.
	Status int
	Body   any
	// Hang: no answer until the client gives up (or the engine closes);
	// with a Status, the status line and headers go out first and the
	// body never comes (a wait on a container that does not exit).
	Hang bool
	// Drop: the connection is closed without an answer.
	Drop bool
}

// Error answers status with the engine's error body {"message": msg}.
func Error(status int, msg string) Answer {
	return Answer{Status: status, Body: map[string]string{"message": msg}}
}

// JSON answers status with body encoded as JSON.
func JSON(status int, body any) Answer { return Answer{Status: status, Body: body} }

// Hang never answers.
func Hang() Answer { return Answer{Hang: true} }

// Pending answers 200 at once and then sends nothing more, as the engine
// does to a wait on a container that keeps running.
func Pending() Answer { return Answer{Status: http.StatusOK, Hang: true} }

// Drop closes the connection without answering.
func Drop() Answer { return Answer{Drop: true} }

type rule struct {
	method string
	path   *regexp.Regexp
	answer Answer
	once   bool // dropped once it answered
}

// Engine is a fake engine listening on a unix socket.
type Engine struct {
	// Host is the address to give the client ("unix:///...").
	Host string

	srv    *http.Server
	closed chan struct{}
	once   sync.Once

	mu     sync.Mutex
	rules  []rule
	calls  []string
	bodies []string
}

// New starts a fake engine that answers _ping and /version; every other
// call is a 500 until On says otherwise. It stops at the test's end.
func New(t testing.TB) *Engine {
	t.Helper()
	// Short: a unix socket path is limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "fe-")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	e := &Engine{Host: "unix://" + sock, closed: make(chan struct{})}
	e.srv = &http.Server{Handler: http.HandlerFunc(e.serve)}
	go e.srv.Serve(l)
	t.Cleanup(func() {
		e.Close()
		os.RemoveAll(dir)
	})
	return e
}

// Close stops the engine: hung calls end, new ones find no socket.
func (e *Engine) Close() {
	e.once.Do(func() {
		close(e.closed)
		e.srv.Close()
	})
}

// On makes the engine answer calls of method to path with a. path is the
// Engine API path without the version prefix; "{}" stands for one path
// segment ("/containers/{}/start"). A later rule for the same call wins.
func (e *Engine) On(method, path string, a Answer) { e.on(method, path, a, false) }

// OnOnce is On for the next such call only; the rules before it answer
// the calls after.
func (e *Engine) OnOnce(method, path string, a Answer) { e.on(method, path, a, true) }

func (e *Engine) on(method, path string, a Answer, once bool) {
	re := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(path), `\{\}`, `[^/]+`) + "$")
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rules = append([]rule{{method: method, path: re, answer: a, once: once}}, e.rules...)
}

// Calls lists the calls received, "METHOD /path" without the version
// prefix, in order.
func (e *Engine) Calls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.calls...)
}

// Bodies lists the calls' request bodies, in the order of Calls.
func (e *Engine) Bodies() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.bodies...)
}

var versionPrefix = regexp.MustCompile(`^/v[0-9.]+`)

func (e *Engine) serve(w http.ResponseWriter, r *http.Request) {
	path := versionPrefix.ReplaceAllString(r.URL.Path, "")
	body, _ := io.ReadAll(r.Body)
	e.mu.Lock()
	e.calls = append(e.calls, r.Method+" "+path)
	e.bodies = append(e.bodies, string(body))
	a, found := Answer{}, false
	for i, ru := range e.rules {
		if ru.method == r.Method && ru.path.MatchString(path) {
			a, found = ru.answer, true
			if ru.once {
				e.rules = slices.Delete(e.rules, i, i+1)
			}
			break
		}
	}
	e.mu.Unlock()
	w.Header().Set("Api-Version", APIVersion)
	w.Header().Set("Server", "Docker/fake (linux)")
	if !found {
		switch {
		case path == "/_ping":
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, "OK")
			return
		case r.Method == http.MethodGet && path == "/version":
			a = JSON(http.StatusOK, map[string]string{"Version": "fake", "ApiVersion": APIVersion, "Os": "linux", "Arch": "amd64"})
		default:
			a = Error(http.StatusInternalServerError, "enginetest: no answer set for "+r.Method+" "+path)
		}
	}
	switch {
	case a.Hang:
		if a.Status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(a.Status)
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
		select {
		case <-r.Context().Done():
		case <-e.closed:
		}
		return
	case a.Drop:
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic("enginetest: cannot hijack the connection")
		}
		conn, _, err := hj.Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.Status)
	if a.Body != nil {
		_ = json.NewEncoder(w).Encode(a.Body)
	}
}
