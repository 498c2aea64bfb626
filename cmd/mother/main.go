// Command mother runs Mother: the chat adapters configured in
// <data>/config.json as a daemon, or the terminal as a channel with --cli.
//
//	mother [--cli] [--log-level LEVEL] <data>
//	mother --check-config <data>
//	mother setup [flags] <data>
//	mother link whatsapp <name> <data>
//	mother rollback [--to RELEASE] <data>
//	mother migrate OLD NEW --adapter NAME [--models FILE]... [--no-models]
//	mother completion bash|zsh|fish
//	mother --version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"syscall"

	// IANA zones for periodic events, even where the host has no zoneinfo.
	_ "time/tzdata"

	_ "github.com/mother-chat/mother/pkg/adapters/discord"  // registers "discord"
	_ "github.com/mother-chat/mother/pkg/adapters/slack"    // registers "slack"
	_ "github.com/mother-chat/mother/pkg/adapters/telegram" // registers "telegram"
	_ "github.com/mother-chat/mother/pkg/adapters/whatsapp" // registers "whatsapp"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/dataformat"

	// Aliased: the end-to-end tests of this package have a type daemon.
	motherd "github.com/mother-chat/mother/pkg/daemon"
	"github.com/mother-chat/mother/pkg/migrate"
	release "github.com/mother-chat/mother/pkg/version"
)

// version is the build's label, stamped at build time with -ldflags
// "-X main.version=..." (git describe, or a test's name for it). The
// release is pkg/version's.
var version = "dev"

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	// exitNewerData: the data directory is of a newer format than this
	// release reads (the packages' scripts branch on it).
	exitNewerData = 3
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	subs := map[string]func(args []string, stdout, stderr io.Writer) int{
		"migrate":    runMigrate,
		"completion": runCompletion,
		"setup":      func(a []string, o, e io.Writer) int { return runSetup(a, stdin, o, e) },
		"link":       func(a []string, o, e io.Writer) int { return runLink(a, stdin, o, e) },
		"rollback":   runRollback,
	}
	if len(args) > 0 {
		if sub, ok := subs[args[0]]; ok {
			if len(args) == 2 && isHelpWord(args[1]) {
				// "mother setup --help": its usage on stdout, status 0.
				if code := sub(args[1:], stdout, stdout); code != exitUsage {
					return code
				}
				return exitOK
			}
			return sub(args[1:], stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("mother", flag.ContinueOnError)
	f := defineFlags(fs)
	cliMode, checkConfig, showVersion, logLevel := f.cli, f.checkConfig, f.version, f.logLevel
	usageTo := func(w io.Writer) {
		fmt.Fprintf(w, "usage: mother [--cli] [--log-level LEVEL] <data>\n       mother --check-config <data>\n       mother setup [flags] <data>\n       mother link whatsapp <name> <data>\n       mother rollback [--to RELEASE] <data>\n       mother migrate OLD NEW --adapter NAME [--models FILE]...\n       mother completion bash|zsh|fish\n       mother help | --help | --version\n\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	// Help the usual ways, on stdout with status 0: "help" is never taken
	// for a data directory.
	if len(args) == 1 && (args[0] == "help" || isHelpWord(args[0])) {
		usageTo(stdout)
		return exitOK
	}
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usageTo(stdout)
			return exitOK
		}
		fmt.Fprintf(stderr, "mother: %v\n\n", err)
		usageTo(stderr)
		return exitUsage
	}
	fs.Usage = func() { usageTo(stderr) }
	if *showVersion {
		fmt.Fprintln(stdout, release.Line("mother", version, "data format "+strconv.Itoa(dataformat.Current)))
		return exitOK
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	if *checkConfig {
		summary, err := motherd.CheckConfig(fs.Arg(0), os.Getenv)
		if err != nil {
			fmt.Fprintf(stderr, "mother: %v\n", err)
			return exitStatus(err)
		}
		fmt.Fprintln(stdout, summary)
		return exitOK
	}
	// MOTHER_CPUPROFILE=path writes a CPU profile of the run (go tool
	// pprof), for the bench and for finding where the time goes;
	// MOTHER_TRACE=path an execution trace (go tool trace; -pprof=sync,
	// syscall or sched shows where goroutines wait); MOTHER_MEMPROFILE=path
	// the allocations of the whole run, written at exit (go tool pprof
	// -sample_index=alloc_space).
	for _, p := range []struct {
		env   string
		start func(io.Writer) error
		stop  func()
	}{{"MOTHER_CPUPROFILE", pprof.StartCPUProfile, pprof.StopCPUProfile}, {"MOTHER_TRACE", trace.Start, trace.Stop}, {"MOTHER_MEMPROFILE", startAllocs, nil}} {
		path := os.Getenv(p.env)
		if path == "" {
			continue
		}
		f, err := os.Create(path)
		if err == nil {
			err = p.start(f)
		}
		if err != nil {
			fmt.Fprintf(stderr, "mother: %s: %v\n", p.env, err)
			return exitUsage
		}
		defer func() {
			if p.stop != nil {
				p.stop()
			} else {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
			}
			f.Close()
		}()
	}
	// Run reports its failures on stderr itself, in order with its log.
	return exitStatus(motherd.Run(context.Background(), motherd.Options{
		DataDir: fs.Arg(0), CLI: *cliMode, LogLevel: *logLevel, Version: version,
		Stdin: stdin, Stdout: stdout, Stderr: stderr, Getenv: os.Getenv,
	}))
}

// isHelpWord reports whether a word asks for help.
func isHelpWord(w string) bool { return w == "-h" || w == "-help" || w == "--help" }

// startAllocs makes the allocation profile count every 64 KiB allocated
// instead of 512 KiB, so a short bench run has enough samples; the profile
// is written at exit.
func startAllocs(io.Writer) error {
	runtime.MemProfileRate = 64 << 10
	return nil
}

// exitStatus is 0 for nil, 2 for a configuration or usage problem, 3 for
// a data directory of a newer format, else 1.
func exitStatus(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, dataformat.ErrNewer):
		return exitNewerData
	case errors.Is(err, motherd.ErrConfig), errors.Is(err, motherd.ErrUsage):
		return exitUsage
	}
	return exitFailure
}

// runLink links a chat account that is linked rather than configured by
// a token: mother link TYPE NAME DATA (WhatsApp).
func runLink(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 3 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, `usage: mother link whatsapp <name> <data>

Links the WhatsApp account of adapter <name> in <data>/config.json: shows a
QR code to scan with the phone (WhatsApp → Linked devices → Link a device),
or type the phone number to get a pairing code instead. Stop Mother first.`)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	err := motherd.Link(ctx, args[2], args[0], args[1], os.Getenv, chat.Terminal{In: stdin, Out: stdout}, logger)
	if err != nil {
		fmt.Fprintf(stderr, "mother link: %v\n", err)
	}
	return exitStatus(err)
}

// runMigrate imports a TypeScript Mother or mom data directory:
// mother migrate OLD NEW --adapter NAME [--models FILE]... [--no-models]
// (flags may come anywhere).
func runMigrate(args []string, stdout, stderr io.Writer) int {
	usage := func() int {
		fmt.Fprintln(stderr, `usage: mother migrate OLD NEW --adapter NAME [--models FILE]... [--no-models]

Imports the data directory of the TypeScript Mother (Discord) or mom (Slack)
into NEW, placing its channels under the adapter NAME. OLD is never modified.

The old models files (pi's models.json format) are merged into NEW/config.json
where they map: --models FILE (repeatable), else $MOTHER_MODELS_JSON (or
~/.pi/mother/models.json) and ~/.pi/agent/models.json where they exist.
--no-models reads none. The old Mother's own model (her settings.json, else
MOTHER_MODEL_PROVIDER and MOTHER_MODEL_ID) becomes Mother's model when it is
one of them.`)
		return exitUsage
	}
	var adapter string
	var pos, models []string
	noModels := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--adapter" || a == "-adapter":
			if i+1 >= len(args) {
				return usage()
			}
			adapter = args[i+1]
			i++
		case strings.HasPrefix(a, "--adapter="):
			adapter = strings.TrimPrefix(a, "--adapter=")
		case a == "--models" || a == "-models":
			if i+1 >= len(args) {
				return usage()
			}
			models = append(models, args[i+1])
			i++
		case strings.HasPrefix(a, "--models="):
			models = append(models, strings.TrimPrefix(a, "--models="))
		case a == "--no-models":
			noModels = true
		case a == "-h" || a == "--help":
			return usage()
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(stderr, "mother migrate: unknown flag %s\n", a)
			return usage()
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 || adapter == "" || (noModels && len(models) > 0) {
		return usage()
	}
	if !noModels && len(models) == 0 {
		models = defaultModelsFiles(os.Getenv)
	}
	rep, err := migrate.Run(migrate.Options{OldDir: pos[0], NewDir: pos[1], Adapter: adapter, ModelsFiles: models, Getenv: os.Getenv})
	if err != nil {
		fmt.Fprintf(stderr, "mother migrate: %v\n", err)
		return exitStatus(err)
	}
	fmt.Fprint(stdout, rep.String())
	return exitOK
}

// defaultModelsFiles are the old models files that exist: the TypeScript
// Mother's ($MOTHER_MODELS_JSON, default ~/.pi/mother/models.json), then
// pi's (~/.pi/agent/models.json). A MOTHER_MODELS_JSON that names a missing
// file is kept, so the report says so.
func defaultModelsFiles(getenv func(string) string) []string {
	var out []string
	home := getenv("HOME")
	if p := getenv("MOTHER_MODELS_JSON"); p != "" {
		out = append(out, p)
	} else if home != "" {
		if p := filepath.Join(home, ".pi/mother/models.json"); exists(p) {
			out = append(out, p)
		}
	}
	if home != "" {
		if p := filepath.Join(home, ".pi/agent/models.json"); exists(p) {
			out = append(out, p)
		}
	}
	return out
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
