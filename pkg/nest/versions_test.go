package nest_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/mother-chat/mother/pkg/nest"
	"github.com/mother-chat/mother/pkg/version"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

type versionsLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *versionsLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *versionsLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestVersionsGateLogged: Mother logs the release and protocol a gate's
// calls say (once, and again when they change), a gate that says none
// as 0.1.x protocol 1, and warns of a gate outside her range.
func TestVersionsGateLogged(t *testing.T) {
	t.Parallel()
	logs := &versionsLog{}
	g := newGateFixture(t, func(o *nest.Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	id, _ := g.spawn(t)
	req := &pb.AuthorizeRequest{ChickId: id, Key: g.key(id), Host: "pypi.org", Port: 443}
	call := func(kv ...string) {
		t.Helper()
		ctx := metadata.AppendToOutgoingContext(g.as(t.Context()), kv...)
		if _, err := g.gate.Authorize(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	call(version.MetaRelease, version.Release, version.MetaProtocol, "2")
	call(version.MetaRelease, version.Release, version.MetaProtocol, "2")
	call()
	call(version.MetaRelease, "0.9.2", version.MetaProtocol, "7")
	got := logs.String()
	for _, want := range []string{
		`msg="gate calls" component=nest host=local release=` + version.Release + ` protocol=2`,
		`msg="gate calls" component=nest host=local release=0.1.x protocol=1`,
		`level=WARN msg="gate of a release this Mother does not work with" component=nest host=local release=0.9.2 protocol=7 why="the gate on host local is 0.9.2; this Mother (` + version.Release + `) needs 0.1.x or 0.2.x`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %s:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "release="+version.Release+" protocol=2"); n != 1 {
		t.Errorf("the same release logged %d times, want once:\n%s", n, got)
	}
}
