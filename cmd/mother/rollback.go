package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/mother-chat/mother/pkg/completion"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/dataformat"
)

// defineRollbackFlags defines mother rollback's flags on fs (runRollback
// parses them; the completions list them).
func defineRollbackFlags(fs *flag.FlagSet) *string {
	return fs.String("to", dataformat.Previous, "the `RELEASE` whose data format to go back to")
}

// runRollback is `mother rollback [--to RELEASE] DATA` (flags may come
// anywhere): it puts DATA back into the format RELEASE reads, from the
// snapshots taken before each migration. Exit 0 and a sentence saying
// what it did; 1 and a sentence when it cannot, with nothing changed.
func runRollback(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mother rollback", flag.ContinueOnError)
	fs.SetOutput(stderr)
	to := defineRollbackFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: mother rollback [--to RELEASE] DATA

Puts the data directory DATA back into the format that Mother RELEASE
(default %s, the previous release) reads: restores the snapshots taken
before each migration, newest first, and rewrites or removes
DATA/state/format.json. Stop Mother first. Data written since the upgrade
to a restored file is not kept.

`, dataformat.Previous)
		fs.PrintDefaults()
	}
	pos, ok := parseInterspersed(fs, args)
	if !ok {
		return exitUsage
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitUsage
	}
	msg, err := dataformat.Rollback(pos[0], *to, dataformat.Release)
	if err != nil {
		fmt.Fprintf(stderr, "mother rollback: %v\n", err)
		return exitFailure
	}
	fmt.Fprintln(stdout, msg)
	// config.json is not part of the format: the fields the older
	// release would refuse are named, for the owner to change.
	for _, w := range config.NotKnownTo(pos[0], *to) {
		fmt.Fprintln(stdout, "warning: "+w)
	}
	return exitOK
}

// rollbackCompletion is mother rollback, with its flags.
func rollbackCompletion() *completion.Command {
	fs := flag.NewFlagSet("mother rollback", flag.ContinueOnError)
	defineRollbackFlags(fs)
	return &completion.Command{Name: "rollback", Help: "put DATA back into the format an older release reads", Flags: completion.FromFlagSet(fs), Args: completion.ArgsDirs}
}

// parseInterspersed parses fs's flags wherever they stand among args
// ("mother setup DATA --non-interactive" as well as flags first), and
// returns the positional arguments in order. It reports false when a flag
// does not parse (fs has said why).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, bool) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, false
		}
		if fs.NArg() == 0 {
			return pos, true
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
