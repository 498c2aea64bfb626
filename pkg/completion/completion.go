// Package completion writes shell completion scripts (bash, zsh, fish)
// for a command tree built from a program's real flag sets (FromFlagSet),
// so that the completions offer exactly the commands and flags the
// program parses. mother and momctl print theirs with
// "<program> completion bash|zsh|fish".
//
// The scripts walk the words typed so far to find the command path
// (skipping flags and the values of flags that take one), then offer: a
// flag's choices, files or directories after a flag that takes a value;
// the path's flags after "-"; else its subcommands, or its positional
// arguments (files, directories, or the words a helper command prints,
// such as the ids of the chicks alive).
package completion

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// ArgKind is what a command's positional arguments are.
type ArgKind int

// Positional argument kinds.
const (
	ArgsNone ArgKind = iota
	ArgsFiles
	ArgsDirs
	// ArgsDynamic: the words ArgsCommand prints, one per line.
	ArgsDynamic
)

// Command is one command of the tree; the root is the program.
type Command struct {
	Name  string
	Help  string
	Flags []Flag
	Subs  []*Command
	Args  ArgKind
	// ArgsCommand is run for ArgsDynamic (its stderr is discarded), with
	// the program's own root flags typed so far put after the program's
	// name ("momctl --socket X chicks ls --ids").
	ArgsCommand []string
}

// Flag is one flag of a command.
type Flag struct {
	Name string
	Help string
	// Value: the flag takes a value (not a boolean flag).
	Value bool
	// Choices are its values, when they are a fixed set.
	Choices []string
	// Files or Dirs: its value is a path.
	Files, Dirs bool
}

// FromFlagSet lists fs's flags, sorted by name. A value that the usage
// text names DIR, PATH or FILE in back-quotes (flag.UnquoteUsage) is
// completed as a path; set Choices on the result for fixed values.
func FromFlagSet(fs *flag.FlagSet) []Flag {
	var out []Flag
	fs.VisitAll(func(f *flag.Flag) {
		b, isBool := f.Value.(interface{ IsBoolFlag() bool })
		name, usage := flag.UnquoteUsage(f)
		fl := Flag{Name: f.Name, Help: usage, Value: !(isBool && b.IsBoolFlag())}
		switch name {
		case "DIR":
			fl.Dirs = true
		case "PATH", "FILE":
			fl.Files = true
		}
		out = append(out, fl)
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Flag returns c's flag called name (nil: none).
func (c *Command) Flag(name string) *Flag {
	for i := range c.Flags {
		if c.Flags[i].Name == name {
			return &c.Flags[i]
		}
	}
	return nil
}

// Write writes the script for shell ("bash", "zsh" or "fish").
func Write(w io.Writer, shell string, root *Command) error {
	switch shell {
	case "bash":
		return Bash(w, root)
	case "zsh":
		return Zsh(w, root)
	case "fish":
		return Fish(w, root)
	}
	return fmt.Errorf("unknown shell %q: want bash, zsh or fish", shell)
}

// Shells are the shells Write knows.
var Shells = []string{"bash", "zsh", "fish"}

// node is a command with its path below the root ("" for the root).
type node struct {
	path string
	cmd  *Command
}

func walk(root *Command) []node {
	var out []node
	var rec func(prefix string, c *Command)
	rec = func(path string, c *Command) {
		out = append(out, node{path, c})
		for _, s := range c.Subs {
			p := s.Name
			if path != "" {
				p = path + " " + s.Name
			}
			rec(p, s)
		}
	}
	rec("", root)
	return out
}

// fname is the shell-function-safe form of the program's name.
func fname(root *Command) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, root.Name)
}

// sq quotes s for a POSIX shell (and fish) in single quotes.
func sq(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// fishq quotes s for fish, where a backslash escapes inside single quotes.
func fishq(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

func subNames(c *Command) []string {
	var out []string
	for _, s := range c.Subs {
		out = append(out, s.Name)
	}
	return out
}

// flagNames are c's flags as typed: "-f" for a one-letter name, else
// "--name" (Go's flag package takes either).
func flagNames(c *Command) []string {
	var out []string
	for _, f := range c.Flags {
		out = append(out, dashed(f.Name))
	}
	return out
}

func dashed(name string) string {
	if len([]rune(name)) == 1 {
		return "-" + name
	}
	return "--" + name
}

// valueFlags are the bare names of c's flags that take a value.
func valueFlags(c *Command) []string {
	var out []string
	for _, f := range c.Flags {
		if f.Value {
			out = append(out, f.Name)
		}
	}
	return out
}

// firstLine is the first line of a help text, for menus.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(s)
}
