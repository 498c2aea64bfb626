package main

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// results are the figures the issues' goals name (18, then 45), filled in
// by the sections that ran, printed last beside their goals.
type results struct {
	relayPerSecond, relayCPUPerEvent          float64 // events/s; seconds
	relayEvents                               int
	relayCPU                                  float64 // seconds
	overheadP50, overheadP99                  time.Duration
	renderP50, renderP99                      time.Duration
	fsyncsPerEvent, fsyncsPerMessage          float64
	fsyncKinds                                string // per answered message
	relayFsyncKinds                           string
	idle, rss100, peakTerminal, peakPlatforms int // KiB
	peakStartup                               int // KiB, the terminal run's start-up
	startupEmpty, startupHung                 time.Duration
	haveRelay, haveRender, haveFsyncPerEvents bool
	// Mother's own relay ceiling (relaycap: synthetic chicks).
	capPerSecond, capCPUPerEvent, capFsyncsPerEvent float64
	capEvents                                       int
	haveCap, haveCapFsyncs                          bool
	// arm64 is the size of the stripped arm64 binary (bytes; 0: not built).
	arm64 int64
	// The history index (recall.go, issue 46).
	haveRecall                                  bool
	recallBuildPerSecond, recallBytesPerMillion float64
	recallP50, recallP99                        time.Duration
	recallRSSDelta, recallMessages              int // KiB; messages indexed
}

var summary = results{fsyncsPerMessage: -1}

// row is one figure of the summary: what was measured (text), its value
// for comparing runs (NaN: not measured), its goal, and whether the
// goal is met (met is meaningful only when the goal has a bound).
type row struct {
	name, got, goal string
	v               float64
	lowerIsBetter   bool
	met, bounded    bool
}

// rows lists the figures in a fixed order; a section that did not run
// gives its rows "not run".
func (r results) rows() []row {
	const na = "not run"
	nan := math.NaN()
	var rs []row
	add := func(name, got, goal string, v float64, lower bool, bound float64) {
		rr := row{name: name, got: got, goal: goal, v: v, lowerIsBetter: lower}
		if !math.IsNaN(bound) && !math.IsNaN(v) {
			rr.bounded = true
			rr.met = lower && v <= bound || !lower && v >= bound
		}
		rs = append(rs, rr)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	mbv := func(kib int) (string, float64) {
		if kib == 0 {
			return na, nan
		}
		return fmt.Sprintf("%.1f MB", mb(kib)), mb(kib)
	}

	if r.fsyncsPerMessage >= 0 {
		add("fsyncs per answered message (terminal)", fmt.Sprintf("%.2f (%s)", r.fsyncsPerMessage, r.fsyncKinds), "≤ 2.0", r.fsyncsPerMessage, true, 2.0)
		add("… at 10 ms per fsync (SD card): fsync time per answered message", fmt.Sprintf("%.0f ms", r.fsyncsPerMessage*10), "≤ 20 ms", r.fsyncsPerMessage*10, true, 20)
	} else {
		add("fsyncs per answered message (terminal)", na, "≤ 2.0", nan, true, 2.0)
	}
	if r.haveFsyncPerEvents {
		add("fsyncs per relayed chick event under load (chicks)", fmt.Sprintf("%.3f (%s)", r.fsyncsPerEvent, r.relayFsyncKinds), "≤ 0.05", r.fsyncsPerEvent, true, 0.05)
	} else {
		add("fsyncs per relayed chick event under load (chicks)", na, "≤ 0.05", nan, true, 0.05)
	}
	if r.haveCapFsyncs {
		add("fsyncs per relayed event (relaycap)", fmt.Sprintf("%.4f", r.capFsyncsPerEvent), "≤ 0.05", r.capFsyncsPerEvent, true, 0.05)
	}
	if r.overheadP99 > 0 {
		add("delivery → first model request p99", fmt.Sprintf("%s (p50 %s)", r.overheadP99, r.overheadP50), "≤ 3 ms", ms(r.overheadP99), true, 3)
	} else {
		add("delivery → first model request p99", na, "≤ 3 ms", nan, true, 3)
	}
	if r.haveRender {
		add("chick event → adapter render p99", fmt.Sprintf("%s (p50 %s)", r.renderP99, r.renderP50), "≤ 3 ms", ms(r.renderP99), true, 3)
	} else {
		add("chick event → adapter render p99", na, "≤ 3 ms", nan, true, 3)
	}
	if r.haveCap {
		add("relay ceiling, 10 synthetic chicks (relaycap), every event durable before its ack", fmt.Sprintf("%.0f events/s", r.capPerSecond), "≥ 38c54d1's (ratio)", r.capPerSecond, false, nan)
		add("Mother's CPU per relayed event (relaycap)", fmt.Sprintf("%.1f µs (%d events)", r.capCPUPerEvent*1e6, r.capEvents), "≤ 38c54d1's (ratio)", r.capCPUPerEvent*1e6, true, nan)
	} else {
		add("relay ceiling, 10 synthetic chicks (relaycap)", na, "≥ 38c54d1's (ratio)", nan, false, nan)
		add("Mother's CPU per relayed event (relaycap)", na, "≤ 38c54d1's (ratio)", nan, true, nan)
	}
	if r.haveRelay {
		add("relay, 10 real chicks → terminal", fmt.Sprintf("%.0f events/s", r.relayPerSecond), "≥ 10,000 events/s", r.relayPerSecond, false, 10000)
		add("Mother's CPU per relayed event (real chicks)", fmt.Sprintf("%.0f µs (%.2f s for %d events)", r.relayCPUPerEvent*1e6, r.relayCPU, r.relayEvents), "≤ 50 µs", r.relayCPUPerEvent*1e6, true, 50)
	}
	s, v := mbv(r.idle)
	add("RSS idle after start (terminal)", s, "≤ 10 MB", v, true, 10)
	s, v = mbv(r.rss100)
	add("RSS 1 s after 100 exchanges (terminal)", s, "≤ 25 MB", v, true, 25)
	s, v = mbv(r.peakTerminal)
	add("peak RSS over the messages, from the first (terminal)", s, "≤ 32 MB", v, true, 32)
	s, v = mbv(r.peakPlatforms)
	add("peak RSS over 1,000 messages (Discord+Slack+Telegram, 150 channels)", s, "≤ 48 MB", v, true, 48)
	s, v = mbv(r.peakStartup)
	add("peak RSS during start-up, before the first idle trim (terminal)", s, "(no goal)", v, true, nan)
	if r.startupEmpty > 0 {
		add("start-up, exec to READY=1, the only Docker engine hanging", r.startupHung.Round(time.Millisecond).String(), "≤ 50 ms", ms(r.startupHung), true, 50)
		add("start-up, exec to READY=1, empty data directory", r.startupEmpty.Round(time.Millisecond).String(), "≤ 50 ms", ms(r.startupEmpty), true, 50)
	} else {
		add("start-up, exec to READY=1, the only Docker engine hanging", na, "≤ 50 ms", nan, true, 50)
	}
	if r.arm64 > 0 {
		add("stripped arm64 mother", fmt.Sprintf("%.1f MB", float64(r.arm64)/(1<<20)), "(explained per dependency in docs/testing.md)", float64(r.arm64)/(1<<20), true, nan)
	}
	if r.haveRecall {
		add(fmt.Sprintf("recall: full-text query p99 over %d messages in one channel (issue 46)", r.recallMessages),
			fmt.Sprintf("%s (p50 %s)", r.recallP99.Round(10*time.Microsecond), r.recallP50.Round(10*time.Microsecond)), "≤ 20 ms", ms(r.recallP99), true, 20)
		add("recall: Mother's idle RSS with the index on, minus off", fmt.Sprintf("%+.1f MB", mb(r.recallRSSDelta)), "≤ 10 MB", mb(r.recallRSSDelta), true, 10)
		add("recall: index build rate", fmt.Sprintf("%.0f messages/s", r.recallBuildPerSecond), "(no goal)", r.recallBuildPerSecond, false, nan)
		add("recall: index bytes per million messages", fmt.Sprintf("%.0f MB", r.recallBytesPerMillion/1e6), "(no goal)", r.recallBytesPerMillion/1e6, true, nan)
	}
	return rs
}

func mark(rr row) string {
	switch {
	case !rr.bounded:
		return ""
	case rr.met:
		return " ✓"
	default:
		return " ✗"
	}
}

func (r results) print() {
	fmt.Printf("## Summary against the goals (issues 18 and 45)\n\n| figure | measured | goal |\n|---|---|---|\n")
	for _, rr := range r.rows() {
		fmt.Printf("| %s | %s | %s%s |\n", rr.name, rr.got, rr.goal, mark(rr))
	}
	fmt.Println()
}

// printCompare prints the figures of every run of this tree and of the
// baseline side by side, and the ratio of their means (this tree over
// the baseline). ✓/✗ say whether this tree's mean meets the goal.
func printCompare(rev string, cur, base []results) {
	fmt.Printf("## Summary against the goals (issues 18 and 45), %d run(s) of this tree and of %s, alternated in one sitting\n\n", len(cur), rev)
	fmt.Printf("| figure | goal | this tree | %s | ratio (this / %s) |\n|---|---|---|---|---|\n", rev, rev)
	var curRows, baseRows [][]row
	for _, r := range cur {
		curRows = append(curRows, r.rows())
	}
	for _, r := range base {
		baseRows = append(baseRows, r.rows())
	}
	if len(curRows) == 0 {
		return
	}
	for i, rr := range curRows[0] {
		var gotC, gotB []string
		var sumC, sumB float64
		nC, nB := 0, 0
		for _, rs := range curRows {
			// A section measured in one run only (recall) has rows the
			// other runs lack.
			if i >= len(rs) || rs[i].name != rr.name {
				continue
			}
			gotC = append(gotC, rs[i].got)
			if !math.IsNaN(rs[i].v) {
				sumC += rs[i].v
				nC++
			}
		}
		for _, rs := range baseRows {
			if i < len(rs) && rs[i].name == rr.name {
				gotB = append(gotB, rs[i].got)
				if !math.IsNaN(rs[i].v) {
					sumB += rs[i].v
					nB++
				}
			}
		}
		ratio := ""
		if nC > 0 && nB > 0 && sumB != 0 {
			ratio = fmt.Sprintf("%.2fx", (sumC/float64(nC))/(sumB/float64(nB)))
		}
		mean := rr
		if nC > 0 {
			mean.v = sumC / float64(nC)
			mean.met = mean.lowerIsBetter && mean.v <= boundOf(rr) || !mean.lowerIsBetter && mean.v >= boundOf(rr)
		}
		fmt.Printf("| %s | %s%s | %s | %s | %s |\n", rr.name, rr.goal, mark(mean), strings.Join(gotC, "; "), strings.Join(gotB, "; "), ratio)
	}
	fmt.Println()
}

// boundOf reads the number back out of a row's goal ("≤ 2.0", "≤ 25 MB").
func boundOf(rr row) float64 {
	var b float64
	g := strings.NewReplacer(",", "", "≤ ", "", "≥ ", "").Replace(rr.goal)
	if _, err := fmt.Sscanf(g, "%g", &b); err != nil {
		return math.NaN()
	}
	return b
}
