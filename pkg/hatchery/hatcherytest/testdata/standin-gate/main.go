// Command standin-gate stands in for `chick gate` in tests of the gate's
// lifecycle (pkg/hatchery): "serve" listens on $MOTHER_GATE_DIR/nest.sock
// and answers each connection with the line "gate <MOTHER_GATE_HOST>";
// "dial PATH" connects to a socket and prints what it reads.
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: standin-gate serve | dial PATH")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		path := filepath.Join(os.Getenv("MOTHER_GATE_DIR"), "nest.sock")
		os.Remove(path) // left by an earlier run in a volume chicks keep mounted
		l, err := net.Listen("unix", path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for {
			c, err := l.Accept()
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			fmt.Fprintf(c, "gate %s\n", os.Getenv("MOTHER_GATE_HOST"))
			c.Close()
		}
	case "dial":
		c, err := net.Dial("unix", os.Args[2])
		if err != nil {
			fmt.Println("dial:", err)
			os.Exit(1)
		}
		io.Copy(os.Stdout, c)
	default:
		os.Exit(2)
	}
}
