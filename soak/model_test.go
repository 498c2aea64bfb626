//go:build soak

package soak

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// Modes of the model server, per model.
// chickFailed is how the user is told a chick failed, with the reason.
var chickFailed = regexp.MustCompile(`Chick c-[0-9a-f]+ failed[^\n]*`)

const (
	modeOK      = "ok"
	modeReset   = "reset"   // the connection is cut before any answer
	modeSlow    = "slow"    // the answer comes after slowFor
	modeGarbage = "garbage" // a line of the stream is not JSON
)

// modelFront sits on a fixed address before the fake Ollama and breaks it
// on demand, per model: nothing listening (down), connections cut, slow
// answers, garbage.
type modelFront struct {
	addr    string
	backend *ollamatest.Server
	slowFor time.Duration
	mu      sync.Mutex
	modes   map[string]string
	srv     *http.Server
}

func (f *modelFront) url() string { return "http://" + f.addr }

func (f *modelFront) set(model, mode string) {
	f.mu.Lock()
	f.modes[model] = mode
	f.mu.Unlock()
}

// up starts listening (until then the model server is down).
func (f *modelFront) up(t *testing.T) {
	t.Helper()
	target, _ := url.Parse(f.backend.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	f.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct{ Model string }
		json.Unmarshal(body, &req)
		f.mu.Lock()
		mode := f.modes[req.Model]
		f.mu.Unlock()
		if r.URL.Path != "/api/chat" && mode != modeReset {
			mode = modeOK // /api/show and the like answer normally
		}
		switch mode {
		case modeReset:
			if hj, ok := w.(http.Hijacker); ok {
				c, _, _ := hj.Hijack()
				c.Close()
				return
			}
		case modeSlow:
			select {
			case <-time.After(f.slowFor):
			case <-r.Context().Done():
				return
			}
		case modeGarbage:
			w.Header().Set("Content-Type", "application/x-ndjson")
			io.WriteString(w, `{"model":"`+req.Model+`","message":{"role":"assistant","content":"Hel"},"done":false}`+"\n")
			io.WriteString(w, "<html>502 Bad Gateway</html> this is not JSON\n")
			return
		}
		proxy.ServeHTTP(w, r)
	})}
	var lis net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if lis, err = net.Listen("tcp", f.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	go f.srv.Serve(lis)
	t.Cleanup(func() { f.srv.Close() })
}

// TestSoakOllama: the model server down (Mother and her chicks), cut
// connections, a 60 s answer (SOAK_SLOW), and garbage in the stream. Each
// time the user gets a clear answer or a clear error, nothing is lost, no
// chick is mistaken for hung, and Mother recovers without a restart.
func TestSoakOllama(t *testing.T) {
	api := docker(t)
	slow := 60 * time.Second
	if d, err := time.ParseDuration(os.Getenv("SOAK_SLOW")); err == nil {
		slow = d
	}
	spawn := spawner("model-")
	backend := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if turn, ok := spawn(r); ok {
			return turn
		}
		if toolCount(r) == 0 {
			return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "bash", Args: map[string]any{"label": "work for " + r.LastUser(), "command": "echo working"}}}}
		}
		return ollamatest.Turn{Text: r.LastUser() + " complete"}
	})
	defer backend.Close()
	front := &modelFront{addr: freeAddr(t), backend: backend, slowFor: slow, modes: map[string]string{}}
	data := newData(t, api, chicksConfig(t, front.url(), nil))
	p := startMother(t, data, true)

	// 1. Down: nothing listens where the model server should be.
	p.say(t, "hello while the model server is down")
	p.waitOut(t, "I cannot reach my model server", time.Minute)
	front.up(t)
	answer := stillAnswers(t, p, "once it is back")
	figure(t, "model server down: the user got \"I cannot reach my model server at %s\"; once it listened again the next message was answered (%s), no restart", front.addr, answer.Round(time.Millisecond))

	// 2. The chicks' model cuts every connection.
	front.set(chickModel, modeReset)
	start := time.Now()
	from := p.mark()
	p.say(t, "please do model-reset")
	p.waitFrom(t, from, "(chick ", 3*time.Minute)
	out := p.stdout.String()[from:]
	if !chickFailed.MatchString(out) {
		t.Errorf("a chick whose model cuts every connection should end failed with the reason:\n%s", out)
	}
	figure(t, "chick model cutting connections: the chick ended and the user was told in %s (%q)", time.Since(start).Round(time.Millisecond), oneLine(chickFailed.FindString(out)))
	front.set(chickModel, modeOK)

	// 3. Slow: a chick's model call and Mother's own both take SOAK_SLOW.
	front.set(chickModel, modeSlow)
	from = p.mark()
	start = time.Now()
	p.say(t, "please do model-slow")
	p.waitFrom(t, from, "Started.", time.Minute)
	front.set(motherModel, modeSlow)
	p.say(t, "are you slow today")
	p.waitFrom(t, from, "Yes, I am here: are you slow today", slow+time.Minute)
	motherSlow := time.Since(start)
	front.set(motherModel, modeOK)
	front.set(chickModel, modeOK)
	p.waitFrom(t, from, "model-slow complete", slow+2*time.Minute)
	chickSlow := time.Since(start)
	if strings.Contains(p.stdout.String()[from:], "stopped answering") {
		t.Errorf("a chick waiting on a slow model was taken for hung:\n%s", p.stdout.String()[from:])
	}
	figure(t, "model answering after %s: Mother's answer arrived after %s, the chick's run finished after %s, not taken for hung (heartbeats went on)", slow, motherSlow.Round(time.Millisecond), chickSlow.Round(time.Millisecond))

	// 4. Garbage in the stream, for Mother and for a chick.
	front.set(motherModel, modeGarbage)
	from = p.mark()
	p.say(t, "hello through garbage")
	p.waitFrom(t, from, "My model server", time.Minute)
	motherErr := oneLine(p.stdout.String()[from:])
	front.set(motherModel, modeOK)
	front.set(chickModel, modeGarbage)
	from = p.mark()
	p.say(t, "please do model-garbage")
	p.waitFrom(t, from, "(chick ", 3*time.Minute)
	chickErr := p.stdout.String()[from:]
	if !chickFailed.MatchString(chickErr) {
		t.Fatalf("a chick whose model streams garbage should stop with the reason:\n%s", chickErr)
	}
	front.set(chickModel, modeOK)
	stillAnswers(t, p, "after the garbage")
	figure(t, "garbage in the model's stream: Mother said %q; the chick ended with %q; the next message was answered", motherErr, oneLine(chickFailed.FindString(chickErr)))

	if code := p.finish(t, time.Minute); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if n := len(containers(t, api, data)); n != 0 {
		t.Errorf("%d containers left", n)
	}
	checkStore(t, data)
}
