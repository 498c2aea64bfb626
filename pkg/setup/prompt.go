package setup

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// ErrInputEnded is the operator's input ending (EOF, Ctrl-D) before setup
// was done; nothing is written.
var ErrInputEnded = errors.New("input ended before setup was done; nothing written")

// prompter asks questions on out and reads answers from in, one line at a
// time and unbuffered, so that a hidden read on the same terminal never
// misses what was typed after a line.
type prompter struct {
	in  io.Reader
	out io.Writer
	// tty is the terminal in reads from, for answers typed without echo;
	// nil when in is not a terminal.
	tty *os.File
}

// line reads one line (without its end).
func (p *prompter) line() (string, error) {
	var b []byte
	one := make([]byte, 1)
	for {
		n, err := p.in.Read(one)
		if n == 1 {
			if one[0] == '\n' {
				return strings.TrimRight(string(b), "\r"), nil
			}
			b = append(b, one[0])
			continue
		}
		if err == io.EOF {
			if len(b) > 0 {
				return string(b), nil
			}
			return "", ErrInputEnded
		}
		if err != nil {
			return "", err
		}
	}
}

// ask prints "q [def]: " and returns the trimmed answer, or def for an
// empty one.
func (p *prompter) ask(q, def string) (string, error) {
	if def != "" {
		fmt.Fprintf(p.out, "%s [%s]: ", q, def)
	} else {
		fmt.Fprintf(p.out, "%s: ", q)
	}
	s, err := p.line()
	if err != nil {
		return "", err
	}
	if s = strings.TrimSpace(s); s == "" {
		return def, nil
	}
	return s, nil
}

// secret asks for a token without echoing it on a terminal. keep is the
// current value, kept on an empty answer (shown masked).
func (p *prompter) secret(q, keep string) (string, error) {
	prompt := q + ": "
	if keep != "" {
		prompt = fmt.Sprintf("%s [enter keeps %s]: ", q, mask(keep))
	}
	var s string
	var err error
	if p.tty != nil {
		s, err = p.hidden(prompt)
	} else {
		fmt.Fprint(p.out, prompt)
		s, err = p.line()
	}
	if err != nil {
		return "", err
	}
	if s = strings.TrimSpace(s); s == "" {
		return keep, nil
	}
	return s, nil
}

// yes asks a yes/no question.
func (p *prompter) yes(q string, def bool) (bool, error) {
	d := "y/N"
	if def {
		d = "Y/n"
	}
	for {
		fmt.Fprintf(p.out, "%s [%s]: ", q, d)
		s, err := p.line()
		if err != nil {
			return false, err
		}
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "":
			return def, nil
		case "y", "yes":
			return true, nil
		case "n", "no":
			return false, nil
		}
		fmt.Fprintln(p.out, "  please answer y or n")
	}
}

// mask shows a secret as its length class and last four characters.
func mask(s string) string {
	if len(s) <= 16 {
		return "****"
	}
	return "****" + s[len(s)-4:]
}
