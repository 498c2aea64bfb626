// Command chick is the worker that runs inside a chick container: it dials
// Mother at MOTHER_ADDR over TLS, trusting only the CA certificate in
// MOTHER_CA_PEM, with its id (MOTHER_CHICK_ID) and single-use token
// (MOTHER_TOKEN), receives its goal, runs the agent loop with its tools in
// /workspace, streams what it does, and exits when done or cancelled.
//
// An isolated chick (MOTHER_GATE_PROXY set, docs/isolation.md) dials
// Mother through its host's gate (MOTHER_ADDR=unix:///run/mother-gate/nest.sock),
// serves the HTTP proxy its tools use on 127.0.0.1:3128 by forwarding to
// the gate with its key (MOTHER_GATE_KEY), and offers request_access.
//
// `chick gate` is the same binary as the gate of a Docker host (package
// gate): MOTHER_ADDR, MOTHER_CA_PEM, MOTHER_GATE_HOST, MOTHER_GATE_TOKEN
// and MOTHER_GATE_DIR (default /run/mother-gate).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/mother-chat/mother/pkg/chick"
	release "github.com/mother-chat/mother/pkg/version"
	"github.com/mother-chat/mother/pkg/wire"
)

// version is stamped at build time.
var version = "dev"

func main() {
	// Before anything else, and again in the re-executed image (execve
	// makes a process dumpable again) before it reads its secrets: no
	// tool may read them out of this process (token.go).
	if err := nonDumpable(); err != nil {
		fmt.Fprintf(os.Stderr, "chick: cannot make itself non-dumpable, which keeps its token from its tools: %v\n", err)
		os.Exit(1)
	}
	showVersion := flag.Bool("version", false, "print the version and exit")
	workspace := flag.String("workspace", "/workspace", "the chick's working directory")
	flag.Parse()
	if *showVersion {
		fmt.Println(release.Line("chick", version))
		return
	}
	if flag.NArg() > 0 {
		if flag.Arg(0) != "gate" {
			fmt.Fprintf(os.Stderr, "chick: unknown command %q (the only one is \"gate\"; without one the chick runs its goal)\n", flag.Arg(0))
			os.Exit(2)
		}
		os.Exit(gateMain(flag.Args()[1:]))
	}
	hideToken()
	token, gateKey := readToken()
	addr, id, ca := os.Getenv("MOTHER_ADDR"), os.Getenv("MOTHER_CHICK_ID"), os.Getenv("MOTHER_CA_PEM")
	if addr == "" || token == "" || id == "" || ca == "" {
		fmt.Fprintln(os.Stderr, "chick: MOTHER_ADDR, MOTHER_TOKEN, MOTHER_CHICK_ID and MOTHER_CA_PEM must be set; chicks are started by Mother")
		os.Exit(2)
	}
	gateProxy := os.Getenv(wire.EnvGateProxy)
	if gateProxy != "" && gateKey == "" {
		fmt.Fprintf(os.Stderr, "chick: %s is set but %s is not; isolated chicks are started by Mother\n", wire.EnvGateProxy, wire.EnvGateKey)
		os.Exit(2)
	}
	// Public, but of no use to the tools.
	os.Unsetenv("MOTHER_CA_PEM")
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err := chick.Run(ctx, chick.Options{
		Addr: addr, Token: token, ChickID: id, CAPEM: []byte(ca), Workspace: *workspace, Version: version, Logger: logger,
		Tools: chickTools, GateProxy: gateProxy, GateKey: gateKey,
	})
	if err != nil {
		var inc *chick.IncompatibleError
		if errors.As(err, &inc) {
			// Mother's sentence, as it is: it names both releases and the fix.
			fmt.Fprintln(os.Stderr, "chick: "+inc.Why)
			os.Exit(1)
		}
		logger.Error("chick failed", "err", err)
		if errors.Is(err, chick.ErrRejected) {
			os.Exit(3)
		}
		os.Exit(1)
	}
}
