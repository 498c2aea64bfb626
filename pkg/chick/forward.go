package chick

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/wire"
)

// Forwarder is an isolated chick's HTTP proxy (HTTP_PROXY points at it,
// wire.ChickProxyAddr inside the chick's own network namespace): it hands
// each connection to the gate's proxy socket, after the preface line that
// names the chick, and pipes the bytes both ways. The gate does the rest.
type Forwarder struct {
	// Socket is the gate's proxy socket (MOTHER_GATE_PROXY).
	Socket string
	// ChickID and Key name the chick to the gate (MOTHER_GATE_KEY).
	ChickID, Key string
	Logger       *slog.Logger
	// Clock times the waits for the gate's socket (default clock.Real).
	Clock clock.Clock
	// WaitFor is how long a connection waits for the gate's socket to
	// come back while the gate restarts (default 15s).
	WaitFor time.Duration
}

// Serve forwards lis's connections until ctx ends, then closes lis and
// every connection and returns nil.
func (f *Forwarder) Serve(ctx context.Context, lis net.Listener) error {
	if f.Logger == nil {
		f.Logger = slog.New(slog.DiscardHandler)
	}
	f.Clock = clock.OrReal(f.Clock)
	if f.WaitFor <= 0 {
		f.WaitFor = 15 * time.Second
	}
	log := f.Logger.With("component", "proxy-forwarder")
	var (
		mu     sync.Mutex
		conns  = map[net.Conn]struct{}{}
		closed bool
		wg     sync.WaitGroup
	)
	track := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return false
		}
		conns[c] = struct{}{}
		return true
	}
	untrack := func(c net.Conn) {
		mu.Lock()
		delete(conns, c)
		mu.Unlock()
	}
	stop := context.AfterFunc(ctx, func() {
		lis.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	defer stop()
	for {
		c, err := lis.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				break
			}
			log.Warn("accept failed", "err", err)
			if clock.Sleep(ctx, f.Clock, 100*time.Millisecond) != nil {
				break
			}
			continue
		}
		if !track(c) {
			c.Close()
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer untrack(c)
			defer c.Close()
			g, err := f.dialGate(ctx)
			if err != nil {
				log.Warn("the gate is not reachable", "socket", f.Socket, "err", err)
				f.unavailable(c)
				return
			}
			if !track(g) {
				g.Close()
				return
			}
			defer untrack(g)
			if _, err := io.WriteString(g, wire.GatePrefaceLine(f.ChickID, f.Key)); err != nil {
				g.Close()
				f.unavailable(c)
				return
			}
			pipe(c, g)
		}()
	}
	wg.Wait()
	return nil
}

// dialGate connects to the gate's socket, waiting up to WaitFor for it
// to (re)appear.
func (f *Forwarder) dialGate(ctx context.Context) (net.Conn, error) {
	deadline := f.Clock.Now().Add(f.WaitFor)
	wait := 50 * time.Millisecond
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "unix", f.Socket)
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil || f.Clock.Now().After(deadline) {
			return nil, err
		}
		if clock.Sleep(ctx, f.Clock, wait) != nil {
			return nil, err
		}
		wait = min(wait*2, time.Second)
	}
}

// unavailable answers the client's request with 502: the gate is away.
// It reads the request head first (for a few seconds at most), so the
// answer is not lost to a reset.
func (f *Forwarder) unavailable(c net.Conn) {
	t := f.Clock.AfterFunc(5*time.Second, func() { c.SetReadDeadline(time.Unix(1, 0)) })
	http.ReadRequest(bufio.NewReader(io.LimitReader(c, 64<<10)))
	t.Stop()
	const body = "blocked: the gate is not reachable (restarting?); try again\n"
	fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
}

// pipe copies a to b and b to a until both directions end, passing each
// direction's end on as a half-close, then closes both; an error in
// either direction closes both at once.
func pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	one := func(dst, src net.Conn) {
		defer wg.Done()
		if _, err := io.Copy(dst, src); err != nil {
			a.Close()
			b.Close()
			return
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	wg.Add(2)
	go one(b, a)
	go one(a, b)
	wg.Wait()
	a.Close()
	b.Close()
}
