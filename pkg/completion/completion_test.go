package completion

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/completion/completiontest"
)

// tree is a program like momctl: root flags, nested commands, a flag
// with choices, a path flag, and a command whose arguments a helper
// prints.
func tree(t *testing.T) *Command {
	t.Helper()
	fs := flag.NewFlagSet("prog", flag.ContinueOnError)
	fs.String("socket", "", "the `PATH` of the socket")
	fs.Bool("version", false, "print the version")
	root := &Command{Name: "prog", Flags: FromFlagSet(fs)}
	ls := flag.NewFlagSet("ls", flag.ContinueOnError)
	ls.Bool("json", false, "JSON")
	ls.Bool("q", false, "ids only")
	ls.String("format", "", "how")
	kill := flag.NewFlagSet("kill", flag.ContinueOnError)
	kill.Duration("grace", 0, "grace")
	lsc := &Command{Name: "ls", Help: "list them", Flags: FromFlagSet(ls)}
	lsc.Flag("format").Choices = []string{"table", "wide"}
	root.Subs = []*Command{
		{Name: "things", Help: "thing commands", Subs: []*Command{
			lsc,
			{Name: "kill", Help: "kill things", Flags: FromFlagSet(kill), Args: ArgsDynamic, ArgsCommand: []string{"things", "ls", "-q"}},
		}},
		{Name: "open", Help: "open a directory", Args: ArgsDirs},
	}
	return root
}

func TestFromFlagSet(t *testing.T) {
	t.Parallel()
	root := tree(t)
	if f := root.Flag("socket"); f == nil || !f.Value || !f.Files || f.Help != "the PATH of the socket" {
		t.Errorf("socket flag = %+v, want a path value", f)
	}
	if f := root.Flag("version"); f == nil || f.Value {
		t.Errorf("version flag = %+v, want a boolean", f)
	}
	if got := flagNames(root.Subs[0].Subs[0]); strings.Join(got, " ") != "--format --json -q" {
		t.Errorf("flagNames = %q", got)
	}
}

func script(t *testing.T, shell string, root *Command) string {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, shell, root); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestBash(t *testing.T) {
	t.Parallel()
	root := tree(t)
	dir := t.TempDir()
	// The program itself answers the dynamic arguments: a script that
	// prints ids, and records the words it was given.
	prog := filepath.Join(dir, "prog")
	os.WriteFile(prog, []byte("#!/bin/sh\necho \"$*\" > "+sq(filepath.Join(dir, "args"))+"\nprintf 'c-1111\\nc-2222\\n'\n"), 0o700)
	os.MkdirAll(filepath.Join(dir, "sub", "inner"), 0o700)
	s := script(t, "bash", root)
	got := completiontest.BashCompletions(t, s,
		[]string{prog, ""},
		[]string{prog, "th"},
		[]string{prog, "things", ""},
		[]string{prog, "--socket", "/x", "things", "ls", "-"},
		[]string{prog, "things", "ls", "--format", ""},
		[]string{prog, "things", "ls", "--format", "w"},
		[]string{prog, "--socket", "/run/m.sock", "things", "kill", "--grace", "5s", ""},
		[]string{prog, "-"},
		[]string{prog, "open", filepath.Join(dir, "su")},
	)
	want := []string{
		"things open", "things", "ls kill", "--format --json -q", "table wide", "wide", "c-1111 c-2222", "--socket --version", filepath.Join(dir, "sub"),
	}
	for i, w := range want {
		if strings.Join(got[i], " ") != w {
			t.Errorf("completion %d = %q, want %q", i, got[i], w)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "args")); strings.TrimSpace(string(b)) != "--socket /run/m.sock things ls -q" {
		t.Errorf("the program was asked %q for the ids, want the root flags then things ls -q", b)
	}
}

func TestZshAndFish(t *testing.T) {
	t.Parallel()
	root := tree(t)
	completiontest.SyntaxCheck(t, script(t, "zsh", root), script(t, "fish", root))
	// fish completes without a terminal: check it does what bash does.
	fish := completiontest.Need(t, "fish")
	dir := t.TempDir()
	path := filepath.Join(dir, "prog.fish")
	os.WriteFile(path, []byte(script(t, "fish", root)), 0o600)
	for line, want := range map[string][]string{
		"prog th":                          {"things"},
		"prog things ":                     {"kill", "ls"},
		"prog things ls --":                {"--format", "--json"},
		"prog things ls --format=":         {"--format=table", "--format=wide"},
		"prog --socket /x things kill --g": {"--grace"},
	} {
		out, err := exec.Command(fish, "--no-config", "-c", "source "+sq(path)+"; complete -C "+sq(line)).CombinedOutput()
		if err != nil {
			t.Fatalf("fish: %v\n%s", err, out)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			name, _, _ := strings.Cut(l, "\t")
			got = append(got, name)
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("fish completes %q to %q, want %q", line, got, want)
		}
	}
}

func TestUnknownShell(t *testing.T) {
	t.Parallel()
	if err := Write(&bytes.Buffer{}, "tcsh", tree(t)); err == nil || !strings.Contains(err.Error(), "tcsh") {
		t.Errorf("Write(tcsh) = %v, want an error naming it", err)
	}
}
