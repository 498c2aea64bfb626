//go:build race

package uploadtest

// race: the race detector slows the fakes' parsing of the uploads many
// times over (a 25 MiB form took longer than Telegram's client timeout on
// a loaded machine), so a race run uploads three files, still more than
// the adapters run at once.
const race = true
