package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// ---- what a chick sends back: egress and access requests ---------------

// egressFlags are the flags of refusals and accessflood.
type egressFlags struct {
	to   *string
	conc *int
}

func egressFlagsOn(fs *flag.FlagSet) egressFlags {
	return egressFlags{
		to:   fs.String("to", "refused.test:443", "refusals: the destination to ask the proxy for; accessflood: the domain"),
		conc: fs.Int("conc", 4, "refusals: connections at once"),
	}
}

// egressRun runs refusals or accessflood (-n calls, -for window).
func egressRun(cmd string, c *creds, f egressFlags, n int, window time.Duration) {
	switch cmd {
	case "refusals":
		refusals(*f.to, *f.conc, window)
	case "accessflood":
		c.mustDial()
		accessFlood(c, n, *f.to)
	}
}

// proxyAddr is the chick's proxy (HTTP_PROXY, as the chick's tools find
// it), host:port.
func proxyAddr() string {
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
		if u, err := url.Parse(os.Getenv(k)); err == nil && u.Host != "" {
			return u.Host
		}
	}
	return "127.0.0.1:3128"
}

// refusals asks the chick's proxy for dest (CONNECT) over and over from
// conc connections at once, for window: each request a new connection,
// as a retrying tool would. It prints how many were asked and how the
// proxy answered ("EGRESS requests=N refused=M other=K").
func refusals(dest string, conc int, window time.Duration) {
	addr := proxyAddr()
	deadline := clk.Now().Add(window)
	var requests, refused, other atomic.Int64
	var firstOther atomic.Value
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for clk.Now().Before(deadline) {
				requests.Add(1)
				status, err := connectOnce(addr, dest)
				switch {
				case err == nil && status == 403:
					refused.Add(1)
				default:
					other.Add(1)
					if err != nil {
						firstOther.CompareAndSwap(nil, err.Error())
					} else {
						firstOther.CompareAndSwap(nil, "status "+strconv.Itoa(status))
					}
				}
			}
		}()
	}
	wg.Wait()
	first, _ := firstOther.Load().(string)
	fmt.Printf("EGRESS requests=%d refused=%d other=%d first-other=%q\n", requests.Load(), refused.Load(), other.Load(), first)
}

// connectOnce sends one CONNECT to the proxy at addr and returns the
// status of its answer.
func connectOnce(addr, dest string) (int, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(clk.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", dest, dest); err != nil {
		return 0, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return 0, err
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		return 0, fmt.Errorf("no status in %q", line)
	}
	return strconv.Atoi(f[1])
}

// accessFlood sends n RequestAccess calls at once, each for its own
// destination (a0.<domain>:443 ...), and prints how many were answered
// within a moment (told at once) and how many waited ("ACCESSFLOOD
// calls=N quick=Q waited=W granted=G"), with the first quick answer.
func accessFlood(c *creds, n int, domain string) {
	var quick, waited, granted atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			start := clk.Now()
			d := fmt.Sprintf("a%d.%s:443", i, domain)
			r, err := c.client.RequestAccess(c.ctx(ctx), &pb.RequestAccessRequest{Destination: d, Reason: "hostile flood"})
			msg := ""
			if err != nil {
				msg = "error " + oneLine(err)
			} else {
				msg = r.GetMessage()
				if r.GetGranted() {
					granted.Add(1)
				}
			}
			if clk.Now().Sub(start) < 3*time.Second {
				quick.Add(1)
				first.CompareAndSwap(nil, strings.ReplaceAll(msg, "\n", " "))
			} else {
				waited.Add(1)
			}
		}()
	}
	wg.Wait()
	f, _ := first.Load().(string)
	fmt.Printf("ACCESSFLOOD calls=%d quick=%d waited=%d granted=%d first-quick=%q\n", n, quick.Load(), waited.Load(), granted.Load(), f)
}
