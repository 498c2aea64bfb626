package gate_test

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/mother-chat/mother/pkg/gate"
	"github.com/mother-chat/mother/pkg/gate/gatetest"
	"github.com/mother-chat/mother/pkg/wire"
)

// BenchmarkConnMemory measures what one open nest.sock connection costs
// the gate (heap and goroutine stacks, B/conn), which with
// chicks.gate.maxConns and maxPending bounds its memory: 400 chicks each
// hold one connection, piped to a plain TCP listener that echoes, and a
// few bytes have gone both ways on each. (The echo's own cost, in this
// process too, is measured first and taken off.)
func BenchmarkConnMemory(b *testing.B) {
	const conns = 400
	m := gatetest.Start(b, nil) // only for its CA
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go io.Copy(c, c)
		}
	}()
	// What the echo side costs in this process, to take off.
	echoBefore, echoG := memNow(), runtime.NumGoroutine()
	var direct []net.Conn
	for range conns {
		c, err := net.Dial("tcp", lis.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		io.WriteString(c, "ping")
		var buf [4]byte
		if _, err := io.ReadFull(c, buf[:]); err != nil {
			b.Fatal(err)
		}
		direct = append(direct, c)
	}
	echoCost, echoGs := int64(memNow()-echoBefore), runtime.NumGoroutine()-echoG
	for _, c := range direct {
		c.Close()
	}
	for range b.N {
		dir := socketDir(b)
		e := &env{dir: dir}
		stop := e.run(b, gate.Options{Dir: dir, Upstream: lis.Addr().String(), CAPEM: m.CAPEM, HostName: gatetest.Host, Token: gatetest.Token, MaxConns: conns})
		before := memNow()
		g0 := runtime.NumGoroutine()
		var open []net.Conn
		for i := range conns {
			id := fmt.Sprintf("c-%d", i)
			c, err := net.Dial("unix", filepath.Join(dir, wire.GateNestSocket))
			if err != nil {
				b.Fatal(err)
			}
			io.WriteString(c, wire.GatePrefaceLine(id, keyOf(id))+"ping")
			var buf [4]byte
			if _, err := io.ReadFull(c, buf[:]); err != nil {
				b.Fatal(err)
			}
			open = append(open, c)
		}
		after := memNow()
		b.ReportMetric(float64(int64(after-before)-echoCost)/conns, "B/conn")
		b.ReportMetric(float64(runtime.NumGoroutine()-g0-echoGs)/conns, "goroutines/conn")
		for _, c := range open {
			c.Close()
		}
		stop()
	}
}

func memNow() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}
