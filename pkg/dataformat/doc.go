// Package dataformat keeps the data directory's format version and moves a
// data directory between formats.
//
// DATA/state/format.json says which format the directory is in and which
// release last ran on it: {"format": 1, "release": "0.2.0"}. A directory
// without it is format 0, as Mother 0.1.x left it (or a new one).
//
// Mother checks the format before she creates or writes anything under
// DATA (Check). A newer format than this release reads is refused with one
// line that names the release that wrote it and how to go back (ErrNewer);
// nothing is touched. An older format is migrated stepwise (Prepare): each
// step of the table in steps.go is a function from one format to the next
// that names the files it changes. Before a step runs, those files are
// copied to DATA/state/upgrade/<from>-<to>/ with a manifest (the snapshot).
// The format file is written only after the step's files are: a crash
// leaves the old format with its snapshot, which the next start restores
// before it runs the step again, or the new format. Never a mix that the
// old release would read.
//
// Rollback puts the directory back into the format an older release reads:
// it restores the snapshots newest first and rewrites the format file (or
// removes it, for format 0). A snapshot is self-describing (its manifest
// lists the files and the format and release it came from), so a rollback
// needs only the snapshots, not the steps that made them.
package dataformat
