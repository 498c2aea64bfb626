package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/model"
)

// Bash runs a shell command in the workspace.
type Bash struct {
	ws   *Workspace
	opts Options
}

var _ agent.Tool = (*Bash)(nil)

// Spec implements agent.Tool.
func (b *Bash) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name: "bash",
		Description: fmt.Sprintf("Run a shell command in the workspace (%s) and return its combined stdout and stderr. "+
			"Output longer than %d lines or %d KB is cut to its last lines; the full output is then saved to a file in the workspace whose path the notice gives (read it with offset/limit). "+
			"A non-zero exit status is reported. Default timeout %s.", b.ws.Root(), MaxLines, MaxBytes/1024, b.opts.BashTimeout),
		Parameters: schema([]string{"command"},
			`"command":{"type":"string","description":"The command line, run with the working directory at the workspace root"}`,
			fmt.Sprintf(`"timeout":{"type":"integer","description":"Timeout in seconds (default %d, at most %d)"}`, int(b.opts.BashTimeout.Seconds()), int(b.opts.MaxBashTimeout.Seconds())),
		),
	}
}

type bashArgs struct {
	Command string  `json:"command"`
	Timeout flexInt `json:"timeout"`
}

// Run implements agent.Tool. The command runs in its own process group;
// when ctx ends (abort) or the timeout passes, the whole group is killed.
func (b *Bash) Run(ctx context.Context, raw json.RawMessage) (agent.Result, error) {
	var a bashArgs
	if err := decode("bash", raw, &a); err != nil {
		return agent.Result{}, err
	}
	if strings.TrimSpace(a.Command) == "" {
		return agent.Result{}, missing("bash", "command")
	}
	timeout := b.opts.BashTimeout
	if a.Timeout.set {
		if a.Timeout.v <= 0 {
			return agent.Result{}, fmt.Errorf("bash: timeout must be a positive number of seconds, not %d", a.Timeout.v)
		}
		timeout = min(time.Duration(a.Timeout.v)*time.Second, b.opts.MaxBashTimeout)
	}
	shell := b.opts.Shell
	if shell == "" {
		shell = "sh"
		if p, err := exec.LookPath("bash"); err == nil {
			shell = p
		}
	}

	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, shell, "-c", a.Command)
	cmd.Dir = b.ws.real
	cmd.Env = b.opts.Env
	cmd.Stdin = nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The negative pid addresses the whole process group.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// Background children that keep the output pipe open must not keep
	// Wait from returning once the group is gone.
	cmd.WaitDelay = 2 * time.Second
	out := &spillWriter{maxLines: MaxLines, maxBytes: MaxBytes, open: b.openOutput}
	cmd.Stdout, cmd.Stderr = out, out

	err := cmd.Run()
	if cmd.Process != nil {
		// Whatever the group left behind goes too (a finished shell's
		// background jobs included).
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	ferr := out.close()

	text := b.render(out, ferr)
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return agent.Result{Text: joinNotice(text, "[aborted: the command and its process group were killed]"), IsError: true}, nil
	case tctx.Err() != nil:
		return agent.Result{Text: joinNotice(text, fmt.Sprintf("[timed out after %s: the command and its process group were killed]", timeout)), IsError: true}, nil
	case errors.As(err, &ee):
		code := ee.ExitCode()
		if code < 0 {
			return agent.Result{Text: joinNotice(text, fmt.Sprintf("[killed by signal: %v]", ee.ProcessState)), IsError: true}, nil
		}
		return agent.Result{Text: joinNotice(text, fmt.Sprintf("[exit code %d]", code)), IsError: true}, nil
	case errors.Is(err, exec.ErrWaitDelay):
		return agent.Result{Text: text}, nil
	case err != nil:
		return agent.Result{}, fmt.Errorf("bash: %w", err)
	}
	if text == "" {
		text = "(no output)"
	}
	return agent.Result{Text: text}, nil
}

// render turns the collected output into the text the model sees.
func (b *Bash) render(out *spillWriter, ferr error) string {
	if !out.spilled() {
		return string(out.head)
	}
	tail, n, partial := tailLines(out.tail(), MaxLines, MaxBytes)
	total := out.totalLines()
	var notice string
	if partial {
		notice = fmt.Sprintf("[output truncated: %d lines (%s) in all; showing the last %s of the last line]", total, humanBytes(out.total), humanBytes(int64(len(tail))))
	} else {
		notice = fmt.Sprintf("[output truncated: %d lines (%s) in all; showing the last %d lines (%s)]", total, humanBytes(out.total), n, humanBytes(int64(len(tail))))
	}
	if ferr == nil && out.file != nil {
		notice += fmt.Sprintf("\n[full output saved to %s: read it with offset/limit or grep it]", b.ws.Rel(out.file.Name()))
	} else {
		notice += fmt.Sprintf("\n[the full output could not be saved: %v]", ferr)
	}
	return notice + "\n" + string(tail)
}

// openOutput creates the file that keeps a truncated command's full output.
func (b *Bash) openOutput() (*os.File, error) {
	dir, err := b.ws.Resolve(b.opts.OutputDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return os.CreateTemp(dir, "bash-"+b.opts.Clock.Now().Format("20060102-150405")+"-*.log")
}

func joinNotice(text, notice string) string {
	if text == "" {
		return notice
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return text + notice
}
