package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/term"

	"github.com/mother-chat/mother/pkg/dataformat"
	"github.com/mother-chat/mother/pkg/setup"
)

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// exitInterrupted is the shell's status for a command ended by SIGINT.
const exitInterrupted = 130

// runSetup is `mother setup [flags] DATA` (flags may come anywhere).
func runSetup(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mother setup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f setup.Flags
	nonInteractive := defineSetupFlags(fs, &f)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: mother setup [flags] DATA

Writes DATA/config.json: asks in a terminal, checking every answer live
(tokens against their platform, the Ollama server and its models, each
Docker host); with --non-interactive takes the flags only. Run again to
change a configuration: enter keeps each current value.

`)
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
	// A data directory of a newer release is not this one's to set up.
	if _, err := dataformat.Check(pos[0], dataformat.Release); err != nil {
		fmt.Fprintf(stderr, "mother setup: %v\n", err)
		return exitStatus(err)
	}
	var tty *os.File
	if fi, ok := stdin.(*os.File); ok && term.IsTerminal(int(fi.Fd())) {
		tty = fi
	}
	// Ctrl-C ends setup at once, nothing written, with the terminal as it
	// was (echo back on if a token was being typed).
	var saved *term.State
	if tty != nil {
		saved, _ = term.GetState(int(tty.Fd()))
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		if _, ok := <-sigs; !ok {
			return
		}
		if saved != nil {
			_ = term.Restore(int(tty.Fd()), saved)
		}
		fmt.Fprintln(stderr, "\nmother setup: interrupted; nothing written")
		os.Exit(exitInterrupted)
	}()
	err := setup.Run(context.Background(), setup.Options{DataDir: pos[0], In: stdin, Out: stdout, TTY: tty,
		Interactive: !*nonInteractive, Flags: f, Getenv: os.Getenv, Self: selfCommand(os.Args[0])})
	if err != nil {
		fmt.Fprintf(stderr, "mother setup: %v\n", err)
		if errors.Is(err, setup.ErrNotVerified) {
			return exitUsage
		}
		return exitFailure
	}
	return exitOK
}

// defineSetupFlags defines the flags of mother setup on fs, into f (run
// parses them; the completions list them). It returns --non-interactive.
func defineSetupFlags(fs *flag.FlagSet, f *setup.Flags) *bool {
	nonInteractive := fs.Bool("non-interactive", false, "ask nothing: take these flags and what config.json holds; fail if a token does not verify")
	fs.StringVar(&f.Platforms, "platforms", "", "chat platforms wanted, comma-separated: discord, slack, telegram (or none)")
	fs.StringVar(&f.DiscordToken, "discord-token", "", "Discord bot token")
	fs.StringVar(&f.DiscordGuild, "discord-guild", "", "limit Discord to this guild id")
	fs.StringVar(&f.DiscordAdmins, "discord-admins", "", "Discord admins: user ids or names, comma-separated")
	fs.StringVar(&f.DiscordAPIURL, "discord-api-url", "", "Discord API base URL (a proxy or a test fake); written as apiURL")
	fs.StringVar(&f.SlackBotToken, "slack-bot-token", "", "Slack bot token (xoxb-...)")
	fs.StringVar(&f.SlackAppToken, "slack-app-token", "", "Slack app-level token (xapp-...)")
	fs.StringVar(&f.SlackAdmins, "slack-admins", "", "Slack admins: user ids or names, comma-separated")
	fs.StringVar(&f.SlackAPIURL, "slack-api-url", "", "Slack API base URL (GovSlack or a test fake); written as apiURL")
	fs.StringVar(&f.TelegramToken, "telegram-token", "", "Telegram bot token")
	fs.StringVar(&f.TelegramAdmins, "telegram-admins", "", "Telegram admins: user ids, comma-separated")
	fs.StringVar(&f.TelegramAPIURL, "telegram-api-url", "", "Telegram Bot API URL (a self-hosted server or a test fake); written as apiURL")
	fs.StringVar(&f.OllamaURL, "ollama-url", "", "Ollama server URL")
	fs.StringVar(&f.Model, "model", "", "Mother's Ollama model")
	fs.StringVar(&f.ChickModel, "chick-model", "", "the chicks' Ollama model (default tier)")
	fs.StringVar(&f.ChickImage, "chick-image", "", "the chick container image")
	fs.StringVar(&f.TierProvider, "tier-provider", "", "add a chick tier on another model server: openai (any OpenAI-compatible server) or anthropic")
	fs.StringVar(&f.TierURL, "tier-url", "", "that server's base URL with its /v1 (openai), or Anthropic's API base")
	fs.StringVar(&f.TierEndpoint, "tier-endpoint", "", "a name for the OpenAI-compatible server (providers.openai.<name>; default from the URL)")
	fs.StringVar(&f.TierKey, "tier-key", "", "its API key (checked live by listing the models)")
	fs.StringVar(&f.TierKeyEnv, "tier-key-env", "", "an environment variable holding its key, written as apiKeyEnv (openai)")
	fs.StringVar(&f.TierModel, "tier-model", "", "the tier's model id")
	fs.StringVar(&f.TierName, "tier-name", "", "the tier's name (default: the server's name, or hard for anthropic)")
	fs.StringVar(&f.TierDescription, "tier-description", "", "when Mother should pick the tier (her model reads it)")
	fs.StringVar(&f.SpeechURL, "speech-url", "", "add a speech server that hears voice messages (OpenAI's audio API: whisper.cpp, faster-whisper, vLLM): its base URL with /v1")
	fs.StringVar(&f.SpeechEndpoint, "speech-endpoint", "", "a name for the speech server (providers.openai.<name>; default speech)")
	fs.StringVar(&f.SpeechKey, "speech-key", "", "its API key (checked live by transcribing silence)")
	fs.StringVar(&f.SpeechKeyEnv, "speech-key-env", "", "an environment variable holding its key, written as apiKeyEnv")
	fs.StringVar(&f.SpeechModel, "speech-model", "", "its transcription model (default whisper-1)")
	fs.Var((*stringList)(&f.DockerHosts), "docker-host", "add a Docker host, [name=]unix:///path, tcp://host:2376 or ssh://user@host (repeatable)")
	fs.StringVar(&f.DockerTLSDir, "docker-tls-dir", "", "directory with ca.pem, cert.pem, key.pem for the tcp:// hosts added")
	fs.StringVar(&f.DockerTLSGenerate, "docker-tls-generate", "", "generate TLS material for the tcp:// hosts added: the server's DNS name[,IP...]")
	fs.StringVar(&f.MotherAddress, "mother-address", "", "host:port chicks on remote Docker hosts dial to reach Mother")
	fs.StringVar(&f.ChickTokens, "chick-tokens", "", "tokens one chick may use (2m, 500k, ...)")
	fs.StringVar(&f.ChannelDailyTokens, "channel-daily-tokens", "", "chick tokens per channel per day (0: no cap)")
	fs.StringVar(&f.UserDailyTokens, "user-daily-tokens", "", "chick tokens per user per day (0: no cap)")
	fs.StringVar(&f.StatusPage, "status-page", "", "serve the status page, /metrics and /healthz (metrics.listen): on ("+setup.DefaultStatusListen+", the default for a new configuration), off, a port or a loopback host:port")
	return nonInteractive
}

// selfCommand is how the user would run this binary again: "mother" when
// it is the one on PATH, "go run ./cmd/mother" for a binary go run built
// in a temporary directory, else its path as typed ("bin/mother"),
// relative to the working directory when it lies below it.
func selfCommand(arg0 string) string {
	abs, err := filepath.Abs(arg0)
	if err != nil {
		return "mother"
	}
	if p, err := exec.LookPath("mother"); err == nil {
		if pa, err := filepath.Abs(p); err == nil && pa == abs {
			return "mother"
		}
	}
	if strings.HasPrefix(abs, filepath.Join(os.TempDir(), "go-build")) {
		return "go run ./cmd/mother"
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, abs); err == nil && !strings.HasPrefix(rel, "..") {
			if !strings.Contains(rel, string(filepath.Separator)) {
				rel = "./" + rel
			}
			return rel
		}
	}
	return abs
}
