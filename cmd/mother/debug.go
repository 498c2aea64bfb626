package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// debugEnv names the loopback address of Mother's debug listener: Go's
// runtime profiles (net/http/pprof) under /debug/pprof/, for an operator
// chasing a leak and for the soak harness, which reads goroutine counts
// and heap figures there. Off unless set.
const debugEnv = "MOTHER_DEBUG_LISTEN"

// startDebug serves the runtime profiles on addr, which must be a
// loopback address (the profiles show internals, never to be exposed).
func startDebug(addr string, logger *slog.Logger) (stop func(), err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w", debugEnv, addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%s=%q: must be a loopback address such as 127.0.0.1:6060", debugEnv, addr)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", debugEnv, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("debug listener stopped", "component", "debug", "err", err)
		}
	}()
	logger.Info("debug listener (runtime profiles)", "component", "debug", "addr", lis.Addr().String())
	return func() { srv.Close() }, nil
}
