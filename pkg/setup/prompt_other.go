//go:build !linux

package setup

import (
	"errors"
	"fmt"
	"io"

	"golang.org/x/term"
)

// hidden prints the prompt and reads a line without echo.
func (p *prompter) hidden(prompt string) (string, error) {
	fmt.Fprint(p.out, prompt)
	b, err := term.ReadPassword(int(p.tty.Fd()))
	fmt.Fprintln(p.out)
	if errors.Is(err, io.EOF) {
		return "", ErrInputEnded
	}
	return string(b), err
}
