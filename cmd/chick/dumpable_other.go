//go:build !linux

package main

// nonDumpable is Linux's (the chick runs in a Linux container); elsewhere
// it does nothing, for the command's tests and builds on other systems.
func nonDumpable() error { return nil }

func dumpable() (bool, error) { return true, nil }
