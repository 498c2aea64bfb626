// Package cli is the terminal adapter: the terminal is one channel
// ("cli/local"), each line on stdin is a message from the local user, and
// replies and progress are written to stdout, with every control
// character but newline and tab shown visibly (package termtext).
package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"

	"github.com/mother-chat/mother/pkg/adapters/internal/feed"
	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/termtext"
)

// ChannelID is the terminal's one channel.
const ChannelID = "local"

// SelfID is Mother's sender id in the terminal channel.
const SelfID = "mother"

// The "cli" type has no settings of its own: config.json gives it only the
// shared fields (admins, dm, quiet, quietChannels), and any other field is
// an error naming it.
func init() {
	chat.Register("cli", chat.Type{
		New: func(env chat.Env) (chat.Adapter, error) {
			return New(env.Name, os.Stdin, os.Stdout), nil
		},
	})
}

// Adapter reads lines from in and writes to out.
type Adapter struct {
	name string
	in   io.Reader
	now  func() time.Time
	user chat.UserInfo

	outMu sync.Mutex
	out   io.Writer

	// prompt is written when Mother waits for a line ("> " when stdin
	// is a terminal; none for a pipe, whose output is read by programs).
	prompt string

	done    chan struct{}
	started atomic.Bool
	seq     atomic.Uint64
	// state is the chat.ConnState: connected while stdin is open.
	state atomic.Value
	since atomic.Int64
}

var (
	_ chat.Adapter         = (*Adapter)(nil)
	_ chat.StatusReporter  = (*Adapter)(nil)
	_ chat.DirectMessenger = (*Adapter)(nil)
)

func (a *Adapter) setState(s chat.ConnState) {
	a.state.Store(s)
	a.since.Store(a.now().UnixNano())
}

// Status implements chat.StatusReporter: connected while stdin is open,
// down before Start and after it ends.
func (a *Adapter) Status() chat.AdapterStatus {
	s, _ := a.state.Load().(chat.ConnState)
	if s == "" {
		return chat.AdapterStatus{State: chat.ConnDown}
	}
	return chat.AdapterStatus{State: s, Since: time.Unix(0, a.since.Load())}
}

// New returns a terminal adapter named name.
func New(name string, in io.Reader, out io.Writer) *Adapter {
	username := os.Getenv("USER")
	if u, err := user.Current(); err == nil && username == "" {
		username = u.Username
	}
	if username == "" {
		username = "user"
	}
	a := &Adapter{
		name: name,
		in:   in,
		out:  out,
		now:  clock.Real{}.Now,
		user: chat.UserInfo{ID: "local-user", Username: username},
		done: make(chan struct{}),
	}
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		a.prompt = "> "
	}
	return a
}

// Prompt writes the prompt, if there is one: the daemon calls it once
// Mother is ready, and each answer ends with it.
func (a *Adapter) Prompt() { a.showPrompt() }

// showPrompt writes the prompt, if there is one.
func (a *Adapter) showPrompt() {
	if a.prompt != "" {
		a.printf("%s", a.prompt)
	}
}

// Name implements chat.Adapter.
func (a *Adapter) Name() string { return a.name }

// SelfID implements chat.Adapter.
func (a *Adapter) SelfID() string { return SelfID }

// Done is closed when stdin has ended and every line has been delivered.
func (a *Adapter) Done() <-chan struct{} { return a.done }

// Start begins reading lines. Each non-empty line is delivered as a
// message addressed to Mother.
func (a *Adapter) Start(ctx context.Context, in chat.Inbox) error {
	if !a.started.CompareAndSwap(false, true) {
		return fmt.Errorf("cli adapter %s: already started", a.name)
	}
	a.setState(chat.ConnConnected)
	go func() {
		defer close(a.done)
		defer a.setState(chat.ConnDown)
		sc := bufio.NewScanner(a.in)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if ctx.Err() != nil {
				return
			}
			text := strings.TrimSpace(sc.Text())
			if text == "" {
				continue
			}
			now := a.now()
			msg := chat.ChannelMessage{
				ID:          strconv.FormatInt(now.UnixNano(), 10) + "-" + strconv.FormatUint(a.seq.Add(1), 10),
				ChannelID:   ChannelID,
				Timestamp:   now,
				Sender:      chat.Sender{ID: a.user.ID, Username: a.user.Username},
				Text:        text,
				Attachments: []chat.ChannelAttachment{},
				IsMention:   true,
				IsDM:        true,
			}
			// A line Mother could not store (a full disk) is held, and
			// the lines after it wait in the pipe, until she can.
			if feed.Redeliver(ctx, clock.Real{}, slog.New(slog.DiscardHandler), msg.ID, func() error { return in.Deliver(ctx, a.name, msg, false) }) != nil {
				return
			}
		}
		if err := sc.Err(); err != nil {
			a.printf("input error: %v\n", err)
		}
	}()
	return nil
}

// Stop implements chat.Adapter; reading stops with stdin.
func (a *Adapter) Stop(context.Context) error { return nil }

// Channels implements chat.Adapter.
func (a *Adapter) Channels() []chat.ChannelInfo {
	return []chat.ChannelInfo{{ID: ChannelID, Name: "terminal", Type: chat.ChannelDM}}
}

// Users implements chat.Adapter.
func (a *Adapter) Users() []chat.UserInfo { return []chat.UserInfo{a.user} }

// Post prints a notice.
func (a *Adapter) Post(_ context.Context, _ string, markdown string) (string, error) {
	a.printf("%s\n", strings.TrimRight(markdown, "\n"))
	return "", nil
}

// DirectMessage implements chat.DirectMessenger: whoever sits at the
// terminal is the operator, so a message for an admin is printed.
func (a *Adapter) DirectMessage(ctx context.Context, _ string, markdown string) error {
	_, err := a.Post(ctx, ChannelID, markdown)
	return err
}

// Upload prints where an attached file is (the terminal has no uploads).
func (a *Adapter) Upload(_ context.Context, _ string, path, title string) error {
	if title == "" {
		title = "file"
	}
	a.printf("[attached %s: %s]\n", title, path)
	return nil
}

// printf is the adapter's one way to the terminal. What it prints holds
// text a chick or a model wrote (labels, results, titles, answers,
// notices), so every control character in it is shown, not obeyed
// (termtext): an escape sequence cannot set the window title, clear the
// screen or write the clipboard.
func (a *Adapter) printf(format string, args ...any) {
	s := termtext.String(fmt.Sprintf(format, args...))
	a.outMu.Lock()
	defer a.outMu.Unlock()
	io.WriteString(a.out, s)
}

// NewReply renders one run: a line per tool as it starts ("→ label"), a
// line for tool errors, and the final answer.
func (a *Adapter) NewReply(_ context.Context, _ string, _ *chat.ChannelMessage, opts chat.ReplyOptions) chat.Reply {
	prefix := ""
	if opts.Title != "" {
		prefix = "[" + opts.Title + "] "
	}
	return &reply{a: a, prefix: prefix, quiet: opts.Quiet}
}

type reply struct {
	a      *Adapter
	prefix string
	quiet  bool
}

func (r *reply) Event(_ context.Context, ev agent.Event) {
	switch ev.Type {
	case agent.EventToolStart:
		r.a.printf("%s→ %s\n", r.prefix, ev.Label)
	case agent.EventToolEnd:
		if ev.IsError && !r.quiet {
			r.a.printf("%s✗ %s: %s\n", r.prefix, ev.Label, firstLine(ev.Result))
		}
	case agent.EventCompactionStart:
		r.a.printf("%s… compacting context\n", r.prefix)
	case agent.EventThinking:
		if !r.quiet {
			r.a.printf("%s… thinking\n", r.prefix)
		}
	case agent.EventRunEnd:
		if ev.AnsweredBy != "" {
			r.a.printf("%s(answered by fallback %s)\n", r.prefix, ev.AnsweredBy)
		}
	}
}

func (r *reply) Finish(_ context.Context, markdown string) (string, error) {
	if markdown != "" {
		r.a.printf("%s%s\n", r.prefix, strings.TrimRight(markdown, "\n"))
	}
	r.a.showPrompt() // the answer is out: her turn to listen
	return "", nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
