package main

import (
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/mother-chat/mother/pkg/completion"
	"github.com/mother-chat/mother/pkg/setup"
)

// flags are mother's own flags.
type flags struct {
	cli, checkConfig, version *bool
	logLevel                  *string
}

// logLevels are the values of --log-level.
var logLevels = []string{"debug", "info", "warn", "error"}

// defineFlags defines mother's flags on fs (run parses them; the
// completions list them).
func defineFlags(fs *flag.FlagSet) flags {
	return flags{
		cli:         fs.Bool("cli", false, "make the terminal a channel: lines on stdin are messages, replies go to stdout"),
		checkConfig: fs.Bool("check-config", false, "validate <data>/config.json, print every problem and what starting this release would change, and exit"),
		version:     fs.Bool("version", false, "print the version and exit"),
		logLevel:    fs.String("log-level", "", "log level: debug, info, warn, error (default: config, or warn with --cli)"),
	}
}

// migrateFlags are the flags runMigrate reads (it parses them itself, so
// they may come anywhere); TestCompletionMigrateFlags checks it takes
// each.
var migrateFlags = []completion.Flag{
	{Name: "adapter", Help: "the adapter the old channels go under", Value: true},
	{Name: "models", Help: "an old models.json to merge (repeatable)", Value: true, Files: true},
	{Name: "no-models", Help: "read no old models file"},
}

// completionTree is mother's command tree for the shell completions.
func completionTree() *completion.Command {
	fs := flag.NewFlagSet("mother", flag.ContinueOnError)
	defineFlags(fs)
	root := &completion.Command{Name: "mother", Flags: completion.FromFlagSet(fs), Args: completion.ArgsDirs}
	root.Flag("log-level").Choices = logLevels
	root.Subs = append(root.Subs,
		setupCompletion(),
		&completion.Command{Name: "link", Help: "link a chat account (whatsapp NAME DATA)", Subs: []*completion.Command{
			{Name: "whatsapp", Help: "link a WhatsApp account by QR or pairing code", Args: completion.ArgsDirs},
		}},
		&completion.Command{Name: "migrate", Help: "import a TypeScript Mother or mom data directory", Flags: migrateFlags, Args: completion.ArgsDirs},
		rollbackCompletion(),
		&completion.Command{Name: "completion", Help: "a shell completion script for mother (bash, zsh, fish)"},
	)
	for _, sh := range completion.Shells {
		root.Subs[len(root.Subs)-1].Subs = append(root.Subs[len(root.Subs)-1].Subs, &completion.Command{Name: sh, Help: "the " + sh + " script"})
	}
	return root
}

// runCompletion prints the completion script for a shell:
// mother completion bash|zsh|fish.
func runCompletion(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 || !slices.Contains(completion.Shells, args[0]) {
		fmt.Fprintln(stderr, "usage: mother completion bash|zsh|fish")
		return exitUsage
	}
	if err := completion.Write(stdout, args[0], completionTree()); err != nil {
		fmt.Fprintf(stderr, "mother: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// setupCompletion is mother setup, with the flags runSetup defines.
func setupCompletion() *completion.Command {
	fs := flag.NewFlagSet("mother setup", flag.ContinueOnError)
	defineSetupFlags(fs, &setup.Flags{})
	c := &completion.Command{Name: "setup", Help: "write DATA/config.json, checking every answer live", Flags: completion.FromFlagSet(fs), Args: completion.ArgsDirs}
	c.Flag("platforms").Choices = []string{"discord", "slack", "telegram", "none"}
	return c
}
