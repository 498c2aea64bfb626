// Command chick is the worker that runs inside a chick container: it dials
// Mother at MOTHER_ADDR with the single-use MOTHER_TOKEN, receives its goal,
// runs the agent loop with the full tool set in /workspace, and exits.
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
		fmt.Printf("chick %s\n", version)
		return
	}
	addr, token := os.Getenv("MOTHER_ADDR"), os.Getenv("MOTHER_TOKEN")
	if addr == "" || token == "" {
		fmt.Fprintln(os.Stderr, "chick: MOTHER_ADDR and MOTHER_TOKEN must be set; chicks are started by Mother")
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "chick: the nest client is not built yet (see the chicks issue)")
	os.Exit(1)
}
