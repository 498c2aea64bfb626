// Command mcp-notes is an example host tool for Mother: a Model Context
// Protocol server with a small notebook (add, list, search, delete) kept in
// one file. It speaks MCP over stdio (the default: Mother starts it) or
// streamable HTTP (--http 127.0.0.1:8765: it runs on its own and Mother
// connects to its URL).
//
//	mcp-notes [--file PATH] [--http ADDR]
//
// The notes file comes from --file, else $NOTES_FILE, else notes.jsonl in
// the working directory. It is JSON lines, one record per note or deletion,
// appended with one write each; a torn last line after a crash is skipped.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// version is the server version reported to clients.
const version = "1.0.0"

func main() {
	file := flag.String("file", "", "notes file (default $NOTES_FILE, else notes.jsonl)")
	addr := flag.String("http", "", "serve streamable HTTP on this address (e.g. 127.0.0.1:8765) instead of stdio")
	flag.Parse()
	path := *file
	if path == "" {
		path = os.Getenv("NOTES_FILE")
	}
	if path == "" {
		path = "notes.jsonl"
	}
	book := &notebook{path: path, now: time.Now}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, book, *addr); err != nil {
		log.Printf("mcp-notes: %v", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, book *notebook, addr string) error {
	if addr == "" {
		// Logs go to stderr: stdout carries the protocol.
		return newServer(book).Run(ctx, &mcp.StdioTransport{})
	}
	srv := newServer(book)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	log.Printf("mcp-notes: serving http://%s (notes in %s)", addr, book.path)
	if err := hs.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Tool arguments. The jsonschema tags become the parameter descriptions
// Mother shows her model.
type addArgs struct {
	Text string   `json:"text" jsonschema:"the note's text"`
	Tags []string `json:"tags,omitempty" jsonschema:"labels to find the note again"`
}

type listArgs struct {
	Tag   string `json:"tag,omitempty" jsonschema:"only notes with this tag"`
	Limit int    `json:"limit,omitempty" jsonschema:"at most this many, newest first (default 20)"`
}

type searchArgs struct {
	Query string `json:"query" jsonschema:"words to look for (case-insensitive, all must appear)"`
	Limit int    `json:"limit,omitempty" jsonschema:"at most this many, newest first (default 20)"`
}

type deleteArgs struct {
	ID int `json:"id" jsonschema:"the note's number"`
}

func newServer(book *notebook) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcp-notes", Version: version}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add a note. Returns its number."},
		func(ctx context.Context, _ *mcp.CallToolRequest, a addArgs) (*mcp.CallToolResult, any, error) {
			text := strings.TrimSpace(a.Text)
			if text == "" {
				return nil, nil, errors.New("text is empty")
			}
			n, err := book.add(text, a.Tags)
			if err != nil {
				return nil, nil, err
			}
			return textResult(fmt.Sprintf("Added note %d.", n.ID)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "list", Description: "List notes, newest first."},
		func(ctx context.Context, _ *mcp.CallToolRequest, a listArgs) (*mcp.CallToolResult, any, error) {
			notes, err := book.all()
			if err != nil {
				return nil, nil, err
			}
			var out []note
			for _, n := range notes {
				if a.Tag == "" || slices.Contains(n.Tags, a.Tag) {
					out = append(out, n)
				}
			}
			return textResult(format(out, a.Limit)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "search", Description: "Find notes containing all the words of a query."},
		func(ctx context.Context, _ *mcp.CallToolRequest, a searchArgs) (*mcp.CallToolResult, any, error) {
			words := strings.Fields(strings.ToLower(a.Query))
			if len(words) == 0 {
				return nil, nil, errors.New("query is empty")
			}
			notes, err := book.all()
			if err != nil {
				return nil, nil, err
			}
			var out []note
			for _, n := range notes {
				hay := strings.ToLower(n.Text + " " + strings.Join(n.Tags, " "))
				if allIn(words, hay) {
					out = append(out, n)
				}
			}
			return textResult(format(out, a.Limit)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "delete", Description: "Delete a note by its number."},
		func(ctx context.Context, _ *mcp.CallToolRequest, a deleteArgs) (*mcp.CallToolResult, any, error) {
			if err := book.delete(a.ID); err != nil {
				return nil, nil, err
			}
			return textResult(fmt.Sprintf("Deleted note %d.", a.ID)), nil, nil
		})
	return s
}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func allIn(words []string, hay string) bool {
	for _, w := range words {
		if !strings.Contains(hay, w) {
			return false
		}
	}
	return true
}

// format renders notes newest first, at most limit (default 20).
func format(notes []note, limit int) string {
	if len(notes) == 0 {
		return "No notes."
	}
	if limit <= 0 {
		limit = 20
	}
	var b strings.Builder
	shown := 0
	for i := len(notes) - 1; i >= 0 && shown < limit; i-- {
		n := notes[i]
		fmt.Fprintf(&b, "%d. [%s] %s", n.ID, n.At.Format("2006-01-02 15:04"), n.Text)
		if len(n.Tags) > 0 {
			fmt.Fprintf(&b, " (tags: %s)", strings.Join(n.Tags, ", "))
		}
		b.WriteByte('\n')
		shown++
	}
	if rest := len(notes) - shown; rest > 0 {
		fmt.Fprintf(&b, "(%d older not shown)\n", rest)
	}
	return b.String()
}

// note is one record of the notes file; Deleted records remove the note
// with that ID.
type note struct {
	ID      int       `json:"id"`
	At      time.Time `json:"at"`
	Text    string    `json:"text,omitempty"`
	Tags    []string  `json:"tags,omitempty"`
	Deleted bool      `json:"deleted,omitempty"`
}

// notebook is the notes file. One process serves it; a mutex orders the
// tool calls, which the SDK may run concurrently.
type notebook struct {
	path string
	now  func() time.Time
	mu   sync.Mutex
}

// load reads every record; a line that does not parse (a torn last line
// after a crash) is skipped.
func (b *notebook) load() (notes []note, lastID int, err error) {
	f, err := os.Open(b.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	byID := map[int]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var n note
		if json.Unmarshal(sc.Bytes(), &n) != nil || n.ID <= 0 {
			continue
		}
		lastID = max(lastID, n.ID)
		if n.Deleted {
			if i, ok := byID[n.ID]; ok {
				notes[i].Deleted = true
			}
			continue
		}
		byID[n.ID] = len(notes)
		notes = append(notes, n)
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", b.path, err)
	}
	live := notes[:0]
	for _, n := range notes {
		if !n.Deleted {
			live = append(live, n)
		}
	}
	return live, lastID, nil
}

func (b *notebook) all() ([]note, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	notes, _, err := b.load()
	return notes, err
}

func (b *notebook) add(text string, tags []string) (note, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, last, err := b.load()
	if err != nil {
		return note{}, err
	}
	n := note{ID: last + 1, At: b.now().UTC().Truncate(time.Second), Text: text, Tags: tags}
	return n, b.appendRecord(n)
}

func (b *notebook) delete(id int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	notes, _, err := b.load()
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(notes, func(n note) bool { return n.ID == id }) {
		return errors.New("no note " + strconv.Itoa(id))
	}
	return b.appendRecord(note{ID: id, At: b.now().UTC().Truncate(time.Second), Deleted: true})
}

// appendRecord writes one whole line with one write and syncs it. A torn
// last line from an earlier crash is ended first so the new record stays
// on a line of its own.
func (b *notebook) appendRecord(n note) error {
	if dir := filepath.Dir(b.path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(b.path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	line, err := json.Marshal(n)
	if err != nil {
		return err
	}
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err == nil && !bytes.Equal(last, []byte("\n")) {
			line = append([]byte("\n"), line...)
		}
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", b.path, err)
	}
	return f.Sync()
}
