// Package events wakes Mother up by herself: it watches
// workspace/events/*.json (immediate, one-shot and periodic events, see
// Event), schedules them on an injectable clock, and hands each one that
// falls due to a Sink (Mother's dispatcher) as an
// "[EVENT:<file>:<type>:<schedule>] text" message for the event's channel.
//
// Delivery is at least once. When an event falls due the watcher writes an
// "accepted" marker under the state directory; the marker (and, for
// immediate and one-shot events, the event file) is removed only when the
// run has finished. A Mother that crashes or shuts down in between finds
// the marker at the next start and runs the event again, marked late.
//
// Files the watcher gives up on are never destroyed silently: a file that
// does not parse after the retries is moved to <state>/rejected/, and an
// event that is too old to run (a stale immediate event, a one-shot missed
// by more than the grace) to <state>/expired/, each with a log line.
package events
