package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// termEvil is what the chick's model writes into its text: a window
// title (OSC 0 ended by BEL), a clear screen, a clipboard write (OSC 52
// ended by BEL) and a C1 CSI (U+009B).
const termEvil = "\x1b]0;pwned\x07\x1b[2J\x1b]52;c;cm0gLXJmIH4K\x07\u009b31m"

// termEvilPrintf is termEvil as busy-box printf writes it (octal).
const termEvilPrintf = `\033]0;pwned\007\033[2J\033]52;c;cm0gLXJmIH4K\007\302\23331m`

// termControls counts what a terminal obeys in out: ESC, BEL, the other
// C0 controls but newline and tab, DEL, and the C1 controls (U+0080 to
// U+009F, as UTF-8, and lone bytes 0x80 to 0x9F).
func termControls(out string) (esc, bel, other int) {
	for i := 0; i < len(out); {
		r, size := utf8.DecodeRuneInString(out[i:])
		switch {
		case r == 0x1b:
			esc++
		case r == 0x07:
			bel++
		case r < 0x20 && r != '\n' && r != '\t', r >= 0x7f && r <= 0x9f:
			other++
		case r == utf8.RuneError && size == 1 && out[i] >= 0x80 && out[i] <= 0x9f:
			other++
		}
		i += size
	}
	return esc, bel, other
}

// termMother is Mother's model for the row: it delegates with a label
// and a goal that hold termEvil, then answers with it too (model-written
// text); the chick's model is h's.
func termMother(h *hostileModel) func(ollamatest.Request) ollamatest.Turn {
	return func(r ollamatest.Request) ollamatest.Turn {
		if r.Model != motherModel {
			return h.turn(r)
		}
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "tool" {
			return ollamatest.Turn{Text: "Delegated. MOTHERSAYS " + termEvil}
		}
		return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "spawn_chick", Args: map[string]any{
			"label": "SPAWNMARK " + termEvil, "goal": r.LastUser() + " GOALMARK " + termEvil}}}}
	}
}

// TestHostileBackTerm: issue 42, "inert text" on the terminal. A real
// chick's model puts escape sequences in a tool label, the tool's result,
// a file's name, an attachment's title, a skill's description and its
// answer; Mother's model puts them in the chick's label and goal and in
// her answer. The terminal chat (Mother's stdout), momctl chicks tail
// (text and --json), chicks ls (text and --json) and chicks logs, and
// Mother's log (stderr) carry no ESC, BEL or C1 byte, and still show the
// text (the control: the markers and "pwned"); the JSON reads back to the
// very bytes the chick wrote.
func TestHostileBackTerm(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	buildAttack(t)
	buildMomctl(t)

	start := time.Now()
	h := newHostileModel(api)
	h.row("termtext",
		plainCall("LABELMARK "+termEvil, fmt.Sprintf(`set -e
printf 'RESULTMARK %[1]s\n'
mkdir -p skills/termskill
printf -- '---\nname: termskill\ndescription: SKILLMARK %[1]s\n---\n# t\n' > skills/termskill/SKILL.md
printf 'data\n' > "$(printf 'FILEMARK\033[2J.txt')"
ls`, termEvilPrintf)),
		func(leaked) ollamatest.Call {
			return ollamatest.Call{Name: "attach", Args: map[string]any{"label": "share " + termEvil, "path": "FILEMARK\x1b[2J.txt", "title": "TITLEMARK " + termEvil}}
		},
	)
	fake := ollamatest.NewFunc(termMother(h))
	defer fake.Close()
	p, data := hostileMother(t, api, h, fake, nil, nil)
	io.WriteString(p.stdin, "termtext please\n")
	p.waitOut(t, "Done: ", 2*time.Minute)
	t.Logf("%s: the chick's answer is out", time.Since(start).Round(time.Second))
	id := h.leak("termtext").ID
	if id == "" {
		t.Fatalf("the chick never printed its id:\n%s", p.out())
	}

	// momctl, while Mother runs: tail follows until the chick has ended.
	tailOut, code := momctl(t, data, "chicks", "tail", id)
	if code != 0 {
		t.Errorf("momctl chicks tail %s: exit %d\n%s", id, code, tailOut)
	}
	tailJSON, _ := momctl(t, data, "chicks", "tail", "--json", "--no-follow", id)
	ls, _ := momctl(t, data, "chicks", "ls", "--all")
	lsJSON, _ := momctl(t, data, "chicks", "ls", "--all", "--json")
	logs, _ := momctl(t, data, "chicks", "logs", id)
	t.Logf("%s: momctl done", time.Since(start).Round(time.Second))
	p.waitOut(t, "SKILLMARK", time.Minute)
	p.waitOut(t, "MOTHERSAYS", time.Minute)
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("exit %d\n%s", code, tail(p.errs(), 3000))
	}

	t.Logf("%s: Mother exited; the terminal showed:\n%s", time.Since(start).Round(time.Second), p.out())
	surfaces := []struct {
		name, out string
		shows     []string
	}{
		{"the terminal chat (stdout)", p.out(), []string{"SPAWNMARK", "LABELMARK", "RESULTMARK", "TITLEMARK", "FILEMARK", "SKILLMARK", "MOTHERSAYS", "pwned"}},
		{"momctl chicks tail", tailOut, []string{"LABELMARK", "RESULTMARK", "TITLEMARK", "pwned"}},
		{"momctl chicks tail --json", tailJSON, []string{"LABELMARK", "RESULTMARK", `\u001b]0;pwned\u0007`, `\u009b31m`}},
		{"momctl chicks ls --all", ls, []string{id}},
		{"momctl chicks ls --all --json", lsJSON, []string{"GOALMARK", `\u001b]0;pwned\u0007`, `\u009b31m`}},
		{"momctl chicks logs", logs, nil},
		{"Mother's log (stderr)", p.errs(), nil},
	}
	for _, s := range surfaces {
		esc, bel, other := termControls(s.out)
		if esc+bel+other > 0 {
			t.Errorf("%s: %d ESC, %d BEL, %d other controls (C1, DEL, C0):\n%q", s.name, esc, bel, other, tail(s.out, 4000))
		} else {
			t.Logf("%s: 0 ESC, 0 BEL, 0 other controls", s.name)
		}
		for _, w := range s.shows {
			if !strings.Contains(s.out, w) {
				t.Errorf("%s does not show %q (the control):\n%s", s.name, w, tail(s.out, 4000))
			}
		}
	}
	// The JSON keeps the chick's text exactly: it reads back to termEvil.
	kept := false
	for _, line := range strings.Split(strings.TrimSpace(tailJSON), "\n") {
		var v struct {
			Event struct{ Label string } `json:"event"`
		}
		if json.Unmarshal([]byte(line), &v) == nil && v.Event.Label == "LABELMARK "+termEvil {
			kept = true
		}
	}
	if !kept {
		t.Errorf("momctl chicks tail --json does not read back the label as the chick wrote it:\n%s", tailJSON)
	}
}
