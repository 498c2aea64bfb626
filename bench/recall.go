package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/recall"
)

// recallBench measures the history index (pkg/recall) over one channel of
// a million messages (100,000 with -quick): the rate it is built at from
// log.jsonl, its bytes per million messages, full-text query latency
// (p50, p99 over 1,000 queries of two or three words), and Mother's idle
// RSS on that data directory with recall off and with recall on (its
// index caught up).
func recallBench(bin, tmp string, quick bool) {
	n := 1_000_000
	if quick {
		n = 100_000
	}
	// Mother's model searches once per message (with recall off, the
	// unknown tool is an error result), then answers.
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if r.Messages[len(r.Messages)-1].Role == "tool" {
			return ollamatest.Turn{Text: "ok"}
		}
		return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "recall", Args: map[string]any{"query": r.LastUser()}}}}
	})
	defer fake.Close()
	fake.ForgetRequests()
	data := filepath.Join(tmp, "recall")
	check(os.MkdirAll(data, 0o700))
	off := []byte(`{"adapters": {"cli": {"type": "cli"}}, "recall": {"enabled": false}}`)
	on := []byte(`{"adapters": {"cli": {"type": "cli"}}}`)
	// A first start makes the data directory; then the channel's log.
	startDaemonWith(bin, data, off, "MOTHER_OLLAMA_URL="+fake.URL).stop()
	dir := filepath.Join(data, "workspace", "channels", "cli", "local")
	check(os.MkdirAll(dir, 0o700))
	vocab := recallVocab()
	rng := rand.New(rand.NewPCG(46, 1))
	zipf := rand.NewZipf(rand.New(rand.NewPCG(46, 2)), 1.1, 2, uint64(len(vocab)-1))
	f, err := os.Create(filepath.Join(dir, "log.jsonl"))
	check(err)
	w := bufio.NewWriterSize(f, 1<<20)
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	users := []string{"anna", "tom", "lily", "sam", "rose"}
	for i := range n {
		words := make([]string, 6+rng.IntN(20))
		for j := range words {
			words[j] = vocab[zipf.Uint64()]
		}
		m := chat.ChannelMessage{ID: fmt.Sprintf("m-%07d", i), ChannelID: "local", Timestamp: t0.Add(time.Duration(i) * 30 * time.Second),
			Sender: chat.Sender{ID: "u", Username: users[i%len(users)]}, Text: strings.Join(words, " "), Attachments: []chat.ChannelAttachment{}}
		line, _ := json.Marshal(m)
		w.Write(line)
		w.WriteByte('\n')
	}
	check(w.Flush())
	check(f.Close())
	logInfo, _ := os.Stat(filepath.Join(dir, "log.jsonl"))

	ctx := context.Background()
	path := filepath.Join(data, "state", "recall.db")
	ix, err := recall.Open(ctx, path, nil)
	check(err)
	start := time.Now()
	added, err := ix.SyncChannel(ctx, "cli/local", dir)
	check(err)
	build := time.Since(start)
	// The queries: two or three words, drawn as people ask (mostly
	// middling words, some rare, some common).
	lat := make([]time.Duration, 0, 1000)
	for range 1000 {
		q := make([]string, 2+rng.IntN(2))
		for j := range q {
			q[j] = vocab[20+rng.IntN(len(vocab)-20)]
		}
		s := time.Now()
		_, err := ix.Search(ctx, "cli/local", strings.Join(q, " "), 5)
		check(err)
		lat = append(lat, time.Since(s))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	check(ix.Close()) // checkpoints the WAL into the file
	var bytes int64
	for _, p := range []string{path, path + "-wal"} {
		if st, err := os.Stat(p); err == nil {
			bytes += st.Size()
		}
	}
	perMillion := float64(bytes) / float64(added) * 1e6

	idle := func(cfg []byte) mem {
		d := startDaemonWith(bin, data, cfg, "MOTHER_OLLAMA_URL="+fake.URL)
		defer d.stop()
		time.Sleep(5 * time.Second) // caught up (the channel is checked, not read) and trimmed
		d.ask("what did we say about the " + vocab[500])
		d.stdout.ReadString('\n')   // the tool line, then the answer
		time.Sleep(4 * time.Second) // idle again: Mother trims after 2 s
		return memOf(d.cmd.Process.Pid)
	}
	rssOff, rssOn := idle(off), idle(on)
	summary.haveRecall = true
	summary.recallBuildPerSecond = float64(added) / build.Seconds()
	summary.recallP50, summary.recallP99 = pct(lat, 50), pct(lat, 99)
	summary.recallBytesPerMillion = perMillion
	summary.recallRSSDelta = rssOn.rss - rssOff.rss
	summary.recallMessages = added

	fmt.Printf("## Recall: the history index (%d messages in one channel)\n\n", added)
	fmt.Printf("| figure | measured |\n|---|---|\n")
	fmt.Printf("| index build from log.jsonl (%.0f MB) | %.0f messages/s (%.1f s) |\n", float64(logInfo.Size())/1e6, summary.recallBuildPerSecond, build.Seconds())
	fmt.Printf("| index size | %.0f MB per million messages |\n", perMillion/1e6)
	fmt.Printf("| full-text query, 2-3 words, best 5 | p50 %s, p99 %s |\n", pct(lat, 50).Round(10*time.Microsecond), pct(lat, 99).Round(10*time.Microsecond))
	fmt.Printf("| Mother idle, recall off | %s |\n", rssOff)
	fmt.Printf("| Mother idle, recall on (index caught up, one search answered) | %s |\n\n", rssOn)
}

// recallVocab is 20,000 made-up words: a Zipf draw over them gives text
// whose word frequencies fall as a language's do.
func recallVocab() []string {
	rng := rand.New(rand.NewPCG(7, 7))
	const letters = "etaoinshrdlcumwfgypbvkjxqz"
	seen := map[string]bool{}
	var out []string
	for len(out) < 20000 {
		b := make([]byte, 3+rng.IntN(7))
		for i := range b {
			b[i] = letters[min(rng.IntN(len(letters)), rng.IntN(len(letters)))]
		}
		if w := string(b); !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}
