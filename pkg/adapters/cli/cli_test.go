package cli

import (
	"bufio"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/chat/chattest"
)

// terminal is the terminal adapter on real pipes: the test writes lines to
// its stdin and reads its stdout.
type terminal struct {
	a     *Adapter
	stdin *os.File

	mu  sync.Mutex
	out []string
}

func newTerminal(t *testing.T) chattest.Platform {
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	term := &terminal{a: New("cli", inR, outW), stdin: inW}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			term.mu.Lock()
			term.out = append(term.out, sc.Text())
			term.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		outW.Close()
		<-done
		inR.Close()
		outR.Close()
	})
	return term
}

func (p *terminal) Adapter() chat.Adapter { return p.a }
func (p *terminal) Channel() string       { return ChannelID }
func (p *terminal) DM() string            { return ChannelID }

func (p *terminal) Send(t *testing.T, in chattest.Incoming) {
	if _, err := p.stdin.WriteString(in.Text + "\n"); err != nil {
		t.Fatalf("write to stdin: %v", err)
	}
}

// Answers is everything printed so far, as one message: the terminal has
// no message boundaries.
func (p *terminal) Answers(t *testing.T, _ string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.out) == 0 {
		return nil
	}
	return []string{strings.Join(p.out, "\n")}
}

// Uploaded reads the "[attached title: path]" lines.
func (p *terminal) Uploaded(t *testing.T, _ string) []chattest.File {
	p.mu.Lock()
	defer p.mu.Unlock()
	var files []chattest.File
	for _, l := range p.out {
		rest, ok := strings.CutPrefix(l, "[attached ")
		if !ok {
			continue
		}
		title, path, _ := strings.Cut(strings.TrimSuffix(rest, "]"), ": ")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("the printed path %q: %v", path, err)
		}
		files = append(files, chattest.File{Name: title, Data: data})
	}
	return files
}

func TestConformance(t *testing.T) {
	chattest.Run(t, chattest.Harness{
		New: newTerminal,
		Lacks: map[chattest.Capability]string{
			chattest.Mentions:       "the terminal is one direct channel: every line is addressed to Mother",
			chattest.AttachmentsIn:  "lines on stdin carry no files",
			chattest.Edits:          "stdout is append-only: progress is a line per tool, never edited",
			chattest.RateLimit:      "no platform to limit it",
			chattest.DirectMessages: "the terminal is one channel and whoever sits at it is the operator: a direct message is printed there (TestDirectMessagePrints)",
			chattest.Reconnect:      "no connection to lose: the channel ends with stdin",
			chattest.Choices:        "a terminal has no buttons: the operator types the answer",
			chattest.ClickReplies:   "no buttons, so no clicks to answer",
		},
	})
}

// TestDirectMessagePrints: a message for an admin is printed on the
// terminal, its operator's.
func TestDirectMessagePrints(t *testing.T) {
	p := newTerminal(t).(*terminal)
	if err := p.a.DirectMessage(t.Context(), "", "disk full: I cannot write /data"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if a := p.Answers(t, ChannelID); len(a) == 1 && strings.Contains(a[0], "disk full: I cannot write /data") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("printed %q", p.Answers(t, ChannelID))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// hostileText carries what a hostile chick or model puts in its text: a
// window title (OSC 0 ended by BEL), a clear screen, a clipboard write
// (OSC 52 ended by ST), a C1 CSI, a carriage return and DEL.
const hostileText = "A\x1b]0;pwned\x07B\x1b[2JC\x1b]52;c;cm0gLXJmIH4K\x1b\\D\u009b31mE\rF\x7fG"

// TestControlsShown: every way the adapter prints (progress labels, tool
// errors, the fallback's name, the answer, notices, attachments' titles
// and paths, the run's title) shows a control character, never sends it
// to the terminal, and keeps the text around it.
func TestControlsShown(t *testing.T) {
	p := newTerminal(t).(*terminal)
	ctx := t.Context()
	r := p.a.NewReply(ctx, ChannelID, nil, chat.ReplyOptions{Title: "title " + hostileText})
	r.Event(ctx, agent.Event{Type: agent.EventToolStart, Label: "label " + hostileText})
	r.Event(ctx, agent.Event{Type: agent.EventToolEnd, Label: "failed " + hostileText, IsError: true, Result: "result " + hostileText})
	r.Event(ctx, agent.Event{Type: agent.EventRunEnd, AnsweredBy: "fallback " + hostileText})
	if _, err := r.Finish(ctx, "answer "+hostileText); err != nil {
		t.Fatal(err)
	}
	if _, err := p.a.Post(ctx, ChannelID, "notice "+hostileText); err != nil {
		t.Fatal(err)
	}
	if err := p.a.Upload(ctx, ChannelID, "/tmp/file "+hostileText, "attached "+hostileText); err != nil {
		t.Fatal(err)
	}
	want := []string{"label", "failed", "result", "fallback", "answer", "notice", "/tmp/file", "attached", "title"}
	shown := "A^[]0;pwned^GB^[[2JC^[]52;c;cm0gLXJmIH4K^[\\D^[[31mE^MF^?G"
	deadline := time.Now().Add(5 * time.Second)
	var out string
	for {
		if a := p.Answers(t, ChannelID); len(a) == 1 {
			out = a[0]
		}
		if strings.Count(out, shown) == len(want)+4 || time.Now().After(deadline) {
			break // the title prefixes the reply's 4 lines
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, b := range []string{"\x1b", "\x07", "\r", "\x7f", "\u009b", "\u009d"} {
		if n := strings.Count(out, b); n > 0 {
			t.Errorf("the terminal got %d raw %q:\n%q", n, b, out)
		}
	}
	for _, w := range want {
		if !strings.Contains(out, w+" "+shown) {
			t.Errorf("%q is not shown as %q:\n%s", w, w+" "+shown, out)
		}
	}
}
