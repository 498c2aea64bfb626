package main

import (
	"fmt"
	"time"
)

// results are the figures of issue 18's table, filled in by the sections
// that ran, printed last beside their goals.
type results struct {
	relayPerSecond, relayCPUPerEvent          float64 // events/s; seconds
	relayEvents                               int
	relayCPU                                  float64 // seconds
	overheadP50, overheadP99                  time.Duration
	renderP50, renderP99                      time.Duration
	fsyncsPerEvent, fsyncsPerMessage          float64
	relayFsyncKinds                           string
	rss100, peakTerminal, peakPlatforms       int // KiB
	peakStartup                               int // KiB, the terminal run's start-up
	startupEmpty, startupHung                 time.Duration
	haveRelay, haveRender, haveFsyncPerEvents bool
	// Mother's own relay ceiling (relaycap: synthetic chicks).
	capPerSecond, capCPUPerEvent, capFsyncsPerEvent float64
	capEvents                                       int
	haveCap, haveCapFsyncs                          bool
	// The history index (recall.go, issue 46).
	haveRecall                                  bool
	recallBuildPerSecond, recallBytesPerMillion float64
	recallP50, recallP99                        time.Duration
	recallRSSDelta, recallMessages              int // KiB; messages indexed
}

var summary = results{fsyncsPerMessage: -1}

func (r results) print() {
	fmt.Printf("## Summary against the goals (issue 18)\n\n| figure | measured | goal |\n|---|---|---|\n")
	na := "not run"
	row := func(name, got, goal string) { fmt.Printf("| %s | %s | %s |\n", name, got, goal) }
	if r.haveRelay {
		row("relay, 10 chicks → terminal, every event durable before its ack", fmt.Sprintf("%.0f events/s", r.relayPerSecond), "≥ 10,000 events/s")
		row("Mother's CPU per relayed event", fmt.Sprintf("%.0f µs (%.2f s for %d events)", r.relayCPUPerEvent*1e6, r.relayCPU, r.relayEvents), "≤ 50 µs")
	} else {
		row("relay, 10 chicks → terminal, every event durable before its ack", na, "≥ 10,000 events/s")
		row("Mother's CPU per relayed event", na, "≤ 50 µs")
	}
	if r.haveCap {
		row("relay ceiling, 10 synthetic chicks (relaycap: Mother's work only), every event durable before its ack", fmt.Sprintf("%.0f events/s", r.capPerSecond), "≥ 10,000 events/s")
		row("Mother's CPU per relayed event (relaycap)", fmt.Sprintf("%.1f µs (%d events)", r.capCPUPerEvent*1e6, r.capEvents), "≤ 50 µs")
		if r.haveCapFsyncs {
			f := fmt.Sprintf("%.4f", r.capFsyncsPerEvent)
			if r.capFsyncsPerEvent > 0 {
				f += fmt.Sprintf("; at 10 ms per fsync: %.0f events/s", 1/(r.capFsyncsPerEvent*0.010))
			}
			row("fsyncs per relayed event (relaycap)", f, "≤ 0.05")
		}
	} else {
		row("relay ceiling, 10 synthetic chicks (relaycap)", na, "≥ 10,000 events/s")
	}
	if r.overheadP99 > 0 {
		row("delivery → first model request", fmt.Sprintf("p50 %s, p99 %s", r.overheadP50, r.overheadP99), "p99 ≤ 5 ms")
	} else {
		row("delivery → first model request", na, "p99 ≤ 5 ms")
	}
	if r.haveRender {
		row("chick event → adapter render", fmt.Sprintf("p50 %s, p99 %s", r.renderP50, r.renderP99), "p99 ≤ 5 ms")
	} else {
		row("chick event → adapter render", na, "p99 ≤ 5 ms")
	}
	ev, msg := na, na
	if r.haveFsyncPerEvents {
		ev = fmt.Sprintf("%.3f (%s)", r.fsyncsPerEvent, r.relayFsyncKinds)
	}
	if r.fsyncsPerMessage >= 0 {
		msg = fmt.Sprintf("%.2f", r.fsyncsPerMessage)
	}
	row("fsyncs per relayed event under load / per answered message", ev+" / "+msg, "≤ 0.05 / ≤ 3")
	if r.haveFsyncPerEvents && r.fsyncsPerEvent > 0 {
		row("… at 10 ms per fsync (SD card): relay ceiling from fsyncs alone", fmt.Sprintf("%.0f events/s", 1/(r.fsyncsPerEvent*0.010)), "")
	}
	if r.fsyncsPerMessage >= 0 {
		row("… at 10 ms per fsync (SD card): fsync time per answered message", fmt.Sprintf("%.0f ms", r.fsyncsPerMessage*10), "≤ 30 ms")
	}
	mbOr := func(kib int) string {
		if kib == 0 {
			return na
		}
		return fmt.Sprintf("%.1f MB", mb(kib))
	}
	row("RSS 1 s after 100 exchanges (terminal)", mbOr(r.rss100), "≤ 30 MB")
	row("peak RSS over 1,000 messages (terminal / Discord+Slack+Telegram, 150 channels), counted from the first message", mbOr(r.peakTerminal)+" / "+mbOr(r.peakPlatforms), "≤ 40 / ≤ 60 MB")
	row("peak RSS during start-up, before the first idle trim (terminal)", mbOr(r.peakStartup), "(no goal; shown so the peak above hides nothing)")
	if r.startupEmpty > 0 {
		row("start-up, exec to READY=1 (empty data directory / the only Docker engine hanging)", r.startupEmpty.Round(time.Millisecond).String()+" / "+r.startupHung.Round(time.Millisecond).String(), "< 50 ms / < 50 ms")
	} else {
		row("start-up, exec to READY=1 (empty data directory / the only Docker engine hanging)", na, "< 50 ms / < 50 ms")
	}
	if r.haveRecall {
		row(fmt.Sprintf("recall: full-text query p50 / p99 over %d messages in one channel (issue 46)", r.recallMessages),
			r.recallP50.Round(10*time.Microsecond).String()+" / "+r.recallP99.Round(10*time.Microsecond).String(), "p99 < 20 ms")
		row("recall: Mother's idle RSS with the index on, minus off", fmt.Sprintf("%+.1f MB", mb(r.recallRSSDelta)), "≤ +10 MB")
		row("recall: index build rate / bytes per million messages", fmt.Sprintf("%.0f messages/s / %.0f MB", r.recallBuildPerSecond, r.recallBytesPerMillion/1e6), "(no goal)")
	}
	fmt.Println()
}
