// Command attack is the hostile suite's attack program
// (cmd/mother/hostile_e2e_test.go): what a prompt-injected chick's model
// could write and run with its bash tool. The test builds it statically,
// puts it in a channel's files (so it arrives in the chick's /workspace
// like any file a model wrote there) and has the chick run it. It speaks
// the project's own wire (pkg/wire, proto/mother/v1, gRPC over the gate's
// nest socket), tries one door per subcommand, and prints what it got as
// lines of "KEY value ..." for the test to read; it asserts nothing
// itself.
//
//	attack memscan  -find a,b            search every visible process for a and b
//	attack race     -n 30 -max 24        concurrent Generate calls with a token
//	attack generate -max N               one Generate call
//	attack flood    -size N -count N     a Session streaming big or many ToolEnd events
//	attack storm    -n 2000              connections to the gate's nest.sock
//	attack access   -dest d ...          concurrent RequestAccess calls
//	attack refusals -to d -conc 4 -for 20s  refused requests through the proxy
//	attack accessflood -n 100 -to domain    RequestAccess calls all at once
//	attack calls    -images N ...        model calls carrying images (calls.go)
//
// The credentials (-id, -token, -key, -ca in base64) are what the test read
// from the chick's container: the program assumes they leaked.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mother-chat/mother/internal/credprobe"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: attack memscan|race|generate|flood|storm|access|calls|hold [flags]")
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	c := &creds{}
	fs.StringVar(&c.sock, "sock", filepath.Join(wire.GateDir, wire.GateNestSocket), "the gate's nest socket")
	fs.StringVar(&c.id, "id", os.Getenv("MOTHER_CHICK_ID"), "the chick id")
	fs.StringVar(&c.token, "token", "", "the chick's nest token")
	fs.StringVar(&c.key, "key", "", "the chick's gate key")
	fs.StringVar(&c.ca, "ca", "", "Mother's CA certificate, PEM in base64")
	find := fs.String("find", "", "memscan: the secrets to look for, in base64, comma-separated (so the command line does not hold them)")
	n := fs.Int("n", 30, "race: calls; storm: connections")
	maxOut := fs.Int("max", 0, "race, generate: max_output_tokens")
	system := fs.String("system", "HOSTILE", "race, generate: the system prompt (the fake model keys on it)")
	promptBytes := fs.Int("prompt-bytes", 4000, "race, generate: bytes of the user message")
	size := fs.Int("size", 16<<20, "flood: bytes of each event's result")
	count := fs.Int("count", 40, "flood: events to send")
	window := fs.Duration("for", 20*time.Second, "flood, storm: how long to keep at it")
	var dests multi
	fs.Var(&dests, "dest", "access: a destination to ask for (repeatable)")
	ef := egressFlagsOn(fs)
	var cf callsFlags
	cf.register(fs)
	fs.Parse(args)
	switch cmd {
	case "memscan":
		var secrets []string
		for _, f := range strings.Split(*find, ",") {
			b, err := base64.StdEncoding.DecodeString(f)
			if err != nil {
				fmt.Fprintln(os.Stderr, "attack: -find takes base64:", err)
				os.Exit(2)
			}
			secrets = append(secrets, string(b))
		}
		memscan(secrets)
	case "hold":
		hold()
	case "race":
		c.mustDial()
		race(c, *n, *maxOut, *system, *promptBytes)
	case "generate":
		c.mustDial()
		one(c, "GENERATE", *maxOut, *system, *promptBytes)
	case "flood":
		c.mustDial()
		flood(c, *size, *count, *window)
	case "storm":
		storm(c, *n, *window)
	case "access":
		c.mustDial()
		access(c, dests)
	case "refusals", "accessflood":
		egressRun(cmd, c, ef, *n, *window)
	case "calls":
		c.mustDial()
		cf.system, cf.maxOut = *system, *maxOut
		calls(c, *system, cf)
	default:
		fmt.Fprintf(os.Stderr, "attack: unknown command %q\n", cmd)
		os.Exit(2)
	}
}

// clk is the project's one clock (pkg/clock), real here.
var clk clock.Clock = clock.Real{}

func sleep(d time.Duration) { clock.Sleep(context.Background(), clk, d) }

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

// ---- memory -------------------------------------------------------------

// memscan searches every process it can see for the secrets with
// internal/credprobe (environ, cmdline, memory through maps and mem, file
// descriptors, threads, root, ptrace). It prints "FOUND <secret#> pid=<pid>
// src=<where>" for each hit, "DENIED pid=<pid> src=<where> (<error>)" for
// what it could not read, "PTRACE attached pid=<pid>" where an attach
// worked, and a control: a child it starts itself (dumpable, its own)
// holds a marker only in its memory; the same search must find it there.
func memscan(secrets []string) {
	marker := fmt.Sprintf("HOSTILE-MARKER-%d-%d", os.Getpid(), clk.Now().UnixNano())
	child := exec.Command("/proc/self/exe", "hold")
	in, _ := child.StdinPipe()
	out, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		fmt.Println("CONTROL error", err)
	} else {
		io.WriteString(in, marker+"\n")
		in.Close()
		bufio.NewReader(out).ReadString('\n') // "ready"
		defer child.Process.Kill()
	}
	needles := map[string][]byte{"marker": []byte(marker)}
	for i, s := range secrets {
		if s != "" {
			needles["secret"+strconv.Itoa(i)] = []byte(s)
		}
	}
	rep := credprobe.Search(needles)
	control := false
	for _, p := range rep.Procs {
		fmt.Printf("PROC pid=%d comm=%s\n", p.PID, p.Comm)
		for _, src := range slices.Sorted(maps.Keys(p.Access)) {
			if st := p.Access[src]; st != "ok" {
				fmt.Printf("DENIED pid=%d src=%s (%s)\n", p.PID, src, st)
			} else if src == "ptrace" {
				fmt.Printf("PTRACE attached pid=%d\n", p.PID)
			}
		}
		for _, f := range p.Found {
			name, where, _ := strings.Cut(f, " in ")
			fmt.Printf("FOUND %s pid=%d src=%s\n", name, p.PID, strings.ReplaceAll(where, " ", "_"))
			control = control || name == "marker"
		}
	}
	fmt.Printf("SCANNED processes=%d\n", len(rep.Procs))
	if control {
		fmt.Println("CONTROL found")
	} else {
		fmt.Println("CONTROL missing")
	}
}

// hold keeps the line it reads on stdin in its heap and waits.
func hold() {
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	kept := []byte(strings.TrimSpace(line))
	fmt.Println("ready")
	sleep(5 * time.Minute)
	fmt.Println(len(kept))
}

// ---- the nest, with leaked credentials ----------------------------------

type creds struct {
	sock, id, token, key, ca string
	preface                  bool
	conn                     *grpc.ClientConn
	client                   pb.ChickServiceClient
}

func (c *creds) ctx(ctx context.Context) context.Context {
	return wire.Credentials(ctx, c.id, c.token)
}

// dial connects to the nest through the gate's socket, with or without
// the gate's preface line ("MOTHER-GATE/1 <chick id> <gate key>"): a gate
// that wants one closes a connection without it.
func (c *creds) dial(preface bool) (*grpc.ClientConn, error) {
	pem, err := base64.StdEncoding.DecodeString(c.ca)
	if err != nil {
		return nil, fmt.Errorf("-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("-ca: no certificate")
	}
	tc := credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: wire.NestServerName, MinVersion: tls.VersionTLS13})
	sock := c.sock
	return grpc.NewClient("passthrough:///nest",
		grpc.WithTransportCredentials(tc),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, "unix", sock)
			if err != nil {
				return nil, err
			}
			if preface {
				if _, err := fmt.Fprintf(conn, "%s %s %s\n", wire.GatePreface, c.id, c.key); err != nil {
					conn.Close()
					return nil, err
				}
			}
			return conn, nil
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)),
	)
}

// mustDial finds how the gate wants to be spoken to (Join answers: the
// same every time) and keeps that connection.
func (c *creds) mustDial() {
	var last error
	for _, preface := range []bool{false, true} {
		conn, err := c.dial(preface)
		if err != nil {
			last = err
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = pb.NewChickServiceClient(conn).Join(c.ctx(ctx), &pb.JoinRequest{Version: "attack"})
		cancel()
		if err == nil {
			c.preface, c.conn, c.client = preface, conn, pb.NewChickServiceClient(conn)
			fmt.Printf("JOINED preface=%v\n", preface)
			return
		}
		conn.Close()
		last = err
	}
	fmt.Printf("JOIN failed %s\n", oneLine(last))
	os.Exit(1)
}

func oneLine(err error) string {
	if err == nil {
		return "ok"
	}
	if s, ok := status.FromError(err); ok {
		return strings.ReplaceAll(s.Code().String()+": "+s.Message(), "\n", " ")
	}
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

// generate makes one call and returns its usage or error.
func (c *creds) generate(maxOut int, system string, promptBytes int) (*pb.Usage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := c.client.Generate(c.ctx(ctx), &pb.GenerateRequest{
		System:          system,
		Messages:        []*pb.ModelMessage{{Role: pb.Role_ROLE_USER, Content: "say ok " + strings.Repeat("words ", promptBytes/6)}},
		MaxOutputTokens: int32(maxOut),
	})
	if err != nil {
		return nil, err
	}
	for {
		m, err := st.Recv()
		if err != nil {
			return nil, err
		}
		if d := m.GetDone(); d != nil {
			return d.GetUsage(), nil
		}
	}
}

func one(c *creds, what string, maxOut int, system string, promptBytes int) {
	u, err := c.generate(maxOut, system, promptBytes)
	if err != nil {
		fmt.Printf("%s refused %s\n", what, oneLine(err))
		return
	}
	fmt.Printf("%s answered in=%d out=%d\n", what, u.GetInputTokens(), u.GetOutputTokens())
}

// race: one call on its own (the control), then n at once, each tried
// again while it is refused for anything but the budget.
func race(c *creds, n, maxOut int, system string, promptBytes int) {
	one(c, "CONTROL", maxOut, system, promptBytes)
	var mu sync.Mutex
	answered, tokens := 0, int64(0)
	errs := map[string]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// A call refused for anything but the budget (too many in
			// flight) is tried again, as a chick would, for a while.
			var u *pb.Usage
			var err error
			for try := 0; ; try++ {
				u, err = c.generate(maxOut, system, promptBytes)
				if err == nil || strings.Contains(err.Error(), "budget") || try >= 400 {
					break
				}
				sleep(50 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[oneLine(err)]++
				return
			}
			answered++
			tokens += u.GetInputTokens() + u.GetOutputTokens()
		}()
	}
	close(start)
	wg.Wait()
	fmt.Printf("RACE calls=%d answered=%d tokens=%d refused=%d\n", n, answered, tokens, n-answered)
	var keys []string
	for k := range errs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("RACEERR %d %s\n", errs[k], k)
	}
}

// flood opens a Session with the chick's credentials and streams ToolEnd
// events after what Mother has stored, count of them with results of
// size bytes, for at most window; when the session ends (replaced by the
// chick's own, or closed by Mother) it opens another and goes on from
// Mother's ack. It prints what it sent and any cancellation Mother sent.
func flood(c *creds, size, count int, window time.Duration) {
	result := strings.Repeat("F", size)
	deadline := clk.Now().Add(window)
	sent, bytesSent := 0, int64(0)
	var lastErr error
	for sent < count && clk.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		st, err := c.client.Session(c.ctx(ctx))
		if err != nil {
			lastErr = err
			cancel()
			sleep(200 * time.Millisecond)
			continue
		}
		if err := st.Send(&pb.SessionRequest{Kind: &pb.SessionRequest_Hello{Hello: &pb.SessionHello{}}}); err != nil {
			lastErr = err
			cancel()
			continue
		}
		first, err := st.Recv()
		if err != nil {
			lastErr = err
			cancel()
			if strings.Contains(oneLine(err), "Unauthenticated") || strings.Contains(oneLine(err), "ended") {
				break
			}
			sleep(200 * time.Millisecond)
			continue
		}
		seq := first.GetAck().GetSeq()
		cancelled := make(chan string, 1)
		go func() {
			for {
				m, err := st.Recv()
				if err != nil {
					return
				}
				if cm := m.GetCancel(); cm != nil {
					select {
					case cancelled <- cm.GetMessage():
					default:
					}
				}
			}
		}()
		for sent < count && clk.Now().Before(deadline) {
			seq++
			ev := &pb.AgentEvent{Seq: seq, Time: timestamppb.Now(), Kind: &pb.AgentEvent_ToolEnd{ToolEnd: &pb.ToolEnd{
				Call:   &pb.ToolCall{Id: "flood-" + strconv.FormatUint(seq, 10), Name: "bash", Label: "flood"},
				Result: result,
			}}}
			if err = st.Send(&pb.SessionRequest{Kind: &pb.SessionRequest_Event{Event: ev}}); err != nil {
				lastErr = err
				break
			}
			sent++
			bytesSent += int64(size)
			// Heartbeats, as a chick sends them: the flood is not taken
			// for a hung chick.
			if sent%64 == 1 || size > 1<<20 {
				if err = st.Send(&pb.SessionRequest{Kind: &pb.SessionRequest_Heartbeat{Heartbeat: &pb.Heartbeat{SentAt: timestamppb.Now()}}}); err != nil {
					lastErr = err
					break
				}
			}
			select {
			case m := <-cancelled:
				fmt.Printf("CANCELLED %s\n", strings.ReplaceAll(m, "\n", " "))
			default:
			}
		}
		if err == nil {
			st.CloseSend()
			_, lastErr = st.Recv()
		}
		cancel()
		select {
		case m := <-cancelled:
			fmt.Printf("CANCELLED %s\n", strings.ReplaceAll(m, "\n", " "))
		default:
		}
		if s := oneLine(lastErr); strings.Contains(s, "Unauthenticated") || strings.Contains(s, "the chick has ended") {
			break
		}
	}
	fmt.Printf("FLOOD sent=%d bytes=%d last=%s\n", sent, bytesSent, oneLine(lastErr))
}

// ---- the gate -----------------------------------------------------------

// storm opens n connections to the gate's nest socket (no credentials
// needed to connect) and holds them for window. The first few do a TLS
// handshake with Mother through the gate, with the gate's preface if it
// wants one: the control that a connection of this chick's was served.
// It prints how many connected, how many the gate closed, and the
// controls' outcome.
func storm(c *creds, n int, window time.Duration) {
	pem, _ := base64.StdEncoding.DecodeString(c.ca)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	handshake := func(preface bool) error {
		conn, err := net.DialTimeout("unix", c.sock, 5*time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		conn.SetDeadline(clk.Now().Add(10 * time.Second))
		if preface {
			fmt.Fprintf(conn, "%s %s %s\n", wire.GatePreface, c.id, c.key)
		}
		tc := tls.Client(conn, &tls.Config{RootCAs: pool, ServerName: wire.NestServerName, MinVersion: tls.VersionTLS13, NextProtos: []string{"h2"}})
		return tc.Handshake()
	}
	preface := false
	err := handshake(false)
	if err != nil {
		if err2 := handshake(true); err2 == nil {
			preface, err = true, nil
		}
	}
	fmt.Printf("CONTROL handshake=%s preface=%v\n", oneLine(err), preface)
	deadline := clk.Now().Add(window)
	var conns []net.Conn
	dialed, failed := 0, 0
	var firstErr error
	for i := 0; i < n && clk.Now().Before(deadline); i++ {
		conn, err := net.DialTimeout("unix", c.sock, 2*time.Second)
		if err != nil {
			failed++
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		dialed++
		if preface {
			conn.SetWriteDeadline(clk.Now().Add(time.Second))
			fmt.Fprintf(conn, "%s %s %s\n", wire.GatePreface, c.id, c.key)
		}
		conns = append(conns, conn)
	}
	fmt.Printf("STORM opened=%d failed=%d first-error=%s\n", dialed, failed, oneLine(firstErr))
	// Which of them did the gate close (EOF or reset within a moment)?
	sleep(2 * time.Second)
	closed := 0
	for _, conn := range conns {
		conn.SetReadDeadline(clk.Now().Add(5 * time.Millisecond))
		_, err := conn.Read(make([]byte, 1))
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			closed++
		}
	}
	fmt.Printf("STORM closed-by-gate=%d of %d\n", closed, len(conns))
	if left := deadline.Sub(clk.Now()); left > 0 {
		sleep(left)
	}
	for _, conn := range conns {
		conn.Close()
	}
	// After the storm this chick's connections are served again.
	fmt.Printf("AFTER handshake=%s\n", oneLine(handshake(preface)))
}

// ---- approvals ----------------------------------------------------------

// access asks for every destination at once and prints each answer.
func access(c *creds, dests []string) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, d := range dests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			r, err := c.client.RequestAccess(c.ctx(ctx), &pb.RequestAccessRequest{Destination: d, Reason: "hostile test"})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fmt.Printf("ACCESS %s error %s\n", d, oneLine(err))
				return
			}
			fmt.Printf("ACCESS %s granted=%v message=%s\n", d, r.GetGranted(), strings.ReplaceAll(r.GetMessage(), "\n", " "))
		}()
		sleep(300 * time.Millisecond) // in order, so the first post is the first destination's
	}
	wg.Wait()
}
