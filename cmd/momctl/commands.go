package main

import (
	"context"
	"flag"
	"io"
	"slices"

	"github.com/mother-chat/mother/pkg/completion"
)

// command is one of momctl's commands: the words that name it, and what
// runs it with the arguments after them.
type command struct {
	words []string
	help  string
	// alias: another name of a command listed before it (not offered by
	// the completions).
	alias bool
	// args: what the command's positional arguments are (completions).
	args completion.ArgKind
	run  func(c *cli, ctx context.Context, args []string) error
}

// chickIDs are the words the completions offer for a chick id: the ids
// of the chicks alive.
var chickIDs = []string{"chicks", "ls", "-q"}

// commands are momctl's commands; the longest match of the words typed
// wins ("events ls" before "events"). Set in init: the completion command
// reads the list.
var commands []command

func init() {
	commands = []command{
		{words: []string{"chicks", "ls"}, help: "running and queued chicks (--all: ended ones too)", run: (*cli).ls},
		{words: []string{"chicks", "list"}, alias: true, run: (*cli).ls},
		{words: []string{"chicks", "kill"}, help: "cancel chicks, then kill them after the grace period", args: completion.ArgsDynamic, run: (*cli).kill},
		{words: []string{"chicks", "logs"}, help: "a chick's container output", args: completion.ArgsDynamic, run: (*cli).logs},
		{words: []string{"chicks", "watch"}, help: "the chicks table, refreshed", run: (*cli).watch},
		{words: []string{"chicks", "tail"}, help: "a chick's events as they happen, until it ends", args: completion.ArgsDynamic, run: (*cli).tail},
		{words: []string{"events", "ls"}, help: "scheduled events, soonest first", run: (*cli).events},
		{words: []string{"events", "list"}, alias: true, run: (*cli).events},
		{words: []string{"events"}, alias: true, run: (*cli).events},
		{words: []string{"status"}, help: "versions, adapters, chicks, Docker hosts, budgets today, next events", run: (*cli).status},
		{words: []string{"health"}, help: "whether Mother is up, as /healthz (or her admin socket) says; --wait D to wait for it", args: completion.ArgsDirs, run: (*cli).health},
		{words: []string{"tools", "ls"}, help: "host tool servers, their state and tools", run: (*cli).tools},
		{words: []string{"usage"}, help: "model calls and their cost, summed by day, channel, tier, user, event or model", run: (*cli).usage},
		{words: []string{"tools", "list"}, alias: true, run: (*cli).tools},
		{words: []string{"roles"}, help: "who has which role, and what was refused recently", run: (*cli).roles},
		{words: []string{"completion"}, help: "a shell completion script for momctl (bash, zsh, fish)", run: (*cli).completion},
	}
}

// findCommand finds the command rest names and the arguments after its
// words (nil: none).
func findCommand(rest []string) (*command, []string) {
	var best *command
	for i := range commands {
		w := commands[i].words
		if len(rest) >= len(w) && slices.Equal(rest[:len(w)], w) && (best == nil || len(w) > len(best.words)) {
			best = &commands[i]
		}
	}
	if best == nil {
		return nil, nil
	}
	return best, rest[len(best.words):]
}

// completionTree is momctl's command tree, its flags read from the flag
// sets the commands really parse.
func completionTree() *completion.Command {
	root := &completion.Command{Name: "momctl"}
	fs := flag.NewFlagSet("momctl", flag.ContinueOnError)
	rootFlags(fs)
	root.Flags = completion.FromFlagSet(fs)
	root.Flag("socket").Files = true
	for _, cmd := range commands {
		if cmd.alias {
			continue
		}
		node := root
		for i, w := range cmd.words {
			var next *completion.Command
			for _, s := range node.Subs {
				if s.Name == w {
					next = s
				}
			}
			if next == nil {
				next = &completion.Command{Name: w}
				if i < len(cmd.words)-1 {
					next.Help = w + " commands"
				}
				node.Subs = append(node.Subs, next)
			}
			node = next
		}
		node.Help, node.Args = cmd.help, cmd.args
		if cmd.args == completion.ArgsDynamic {
			node.ArgsCommand = chickIDs
		}
		var got *flag.FlagSet
		c := &cli{describe: func(fs *flag.FlagSet) { got = fs }, stdout: io.Discard, stderr: io.Discard}
		_ = cmd.run(c, context.Background(), nil)
		if got != nil {
			node.Flags = completion.FromFlagSet(got)
		}
	}
	for _, s := range root.Subs {
		if s.Name == "completion" {
			for _, sh := range completion.Shells {
				s.Subs = append(s.Subs, &completion.Command{Name: sh, Help: "the " + sh + " script"})
			}
		}
	}
	return root
}

// completion prints the completion script for a shell.
func (c *cli) completion(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("completion", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	if err := c.parse(fs, args); err != nil || fs.NArg() != 1 || !slices.Contains(completion.Shells, fs.Arg(0)) {
		return usageError{"completion bash|zsh|fish"}
	}
	return completion.Write(c.stdout, fs.Arg(0), completionTree())
}
