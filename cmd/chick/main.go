// Command chick is the worker that runs inside a chick container: it dials
// Mother at MOTHER_ADDR over TLS, trusting only the CA certificate in
// MOTHER_CA_PEM, with its id (MOTHER_CHICK_ID) and single-use token
// (MOTHER_TOKEN), receives its goal, runs the agent loop with its tools in
// /workspace, streams what it does, and exits when done or cancelled.
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
)

// version is stamped at build time.
var version = "dev"

func main() {
	showVersion := flag.Bool("version", false, "print the version and exit")
	workspace := flag.String("workspace", "/workspace", "the chick's working directory")
	flag.Parse()
	if *showVersion {
		fmt.Printf("chick %s\n", version)
		return
	}
	hideToken()
	addr, token, id, ca := os.Getenv("MOTHER_ADDR"), readToken(), os.Getenv("MOTHER_CHICK_ID"), os.Getenv("MOTHER_CA_PEM")
	if addr == "" || token == "" || id == "" || ca == "" {
		fmt.Fprintln(os.Stderr, "chick: MOTHER_ADDR, MOTHER_TOKEN, MOTHER_CHICK_ID and MOTHER_CA_PEM must be set; chicks are started by Mother")
		os.Exit(2)
	}
	// Public, but of no use to the tools.
	os.Unsetenv("MOTHER_CA_PEM")
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err := chick.Run(ctx, chick.Options{
		Addr: addr, Token: token, ChickID: id, CAPEM: []byte(ca), Workspace: *workspace, Version: version, Logger: logger,
		Tools: chickTools,
	})
	if err != nil {
		logger.Error("chick failed", "err", err)
		if errors.Is(err, chick.ErrRejected) {
			os.Exit(3)
		}
		os.Exit(1)
	}
}
