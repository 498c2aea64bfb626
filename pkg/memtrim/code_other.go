//go:build !linux

package memtrim

// releaseCode is Linux-only (see code_linux.go).
func releaseCode() error { return nil }
