// Command credprobe is package credprobe's search as a program, the kind
// a chick's model could write and run from its bash:
//
//	credprobe -needle token=<hex> -needle key=<hex> -plant <hex>
//
// searches every process it can see for each needle (given in hex, so
// that no process's command line holds one as it is) and prints one line,
// "CREDPROBE-REPORT <json of credprobe.Report>". With -plant it first
// starts a copy of itself holding that marker (hex) in its environment,
// its memory and an open, unlinked file, and searches for it too as the
// needle "plant": the positive control. The copy's pid is in the report
// as "plantPID".
package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/mother-chat/mother/internal/credprobe"
)

const plantVar = "CREDPROBE_PLANT"

type needles map[string][]byte

func (n needles) String() string { return "" }

func (n needles) Set(v string) error {
	name, h, ok := strings.Cut(v, "=")
	b, err := hex.DecodeString(h)
	if !ok || name == "" || err != nil || len(b) == 0 {
		return fmt.Errorf("want name=<hex>, got %q", v)
	}
	n[name] = b
	return nil
}

// held keeps the holder's copy of the marker reachable.
var held []byte

func main() {
	if len(os.Args) == 2 && os.Args[1] == "hold" {
		hold()
		return
	}
	ns := needles{}
	flag.Var(ns, "needle", "name=<hex>: a needle to search for (repeatable)")
	plant := flag.String("plant", "", "<hex>: a marker to plant in a dumpable copy of this program and find there")
	flag.Parse()
	plantPID := 0
	if *plant != "" {
		m, err := hex.DecodeString(*plant)
		if err != nil || len(m) == 0 {
			fmt.Fprintf(os.Stderr, "credprobe: -plant: want hex, got %q\n", *plant)
			os.Exit(2)
		}
		ns["plant"] = m
		cmd := exec.Command("/proc/self/exe", "hold")
		cmd.Env = append(os.Environ(), plantVar+"="+string(m))
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			fmt.Fprintf(os.Stderr, "credprobe: start the holder: %v\n", err)
			os.Exit(1)
		}
		if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
			fmt.Fprintf(os.Stderr, "credprobe: the holder said %q: %v\n", line, err)
			os.Exit(1)
		}
		plantPID = cmd.Process.Pid
		defer func() { in.Close(); cmd.Wait() }()
	}
	rep := credprobe.Search(ns)
	b, _ := json.Marshal(struct {
		credprobe.Report
		PlantPID int `json:"plantPID"`
	}{rep, plantPID})
	fmt.Printf("CREDPROBE-REPORT %s\n", b)
}

// hold keeps the marker in its environment (from exec), in its memory
// and in an open, unlinked file until its stdin closes.
func hold() {
	m := os.Getenv(plantVar)
	held = append([]byte("held:"), m...)
	f, err := os.CreateTemp("", "credprobe-plant-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "credprobe hold: %v\n", err)
		os.Exit(1)
	}
	f.WriteString(m)
	os.Remove(f.Name())
	fmt.Println("ready")
	var b [1]byte
	os.Stdin.Read(b[:])
	f.Close()
	fmt.Fprint(os.Stderr, string(held[:0]))
}
