package setup

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// hidden turns the terminal's echo off, then prints the prompt and reads
// a line: what is typed after the prompt appears is never echoed.
func (p *prompter) hidden(prompt string) (string, error) {
	fd := int(p.tty.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return "", fmt.Errorf("terminal: %w", err)
	}
	quiet := *old
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON | unix.ISIG
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &quiet); err != nil {
		return "", fmt.Errorf("terminal: %w", err)
	}
	defer unix.IoctlSetTermios(fd, unix.TCSETS, old)
	fmt.Fprint(p.out, prompt)
	s, err := p.line()
	fmt.Fprintln(p.out)
	return s, err
}
