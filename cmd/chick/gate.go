package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/mother-chat/mother/pkg/gate"
	"github.com/mother-chat/mother/pkg/wire"
)

// gateMain runs `chick gate`: the egress gate of a Docker host's isolated
// chicks (package gate). It returns the exit code.
func gateMain(args []string) int {
	fs := flag.NewFlagSet("chick gate", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: chick gate\n\nThe egress gate of a Docker host's isolated chicks, started by Mother. Environment:\n"+
			"  MOTHER_ADDR        Mother's nest address, host:port\n"+
			"  MOTHER_CA_PEM      Mother's nest CA certificate (PEM)\n"+
			"  %s   this Docker host's name in Mother's config\n"+
			"  %s  the gate's token\n"+
			"  %s    where to make the sockets (default %s)\n"+
			"  %s the connection limits (\"nest=4 proxy=32 pending=64 conns=512 preface=5s\"; unset: those)\n",
			wire.EnvGateHost, wire.EnvGateToken, wire.EnvGateDir, wire.GateDir, wire.EnvGateLimits)
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "chick gate: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	// The gate's token leaves its environment (and /proc/1/environ) the
	// way the chick's does; main has made the process non-dumpable.
	hideEnv(gateHidden)
	secret := readHidden(gateHidden)
	opts, err := gateOptions(func(k string) string {
		if i := slices.Index(gateHidden, k); i >= 0 {
			return secret[i]
		}
		return os.Getenv(k)
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "chick gate: %v; the gate is started by Mother\n", err)
		return 2
	}
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := gate.Run(ctx, opts); err != nil {
		opts.Logger.Error("gate failed", "err", err)
		return 1
	}
	return 0
}

// gateOptions reads the gate's settings from the environment, naming the
// first one missing.
func gateOptions(getenv func(string) string) (gate.Options, error) {
	opts := gate.Options{
		Upstream: getenv("MOTHER_ADDR"), CAPEM: []byte(getenv("MOTHER_CA_PEM")),
		HostName: getenv(wire.EnvGateHost), Token: getenv(wire.EnvGateToken), Dir: getenv(wire.EnvGateDir),
	}
	for _, v := range []struct{ name, val string }{
		{"MOTHER_ADDR", opts.Upstream}, {"MOTHER_CA_PEM", string(opts.CAPEM)},
		{wire.EnvGateHost, opts.HostName}, {wire.EnvGateToken, opts.Token},
	} {
		if v.val == "" {
			return opts, fmt.Errorf("%s is not set", v.name)
		}
	}
	if opts.Dir == "" {
		opts.Dir = wire.GateDir
	}
	if v := getenv(wire.EnvGateLimits); v != "" {
		l, err := wire.ParseGateLimits(v)
		if err != nil {
			return opts, fmt.Errorf("%s: %w", wire.EnvGateLimits, err)
		}
		opts.MaxNestConnsPerChick, opts.MaxProxyConnsPerChick = l.NestConnsPerChick, l.ProxyConnsPerChick
		opts.MaxPending, opts.MaxConns, opts.PrefaceTimeout = l.Pending, l.Conns, l.PrefaceTimeout
	}
	return opts, nil
}
