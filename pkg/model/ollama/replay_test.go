package ollama

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// repliesDir holds the recorded shapes of real Ollama replies (see its
// README).
const repliesDir = "testdata/replies"

// recorded is what a reply's own lines say the provider should return.
type recorded struct {
	content      string   // every line's content, joined
	calls        []string // the names of the structured calls, in order
	reason       string
	prompt, eval int64
}

func readRecorded(t *testing.T, r ollamatest.Reply) recorded {
	t.Helper()
	var rec recorded
	var content strings.Builder
	for i, l := range r.Lines {
		var line struct {
			Message struct {
				Content   string `json:"content"`
				ToolCalls []struct {
					Function struct {
						Name string `json:"name"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			Done            bool   `json:"done"`
			DoneReason      string `json:"done_reason"`
			PromptEvalCount int64  `json:"prompt_eval_count"`
			EvalCount       int64  `json:"eval_count"`
		}
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		content.WriteString(line.Message.Content)
		for _, c := range line.Message.ToolCalls {
			rec.calls = append(rec.calls, c.Function.Name)
		}
		if line.Done {
			rec.reason, rec.prompt, rec.eval = line.DoneReason, line.PromptEvalCount, line.EvalCount
		}
	}
	rec.content = content.String()
	return rec
}

// TestRepliesReplayThroughTheProvider: every recorded reply loads with its
// provenance, and streamed over the real wire (chunk boundaries inside its
// lines) through the real provider it comes out as its lines say: the
// content deltas joined are the recorded content, the structured calls
// keep their names, and the usage and stop reason are the done line's.
// What the agent then makes of the content is for the agent's tests.
func TestRepliesReplayThroughTheProvider(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(filepath.Join(repliesDir, "*.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no replies in %s", repliesDir)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			r, err := ollamatest.LoadReply(path)
			if err != nil {
				t.Fatal(err)
			}
			if r.Model == "" || r.Ollama == "" || len(r.Sources) == 0 || r.Shows == "" {
				t.Fatalf("provenance missing: model %q, ollama %q, %d sources, shows %q", r.Model, r.Ollama, len(r.Sources), r.Shows)
			}
			for _, s := range r.Sources {
				if !strings.HasPrefix(s, "https://") {
					t.Errorf("source %q does not start with a URL", s)
				}
			}
			want := readRecorded(t, r)
			fake := ollamatest.New(r.Turn())
			defer fake.Close()
			p, err := New(fake.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			var deltas strings.Builder
			resp, err := p.Chat(t.Context(), model.Request{Model: r.Model, Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}},
				func(d model.Delta) { deltas.WriteString(d.Text) })
			if err != nil {
				t.Fatalf("Chat: %v", err)
			}
			if deltas.String() != want.content {
				t.Errorf("content deltas:\n got %q\nwant %q", deltas.String(), want.content)
			}
			if resp.Message.Content != want.content {
				t.Errorf("message content:\n got %q\nwant %q", resp.Message.Content, want.content)
			}
			var names []string
			for _, c := range resp.Message.ToolCalls {
				names = append(names, c.Name)
			}
			if !slices.Equal(names, want.calls) {
				t.Errorf("tool calls %q, want %q", names, want.calls)
			}
			if got := (model.Usage{InputTokens: want.prompt, OutputTokens: want.eval}); resp.Usage != got {
				t.Errorf("usage %+v, want %+v", resp.Usage, got)
			}
			if resp.StopReason != want.reason {
				t.Errorf("stop reason %q, want %q", resp.StopReason, want.reason)
			}
			if reqs := fake.Requests(); len(reqs) != 1 || reqs[0].Model != r.Model {
				t.Errorf("the fake saw %d requests, want one for %s", len(reqs), r.Model)
			}
		})
	}
}

// TestLoadReplyRejectsMalformedFiles: a file that is not a reply fails to
// load, with an error naming the file and, for a bad line, its number.
func TestLoadReplyRejectsMalformedFiles(t *testing.T) {
	t.Parallel()
	const header = "# model: qwen3:14b\n# ollama: 0.17.0\n# source: https://example.com/a (what it shows)\n# shows: a reply\n"
	line := func(content string, done bool) string {
		b, _ := json.Marshal(map[string]any{"model": "qwen3:14b", "created_at": "2026-01-01T00:00:00Z",
			"message": map[string]any{"role": "assistant", "content": content}, "done": done})
		return string(b) + "\n"
	}
	good := header + line("hi", false) + line("", true)
	for _, tc := range []struct {
		name, file, want string
	}{
		{"not JSON", header + line("hi", false) + "{\"model\": \"qwen3:14b\", \"message\": \n" + line("", true), ":6: not a JSON object"},
		{"an array", header + "[1, 2]\n" + line("", true), ":5: not a JSON object"},
		{"no done line", header + line("hi", false) + line("there", false), ":6: the last line does not have \"done\": true"},
		{"a line after done", header + line("", true) + line("hi", false), ":6: a line after the done line"},
		{"another model", header + strings.Replace(line("hi", false), "qwen3:14b", "llama3.1:8b", 1) + line("", true), ":5: model \"llama3.1:8b\""},
		{"unknown key", "# modle: qwen3:14b\n" + good, ":1: unknown header key \"modle\""},
		{"header in the stream", header + line("hi", false) + "# note: late\n" + line("", true), ":6: header line after the stream began"},
		{"model twice", "# model: qwen3:14b\n" + good, ":2: \"model\" given twice"},
		{"no source", strings.Replace(good, "# source: https://example.com/a (what it shows)\n", "", 1), "no \"source\" in the header"},
		{"no stream", header, "no stream lines"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "bad.ndjson")
			if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ollamatest.LoadReply(path)
			if err == nil {
				t.Fatalf("loaded:\n%s", tc.file)
			}
			if !strings.HasPrefix(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want one starting with the path and containing %q", err, tc.want)
			}
		})
	}
	// And the same file, well formed, loads.
	path := filepath.Join(t.TempDir(), "good.ndjson")
	if err := os.WriteFile(path, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := ollamatest.LoadReply(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "good" || r.Model != "qwen3:14b" || len(r.Lines) != 2 || len(r.Sources) != 1 {
		t.Errorf("loaded %+v", r)
	}
}
