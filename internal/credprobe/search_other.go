//go:build !linux

package credprobe

import "os"

// Search is Linux's; elsewhere it finds nothing.
func Search(needles map[string][]byte, skip ...int) Report {
	return Report{Self: os.Getpid()}
}
