package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// TestChickResultAnsweredWholePath: through the real binary with a real
// chick, chicks.results "answer" (the default) has Mother's own model read
// the chick's report (its result, outcome and attached file) and answer in
// her words: stdout shows her answer with the chick's usage line, not the
// raw result; the report and her answer are logged, a follow-up has them
// in context, and the chick's ledger holds only the chick's calls.
// "relay" shows the raw result and never asks her model about it.
func TestChickResultAnsweredWholePath(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	for _, mode := range []string{"answer", "relay"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			data, _ := chickData(t, api, nil)
			cfgPath := filepath.Join(data, "config.json")
			var cfg map[string]any
			b, _ := os.ReadFile(cfgPath)
			if err := json.Unmarshal(b, &cfg); err != nil {
				t.Fatal(err)
			}
			if mode == "answer" {
				delete(cfg["chicks"].(map[string]any), "results") // the default
			} else {
				cfg["chicks"].(map[string]any)["results"] = mode
			}
			b, _ = json.Marshal(cfg)
			if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
				t.Fatal(err)
			}

			var reportsRead atomic.Int32
			fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
				switch r.Model {
				case motherModel:
					last := r.LastUser()
					switch {
					case strings.Contains(last, "ended] Outcome: done."):
						reportsRead.Add(1)
						if strings.Contains(last, "result=42") && strings.Contains(last, "the plot") {
							return ollamatest.Turn{Text: "Mother here: the chick worked out 42 and attached a plot."}
						}
						return ollamatest.Turn{Text: "Mother here: the report lacks the result or the file."}
					case strings.Contains(last, "what did it find"):
						for _, m := range r.Messages {
							if strings.Contains(m.Content, "result=42") {
								return ollamatest.Turn{Text: "It found 42."}
							}
						}
						return ollamatest.Turn{Text: "I have no idea."}
					case !hasToolResult(r):
						return motherTurn("Compute 6*7 in the shell.")
					}
					return ollamatest.Turn{Text: "A chick is on it."}
				case chickModel:
					switch len(toolResults(r)) {
					case 0:
						return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "bash", Args: map[string]any{"label": "compute",
							"command": "echo plot > scratch/plot.txt && echo result=$((6*7))"}}}}
					case 1:
						return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "attach", Args: map[string]any{"label": "share", "path": "scratch/plot.txt", "title": "the plot"}}}}
					}
					return ollamatest.Turn{Text: "Chick says: " + strings.Join(strings.Fields(toolResults(r)[0]), " ")}
				}
				return ollamatest.Turn{Status: 404, Error: "unknown model " + r.Model}
			})
			defer fake.Close()

			p := startChickMother(t, data, chickEnv(fake))
			io.WriteString(p.stdin, "please run the heavy computation\n")
			first := "Mother here:"
			if mode == "relay" {
				first = "Chick says: result=42"
			}
			p.waitOut(t, first, 2*time.Minute)
			io.WriteString(p.stdin, "what did it find?\n")
			p.stdin.Close()
			if code := p.wait(t, 3*time.Minute); code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, p.out(), p.errs())
			}
			out := p.out()
			// The usage line ends the post, right after Mother's answer
			// (or the raw result).
			want := []string{"A chick is on it.", "[attached the plot: ", "It found 42.", "\n\n(chick c-"}
			unwanted := []string{"Mother here"}
			if mode == "answer" {
				want[3] = "Mother here: the chick worked out 42 and attached a plot.\n\n(chick c-"
				unwanted = []string{"Chick says:", "lacks the result"}
			} else {
				want[3] = "Chick says: result=42\n\n(chick c-"
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s\nstderr:\n%s", w, out, p.errs())
				}
			}
			for _, u := range unwanted {
				if strings.Contains(out, u) {
					t.Errorf("stdout shows %q:\n%s", u, out)
				}
			}
			if !strings.Contains(out, "· done · tier local · ") {
				t.Errorf("stdout lacks the usage line:\n%s", out)
			}
			if n := reportsRead.Load(); mode == "answer" && n != 1 || mode == "relay" && n != 0 {
				t.Errorf("Mother's model read %d chick reports in %s mode", n, mode)
			}

			var report, answer bool
			for _, m := range readLog(t, data) {
				report = report || m.Sender.ID == "chick" && strings.Contains(m.Text, "result=42")
				answer = answer || m.Sender.ID == "mother" && strings.Contains(m.Text, "Mother here")
			}
			if mode == "answer" && (!report || !answer) {
				t.Errorf("log.jsonl: chick report logged %v, Mother's answer logged %v", report, answer)
			}
			// Her run on the result is hers: the ledger holds the chick's
			// own three calls, and her calls as hers (kind "mother"), in
			// answer mode one more than in relay mode.
			kinds := map[string]int{}
			for _, l := range readLedger(t, data) {
				kinds[l.ledgerKind()]++
			}
			if kinds[""] != 3 || kinds["report"] != 1 {
				t.Errorf("the ledger has %d chick calls and %d reports charged to it, want the chick's 3 and its report once (%v)", kinds[""], kinds["report"], kinds)
			}
			if own := kinds["mother"]; own != kinds["mother-reserve"] || mode == "answer" && own < 3 || mode == "relay" && own < 2 {
				t.Errorf("Mother's own calls in the ledger: %v", kinds)
			}
		})
	}
}
