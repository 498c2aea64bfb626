// Command racy has a data race on purpose: TestNoRaceOnARealReport builds
// it with -race and checks that noRace recognises what the race detector
// prints.
package main

import "fmt"

func main() {
	x := 0
	done := make(chan bool)
	go func() { x = 1; done <- true }()
	x = 2
	<-done
	fmt.Println("x =", x)
}
