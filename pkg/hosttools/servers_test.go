package hosttools

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary doubles as a stdio MCP server (a real process speaking
// the protocol over its stdin and stdout) when HOSTTOOLS_TEST_SERVER is set;
// the example server under examples/mcp-notes is built once, on first use.
var (
	selfBin   string
	buildDir  string
	notesOnce sync.Once
	notesPath string
	notesErr  error
)

func TestMain(m *testing.M) {
	switch os.Getenv("HOSTTOOLS_TEST_SERVER") {
	case "":
	case "fail":
		fmt.Fprintln(os.Stderr, "cannot open the mailbox: permission denied")
		os.Exit(3)
	default:
		runTestServer()
		os.Exit(0)
	}
	var err error
	if selfBin, err = os.Executable(); err != nil {
		panic(err)
	}
	if buildDir, err = os.MkdirTemp("", "hosttools-test-"); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(buildDir)
	os.Exit(code)
}

// notesBin builds examples/mcp-notes (once) and returns its path.
func notesBin(t testing.TB) string {
	t.Helper()
	notesOnce.Do(func() {
		notesPath = filepath.Join(buildDir, "mcp-notes")
		out, err := exec.Command("go", "build", "-o", notesPath, "../../examples/mcp-notes").CombinedOutput()
		if err != nil {
			notesErr = fmt.Errorf("build examples/mcp-notes: %v\n%s", err, out)
		}
	})
	if notesErr != nil {
		t.Fatal(notesErr)
	}
	return notesPath
}

type echoArgs struct {
	Text string `json:"text" jsonschema:"what to say back"`
}

// testTools are the tools of the test servers (stdio and HTTP):
//   - echo(text) says it back;
//   - pid says which process serves it (to tell a restart from a kept server);
//   - crash writes a line to stderr and exits in the middle of the call;
//   - hang never answers: in a process (release == nil) it ignores
//     cancellation like a stuck server; in process (HTTP) it ends when the
//     call is cancelled or release is closed at the end of the test (the
//     client's cancellation notice may never reach the server, and
//     httptest.Server.Close waits for every handler);
//   - count(n: 1..10) has a schema with bounds.
func testTools(s *mcp.Server, release <-chan struct{}) {
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Say the text back."},
		func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
			return textResult("echo: " + a.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "The server's process id."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return textResult(fmt.Sprint(os.Getpid())), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exit mid-call."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "panic: the mail server went away")
			os.Exit(2)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "hang", Description: "Never answer."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if release == nil {
				select {}
			}
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-release:
				return nil, nil, errors.New("test over")
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "picture", Description: "A picture and a caption."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "a red dot"},
				&mcp.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG fake")},
				&mcp.ResourceLink{Name: "dot", URI: "file:///dot.png"},
			}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "The server's environment and working directory."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			wd, _ := os.Getwd()
			return textResult("cwd=" + wd + "\n" + strings.Join(os.Environ(), "\n")), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "A long answer."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return textResult(strings.Repeat("é", 40*1024)), nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "count", Description: "Count to n.", InputSchema: map[string]any{
		"type": "object", "required": []string{"n"}, "additionalProperties": false,
		"properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": 1, "maximum": 10, "description": "how far"}},
	}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return textResult("counted: " + string(req.Params.Arguments)), nil
	})
}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func runTestServer() {
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	testTools(s, nil)
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "test server:", err)
	}
}

// httpServer is a streamable HTTP MCP server on a loopback socket that
// records every tools/call it receives.
type httpServer struct {
	*httptest.Server
	mu    sync.Mutex
	calls []string
	// auth is the Authorization header of the last request.
	auth atomic.Value
}

func newHTTPServer(t *testing.T) *httpServer {
	t.Helper()
	hs := &httpServer{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "http-test", Version: "1"}, nil)
	release := make(chan struct{})
	testTools(srv, release)
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && method == "tools/call" {
				hs.mu.Lock()
				hs.calls = append(hs.calls, p.Name+" "+string(p.Arguments))
				hs.mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hs.auth.Store(r.Header.Get("Authorization"))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(release) }) // runs first: frees hung handlers
	return hs
}

// releasedAtEnd returns a channel closed when the test's cleanups run.
func releasedAtEnd(t *testing.T) <-chan struct{} {
	c := make(chan struct{})
	t.Cleanup(func() { close(c) })
	return c
}

func (h *httpServer) Calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

// waitFor polls cond (the servers run in other processes and goroutines).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// processAlive is nil while the process with that id exists.
func processAlive(pid string) error {
	n, err := strconv.Atoi(strings.TrimSpace(pid))
	if err != nil {
		return err
	}
	return syscall.Kill(n, 0)
}
