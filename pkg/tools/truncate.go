package tools

import (
	"bytes"
	"fmt"
	"os"
	"unicode/utf8"
)

// Output limits of bash and read (mother-design.md 1.5).
const (
	MaxLines = 2000
	MaxBytes = 50 * 1024
)

// tailLines returns the last lines of b that fit both limits, starting at a
// line boundary. A last line longer than maxBytes is cut from its start (at
// a rune boundary) and partial is set.
func tailLines(b []byte, maxLines, maxBytes int) (out []byte, lines int, partial bool) {
	start := len(b)
	for lines < maxLines && start > 0 {
		// The line ending just before start: skip its own newline.
		prev := bytes.LastIndexByte(b[:start-1], '\n') + 1
		if len(b)-prev > maxBytes {
			if lines == 0 {
				from := len(b) - maxBytes
				for from < len(b) && !utf8.RuneStart(b[from]) {
					from++
				}
				return b[from:], 0, true
			}
			break
		}
		start = prev
		lines++
	}
	return b[start:], lines, false
}

// runeCut returns the largest n <= max such that b[:n] ends on a rune
// boundary.
func runeCut(b []byte, max int) int {
	if max >= len(b) {
		return len(b)
	}
	n := max
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return n
}

// countLines counts lines the way an editor does: a last line without a
// newline still counts.
func countLines(b []byte) int {
	n := bytes.Count(b, []byte("\n"))
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}

// spillWriter collects a command's combined output. Up to the limits it
// keeps everything in memory; past them it moves the output to a file
// (created by open) and from then on keeps only a tail window in memory, so
// memory stays bounded however much the command prints and the tail shown
// is the real end of the output.
type spillWriter struct {
	maxLines, maxBytes int
	open               func() (*os.File, error)

	head  []byte // everything, while not spilled
	ring  []byte // the last window bytes, once spilled (circular)
	pos   int    // next write position in ring
	full  bool   // ring has wrapped
	total int64
	lines int64
	file  *os.File
	err   error // first file error; the output is then kept in memory only
}

// window is how many trailing bytes a spilled writer keeps: enough for the
// byte limit plus one partial line before it.
func (s *spillWriter) window() int { return 2*s.maxBytes + 1 }

func (s *spillWriter) Write(p []byte) (int, error) {
	s.total += int64(len(p))
	s.lines += int64(bytes.Count(p, []byte("\n")))
	if s.ring == nil {
		s.head = append(s.head, p...)
		if len(s.head) <= s.maxBytes && s.totalLines() <= int64(s.maxLines) {
			return len(p), nil
		}
		if f, err := s.open(); err != nil {
			s.err = err
		} else {
			s.file = f
			if _, err := f.Write(s.head); err != nil {
				s.err = err
			}
		}
		s.ring = make([]byte, s.window())
		s.keep(s.head)
		s.head = nil
		return len(p), nil
	}
	if s.file != nil && s.err == nil {
		if _, err := s.file.Write(p); err != nil {
			s.err = err
		}
	}
	s.keep(p)
	return len(p), nil
}

// keep copies the end of p into the ring.
func (s *spillWriter) keep(p []byte) {
	if len(p) >= len(s.ring) {
		copy(s.ring, p[len(p)-len(s.ring):])
		s.pos, s.full = 0, true
		return
	}
	n := copy(s.ring[s.pos:], p)
	if n < len(p) {
		copy(s.ring, p[n:])
		s.full = true
	}
	s.pos = (s.pos + len(p)) % len(s.ring)
	if s.pos == 0 {
		s.full = true
	}
}

// tail returns the kept trailing bytes in order.
func (s *spillWriter) tail() []byte {
	if !s.full {
		return append([]byte(nil), s.ring[:s.pos]...)
	}
	return append(append([]byte(nil), s.ring[s.pos:]...), s.ring[:s.pos]...)
}

// spilled reports whether the output exceeded the limits.
func (s *spillWriter) spilled() bool { return s.ring != nil }

// totalLines is the number of lines printed (a last unterminated line
// counts).
func (s *spillWriter) totalLines() int64 {
	last := s.head
	if s.spilled() {
		last = s.tail()
	}
	if len(last) > 0 && last[len(last)-1] != '\n' {
		return s.lines + 1
	}
	return s.lines
}

// close finishes the file, if any.
func (s *spillWriter) close() error {
	if s.file == nil {
		return s.err
	}
	err := s.file.Close()
	if s.err == nil {
		s.err = err
	}
	return s.err
}

// humanBytes renders a byte count for notices.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
