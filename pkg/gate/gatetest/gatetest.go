// Package gatetest stands in for Mother's side of the gate in tests: a
// real gRPC server over TLS on loopback, with a CA of its own (made by
// pkg/nest's LoadTLS in a temporary directory), that serves GateService
// by a decision function the test sets, records every call, checks the
// gate's credentials, and serves a ChickService the test provides.
package gatetest

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/nest"
	"github.com/mother-chat/mother/pkg/version"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// Host and Token are the gate credentials the server accepts.
const (
	Host  = "gpu-1"
	Token = "gate-token-of-gpu-1"
)

// Decide answers an Authorize call.
type Decide func(*pb.AuthorizeRequest) *pb.AuthorizeResponse

// Mother is the stand-in.
type Mother struct {
	// Addr is the listener's address (host:port), CAPEM its CA.
	Addr  string
	CAPEM []byte

	srv      *grpc.Server
	reports  chan *pb.ReportRequest
	accepted atomic.Int64

	mu         sync.Mutex
	decide     Decide
	authorizes []*pb.AuthorizeRequest
	said       []string
}

// Start serves GateService, and chick if not nil, until the test ends.
func Start(t testing.TB, chick pb.ChickServiceServer) *Mother {
	t.Helper()
	tl, err := nest.LoadTLS(filepath.Join(t.TempDir(), "tls"), nil)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &Mother{
		Addr: lis.Addr().String(), CAPEM: tl.CAPEM,
		srv:     grpc.NewServer(grpc.Creds(tl.Creds)),
		reports: make(chan *pb.ReportRequest, 1000),
		decide: func(*pb.AuthorizeRequest) *pb.AuthorizeResponse {
			return &pb.AuthorizeResponse{Reason: "not allowed for this chick"}
		},
	}
	pb.RegisterGateServiceServer(m.srv, &gateService{m: m})
	if chick != nil {
		pb.RegisterChickServiceServer(m.srv, chick)
	}
	go m.srv.Serve(countingListener{lis, &m.accepted})
	t.Cleanup(m.srv.Stop)
	return m
}

// Accepted is how many connections the server has accepted: the gate's
// own GateService connection and what it piped from nest.sock.
func (m *Mother) Accepted() int64 { return m.accepted.Load() }

type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// SetDecide sets how Authorize answers (by default: not allowed).
func (m *Mother) SetDecide(d Decide) {
	m.mu.Lock()
	m.decide = d
	m.mu.Unlock()
}

// Authorizes are the Authorize calls so far.
func (m *Mother) Authorizes() []*pb.AuthorizeRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*pb.AuthorizeRequest(nil), m.authorizes...)
}

// Said is what each GateService call said of the gate's release and
// protocol in its metadata ("0.2.0/2"; "/" when nothing).
func (m *Mother) Said() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.said...)
}

// NextReport waits for the next Report call.
func (m *Mother) NextReport(t testing.TB) *pb.ReportRequest {
	t.Helper()
	select {
	case r := <-m.reports:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no Report from the gate")
		return nil
	}
}

type gateService struct {
	pb.UnimplementedGateServiceServer
	m *Mother
}

func (s *gateService) checkGate(ctx context.Context) error {
	host, token := wire.FromIncoming(ctx)
	if host != Host || token != Token {
		return status.Error(codes.Unauthenticated, "not this gate's token")
	}
	md, _ := metadata.FromIncomingContext(ctx)
	said := strings.Join(md.Get(version.MetaRelease), ",") + "/" + strings.Join(md.Get(version.MetaProtocol), ",")
	s.m.mu.Lock()
	s.m.said = append(s.m.said, said)
	s.m.mu.Unlock()
	return nil
}

func (s *gateService) Authorize(ctx context.Context, req *pb.AuthorizeRequest) (*pb.AuthorizeResponse, error) {
	if err := s.checkGate(ctx); err != nil {
		return nil, err
	}
	s.m.mu.Lock()
	s.m.authorizes = append(s.m.authorizes, req)
	d := s.m.decide
	s.m.mu.Unlock()
	return d(req), nil
}

func (s *gateService) Report(ctx context.Context, req *pb.ReportRequest) (*pb.ReportResponse, error) {
	if err := s.checkGate(ctx); err != nil {
		return nil, err
	}
	s.m.reports <- req
	return &pb.ReportResponse{}, nil
}
