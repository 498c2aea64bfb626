package model

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"
)

// ErrAuth means the provider refused the key Mother sent (HTTP 401 or
// 403): another attempt will not help until the key is fixed.
var ErrAuth = errors.New("model provider refused the key")

// Sentencer is an error that carries its own sentence for people (what
// happened and what to do), apart from its text for the log.
type Sentencer interface {
	Sentence() string
}

// Sentence turns err into one plain sentence for people: what happened
// and what to do, with no Go error chain, no package prefix and no detail
// that belongs in the operator's log. An error that carries its own
// sentence (Sentencer, as BudgetError does) says it; a known kind gets its
// sentence; anything else a generic sentence naming the kind of failure.
// Whoever shows it logs err itself.
func Sentence(err error) string {
	if err == nil {
		return "The run ended without an answer; try again."
	}
	var s interface {
		error
		Sentencer
	}
	if errors.As(err, &s) {
		return s.Sentence()
	}
	msg := err.Error()
	switch {
	case errors.Is(err, ErrUnreachable):
		where := ""
		if u := urlRe.FindString(msg); u != "" {
			where = " at " + strings.TrimRight(u, ".,;:)")
		}
		return "I cannot reach my model server" + where + ". I am still here; try again once it is back."
	case errors.Is(err, ErrModelNotFound):
		name := "my model"
		if m := modelRe.FindStringSubmatch(msg); m != nil {
			name = "my model " + m[1]
		}
		return "The model server does not have " + name + ", so it is not available; pull it there or name another model in config.json."
	case errors.Is(err, ErrAuth):
		return "The model provider refused my API key; the owner needs to check the key in config.json."
	case errors.Is(err, ErrContextOverflow):
		return "The conversation no longer fits my model's context window; start a new thread or ask for less at once."
	case errors.Is(err, ErrBusy):
		return "Calls already in flight hold what is left of the budget; try again in a moment."
	case errors.Is(err, ErrOverloaded):
		return "My model server is overloaded right now; try again in a few minutes."
	case errors.Is(err, ErrInvalidRequest):
		return "My model server refused the request as invalid; the owner can find the details in Mother's log."
	case errors.Is(err, context.DeadlineExceeded):
		return "The model took too long to answer, so I stopped waiting; try again, perhaps with a smaller request."
	case errors.Is(err, context.Canceled):
		return "The run was stopped before it finished."
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		return "My data disk is full, so I could not save this; the owner needs to free some space, then try again."
	case errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EROFS):
		return "My data disk is failing, so I could not save this; the owner needs to check the disk, then try again."
	}
	var se *json.SyntaxError
	if errors.As(err, &se) || strings.Contains(msg, "invalid character") || strings.Contains(msg, "response line") {
		return "My model server sent an answer I could not read; try again, and if it keeps happening the owner can find the details in Mother's log."
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "My model server cut its answer short; try again in a moment."
	}
	if httpStatus.MatchString(msg) && !IsTransient(err) {
		return "My model server refused the request; try again, and if it keeps happening the owner can find the details in Mother's log."
	}
	if IsTransient(err) {
		return "My model server failed to answer, even after retries; try again in a moment."
	}
	return "Something went wrong on my side; the owner can find the details in Mother's log."
}

var (
	urlRe   = regexp.MustCompile(`https?://[^\s"']+`)
	modelRe = regexp.MustCompile(`model "([^"]+)"`)
	// httpStatus finds an HTTP error status a provider put in its error.
	httpStatus = regexp.MustCompile(`HTTP [45]\d\d`)
)

// Sentence is the budget error for people: the cap, what was used and
// what the next call needs, as one sentence.
func (e *BudgetError) Sentence() string {
	s := strings.TrimPrefix(e.Msg, ErrBudgetExhausted.Error()+": ")
	return Capitalize(strings.TrimSuffix(s, ".")) + "."
}

// Capitalize upper-cases s's first letter.
func Capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}
