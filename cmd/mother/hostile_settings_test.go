package main

import "strings"

// The hostile suite's settings of the doors issue 31 closes, in the
// config fields that close them (hostile_e2e_test.go).

// hostileTierMaxOutput is the test tier's maximum output per call
// (chicks.tiers.<name>.maxOutputTokens).
const hostileTierMaxOutput = 256

// hostileBudgetChicks are the chicks settings of the budget row: the
// test tier with its output maximum (each call reserves its prompt and
// that, so it must fit in the row's budget for the chick to work).
var hostileBudgetChicks = map[string]any{
	"tiers": map[string]any{"local": map[string]any{"provider": "ollama", "model": chickModel, "description": "the test tier", "maxOutputTokens": hostileTierMaxOutput}},
}

// hostileEventsCap is the total bytes of events stored per chick
// (chicks.events.maxBytes; maxEventBytes and perSecond keep their
// defaults, 1m and 100 with a burst of 1000).
const hostileEventsCap = 8 << 20

// hostileFloodChicks are the chicks settings of the flood row.
var hostileFloodChicks = map[string]any{"events": map[string]any{"maxBytes": "8m"}}

// hostileGateChicks are the chicks settings of the gate storm row.
var hostileGateChicks = map[string]any{}

// hostileDiskResources are added to chicks.resources in the disk row:
// a 64 MiB /workspace (chicks.resources.workspaceBytes).
var hostileDiskResources = map[string]any{"workspaceBytes": "64m"}

// hostileStormReported reports whether the gate's refusal of a chick's
// connections shows in the channel, Mother's log or the gate's.
func hostileStormReported(channel, mother, gate string) bool {
	for _, s := range []string{channel, mother, gate} {
		// The gate reports a chick's refused connection to Mother as an
		// egress refusal of "nest.sock" (the channel's ✗ egress line)
		// and logs it.
		if strings.Contains(s, "connection limit") || strings.Contains(s, "the gate is full") {
			return true
		}
	}
	return false
}
