package hosttools

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mother-chat/mother/pkg/clock"
)

// stdioProcess runs a stdio MCP server and is its transport. It, not the
// SDK, waits for the process, in one goroutine, so the exit status is read
// after that wait without racing it (the SDK's CommandTransport may wait
// from a goroutine of a Close nobody can wait for).
type stdioProcess struct {
	cmd       *exec.Cmd
	terminate time.Duration // after closing stdin, and again after SIGTERM
	clock     clock.Clock

	exited chan struct{}    // closed once the process has been waited for
	state  *os.ProcessState // set before exited closes

	closeOnce sync.Once
	closeErr  error
}

func newStdioProcess(cmd *exec.Cmd, terminate time.Duration, c clock.Clock) *stdioProcess {
	return &stdioProcess{cmd: cmd, terminate: terminate, clock: c, exited: make(chan struct{})}
}

// Connect starts the process with its stdin and stdout on pipes of ours
// (so the wait closes neither while the SDK reads) and returns the
// connection over them.
func (p *stdioProcess) Connect(ctx context.Context) (mcp.Connection, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	p.cmd.Stdin, p.cmd.Stdout = inR, outW
	err = p.cmd.Start()
	// The child has its ends now (or there is no child).
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		close(p.exited)
		return nil, err
	}
	go func() {
		_ = p.cmd.Wait()
		p.state = p.cmd.ProcessState
		close(p.exited)
	}()
	return (&mcp.IOTransport{Reader: outR, Writer: &stdinCloser{File: inW, p: p}}).Connect(ctx)
}

// exitState is the process's exit status once it has been waited for.
func (p *stdioProcess) exitState() (*os.ProcessState, bool) {
	select {
	case <-p.exited:
		return p.state, p.state != nil
	default:
		return nil, false
	}
}

// stop ends the process the way the MCP stdio transport says: its input
// closed, then SIGTERM if it does not exit within terminate, then SIGKILL
// after as long again. It returns once the process has been waited for,
// or an error if even SIGKILL did not end it.
func (p *stdioProcess) stop(stdin *os.File) error {
	p.closeOnce.Do(func() {
		stdin.Close()
		if p.waitExit() {
			return
		}
		if p.cmd.Process.Signal(syscall.SIGTERM) == nil && p.waitExit() {
			return
		}
		_ = p.cmd.Process.Kill()
		if !p.waitExit() {
			p.closeErr = fmt.Errorf("the process (pid %d) did not exit after SIGKILL", p.cmd.Process.Pid)
		}
	})
	return p.closeErr
}

func (p *stdioProcess) waitExit() bool {
	select {
	case <-p.exited:
		return true
	case <-clock.After(p.clock, p.terminate):
		return false
	}
}

// stdinCloser is the process's input; closing it stops the process.
type stdinCloser struct {
	*os.File
	p *stdioProcess
}

func (w *stdinCloser) Close() error { return w.p.stop(w.File) }
