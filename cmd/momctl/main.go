// Command momctl is the operator's tool for a running Mother: it talks to
// her admin socket (default <data>/mother.sock; --socket or MOTHER_SOCKET).
package main

import (
	"flag"
	"fmt"
	"os"
)

// version is stamped at build time.
var version = "dev"

func main() {
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Printf("momctl %s\n", version)
		return
	}
	fmt.Fprintln(os.Stderr, "momctl: no commands yet (chicks ls/kill/logs and status come with the chicks issue)")
	os.Exit(2)
}
