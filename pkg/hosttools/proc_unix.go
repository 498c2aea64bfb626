//go:build unix

package hosttools

import (
	"os/exec"
	"syscall"
)

// setProcessGroup puts a stdio server in its own process group, so a
// terminal's Ctrl-C goes to Mother alone and she stops the server in order.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
