// Package soak is Mother's fault-injection harness: long scenarios that
// kill, hang, flood and disconnect the real binaries and the real Docker
// engine, and check that nothing is lost. They are tests behind the soak
// build tag, excluded from `make test`; run them with `make soak` (or
// `go test -tags soak -v -run 'TestSoak/<name>' ./soak/`). Each scenario
// prints its figures; the whole report is printed at the end.
package soak
