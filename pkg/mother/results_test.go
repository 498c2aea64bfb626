package mother

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// resultScript is a model that answers chick reports in its own words
// (keyed on the goal), and otherwise like script.
func resultScript(r ollamatest.Request) ollamatest.Turn {
	last := r.LastUser()
	if !strings.Contains(last, "ended] Outcome:") || r.Messages[len(r.Messages)-1].Role != "user" {
		return script(r)
	}
	switch {
	case strings.Contains(last, "Goal: model fails"):
		return ollamatest.Turn{Status: 400, Error: "the model refuses"}
	case strings.Contains(last, "Goal: stay silent"):
		return ollamatest.Turn{Text: "[SILENT]"}
	case strings.Contains(last, "Goal: please block"):
		return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "block"}}}
	}
	_, outcome, _ := strings.Cut(last, "Outcome: ")
	outcome, _, _ = strings.Cut(outcome, "\n")
	return ollamatest.Turn{Text: "In my words: the chick ended " + outcome}
}

func endedChick(id, goal string, state hatchery.State, reason hatchery.Reason, outcome, result string) hatchery.Info {
	in := hatchery.Info{Record: hatchery.Record{ID: id, Adapter: "rec", ChannelID: "C1", Tier: "local", Goal: goal, StartedBy: "UMARIO",
		State: state, Reason: reason, Outcome: outcome}, Channel: "rec/C1"}
	if result != "" {
		in.Result = &hatchery.Result{Text: result}
	}
	in.Usage = model.Usage{InputTokens: 10, OutputTokens: 5}
	return in
}

// chickRequest is the model request that read chick id's report.
func chickRequest(t *testing.T, h *harness, id string) ollamatest.Request {
	t.Helper()
	for _, r := range h.fake.Requests() {
		if strings.Contains(r.LastUser(), "]: [chick "+id+" ended]") {
			return r
		}
	}
	t.Fatalf("no model request read chick %s's report; requests: %d", id, len(h.fake.Requests()))
	return ollamatest.Request{}
}

// TestChickResultAnswered: with chicks.results "answer" (the default) a
// chick's end is a run of Mother's own model in the channel: it reads the
// chick's report (outcome, goal, files, result), her answer is posted with
// the chick's usage line, the report and the answer are logged, and a
// follow-up run has both in its context.
func TestChickResultAnswered(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withScript(resultScript))
	if h.cfg.Chicks.Results != config.ResultsAnswer {
		t.Fatalf("default chicks.results = %q, want answer", h.cfg.Chicks.Results)
	}
	obs := h.m.ChickObserver()
	in := endedChick("c-1", "count to three", hatchery.StateRunning, "", "", "")
	obs.ChickEvent(in, agent.Event{Type: agent.EventToolStart, ToolName: "bash", Label: "count"})
	csv := filepath.Join(t.TempDir(), "counts.csv")
	if err := os.WriteFile(csv, []byte("1,2,3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	obs.ChickFile(in, hatchery.File{Path: csv, RelPath: "scratch/chicks/c-1/counts.csv", Attach: true, Title: "counts.csv"})
	obs.ChickFile(in, hatchery.File{Path: csv, RelPath: "scratch/chicks/c-1/notes.txt"})
	end := endedChick("c-1", "count to three", hatchery.StateDone, hatchery.ReasonDone, "", "Counted 3.")
	end.StartedAt, end.EndedAt = time.Now().Add(-2*time.Second), time.Now()
	obs.ChickEnded(end)
	h.idle()

	req := chickRequest(t, h, "c-1")
	for _, want := range []string{"Outcome: done.", "Goal: count to three", "Result:\nCounted 3.", "counts.csv", "`scratch/chicks/c-1/notes.txt`"} {
		if !strings.Contains(req.LastUser(), want) {
			t.Errorf("the report Mother's model read lacks %q:\n%s", want, req.LastUser())
		}
	}
	if req.Model != "tiny" || !strings.Contains(req.System(), "Mother") {
		t.Errorf("the report was read by model %q, want Mother's own (tiny) with her prompt", req.Model)
	}
	fins := h.ad.of("finish")
	want := "In my words: the chick ended done.\n\n(chick c-1 · done · tier local · 15 tokens: 10 in, 5 out · 2s)"
	if len(fins) != 2 || fins[0].Text != "" || fins[1].Text != want || fins[1].Title != "chick c-1" {
		t.Fatalf("finishes = %q, want the progress view closed, then %q", texts(fins), want)
	}
	logged := h.logged("C1")
	var report, answer chat.ChannelMessage
	for _, m := range logged {
		switch m.Sender.ID {
		case ChickSenderID:
			report = m
		case "UMOTHER":
			answer = m
		}
	}
	if !strings.Contains(report.Text, "Counted 3.") || answer.Text != want || answer.ReplyTo != report.ID {
		t.Fatalf("logged report %+v and answer %+v, want the report and Mother's answer to it", report, answer)
	}
	if !strings.Contains(h.log(), "kind=chick") {
		t.Error("the run on the chick's result is not logged as one of Mother's runs (kind=chick)")
	}

	// A follow-up: the next run has the result and the answer in context.
	h.say("C1", "what did it count?", false, mention)
	h.idle()
	reqs := h.fake.Requests()
	follow := reqs[len(reqs)-1]
	var sawResult, sawAnswer bool
	for _, m := range follow.Messages {
		sawResult = sawResult || m.Role == "user" && strings.Contains(m.Content, "Counted 3.")
		sawAnswer = sawAnswer || m.Role == "assistant" && strings.Contains(m.Content, "In my words")
	}
	if !sawResult || !sawAnswer {
		t.Errorf("follow-up context (result %v, answer %v): %+v", sawResult, sawAnswer, follow.Messages)
	}
	if jobs := markerJobs(t, filepath.Join(h.data, "state/inflight/rec/C1.json")); jobs != 0 {
		t.Errorf("in-flight marker holds %d jobs after the answer", jobs)
	}
}

// TestChickResultRelay: with chicks.results "relay" the result is posted
// as it came, with its usage line, and logged; Mother's model is not
// asked.
func TestChickResultRelay(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withScript(resultScript), withChickResults(config.ResultsRelay))
	h.m.ChickObserver().ChickEnded(endedChick("c-1", "count to three", hatchery.StateDone, hatchery.ReasonDone, "", "Counted 3."))
	h.idle()
	fins := h.ad.of("finish")
	want := "Counted 3.\n\n(chick c-1 · done · tier local · 15 tokens: 10 in, 5 out)"
	if len(fins) != 1 || fins[0].Text != want {
		t.Fatalf("finishes = %q, want %q", texts(fins), want)
	}
	if n := len(h.fake.Requests()); n != 0 {
		t.Errorf("relay asked the model %d times", n)
	}
	logged := h.logged("C1")
	if last := logged[len(logged)-1]; last.Sender.ID != "UMOTHER" || !strings.Contains(last.Text, "Counted 3.") {
		t.Errorf("last logged %+v, want the relayed result as Mother's", last)
	}
}

// TestChickResultLongAttached: a result longer than LongResult is stored
// in the channel's directory and posted as a file after Mother's answer;
// the report tells her model so, and the log keeps the whole result.
func TestChickResultLongAttached(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withScript(resultScript), withUploads())
	long := strings.Repeat("a line of findings\n", LongResult/10) + "THE END"
	obs := h.m.ChickObserver()
	obs.ChickEnded(endedChick("c-9", "find things", hatchery.StateDone, hatchery.ReasonDone, "", long))
	obs.ChickEnded(endedChick("c-10", "find little", hatchery.StateDone, hatchery.ReasonDone, "", "little"))
	h.idle()

	if r := chickRequest(t, h, "c-9").LastUser(); !strings.Contains(r, "is attached to your answer as `scratch/chicks/c-9/result.md`") {
		t.Errorf("the report does not say the result is attached:\n%s", r)
	}
	all := h.ad.all()
	var order []string
	for _, r := range all {
		order = append(order, r.Kind+":"+r.Title)
	}
	ups := h.ad.of("upload")
	if len(ups) != 1 || ups[0].Title != "chick c-9 result.md" || ups[0].Text != long+"\n" {
		t.Fatalf("uploads = %+v, want chick c-9's whole result once (and none for the short one)", order)
	}
	for i, r := range all {
		if r.Kind == "upload" && (i == 0 || all[i-1].Kind != "finish" || all[i-1].Title != "chick c-9") {
			t.Errorf("the file was not posted right after Mother's answer: %v", order)
		}
	}
	stored, err := os.ReadFile(filepath.Join(h.data, "workspace/channels/rec/C1/scratch/chicks/c-9/result.md"))
	if err != nil || string(stored) != long+"\n" {
		t.Errorf("stored result: %v", err)
	}
	var logged bool
	for _, m := range h.logged("C1") {
		logged = logged || m.Sender.ID == ChickSenderID && strings.Contains(m.Text, "THE END")
	}
	if !logged {
		t.Error("the whole long result is not in the channel log")
	}
}

// TestChickResultOutcomes: every ending is put to Mother's model with its
// outcome and reason, and she answers; when her run gives no answer (a
// model error, silence) the result is posted as it came.
func TestChickResultOutcomes(t *testing.T) {
	t.Parallel()
	usage := func(id, state string) string {
		return "(chick " + id + " · " + state + " · tier local · 15 tokens: 10 in, 5 out)"
	}
	for _, tc := range []struct {
		name     string
		in       hatchery.Info
		inReport []string
		want     []string
	}{
		{"hung", endedChick("c-h", "wait", hatchery.StateKilled, hatchery.ReasonHung, "missed its heartbeats", ""),
			[]string{"Outcome: killed (hung): missed its heartbeats.", "It left no final message.", "Say plainly that it did not finish"},
			[]string{"In my words: the chick ended killed (hung): missed its heartbeats.\n\n" + usage("c-h", "killed")}},
		{"failed with last words", endedChick("c-f", "build", hatchery.StateFailed, hatchery.ReasonError, "model error: boom", "I got halfway"),
			[]string{"Outcome: failed (error): model error: boom.", "Its last words:\nI got halfway"},
			[]string{"In my words: the chick ended failed (error): model error: boom.\n\n" + usage("c-f", "failed")}},
		{"killed", endedChick("c-k", "loop", hatchery.StateKilled, hatchery.ReasonKilled, "cancelled at the request of UMARIO", ""),
			[]string{"Outcome: killed: cancelled at the request of UMARIO."},
			[]string{"In my words: the chick ended killed: cancelled at the request of UMARIO.\n\n" + usage("c-k", "killed")}},
		{"model fails", endedChick("c-e", "model fails", hatchery.StateDone, hatchery.ReasonDone, "", "Counted 3."),
			[]string{"Result:\nCounted 3."},
			[]string{"My model server refused the request", "Here is chick c-e's result as it came:\n\nCounted 3.\n\n" + usage("c-e", "done")}},
		{"silent", endedChick("c-s", "stay silent", hatchery.StateDone, hatchery.ReasonDone, "", "Counted 3."),
			[]string{"Result:\nCounted 3."},
			[]string{"Counted 3.\n\n" + usage("c-s", "done")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, withScript(resultScript))
			h.m.ChickObserver().ChickEnded(tc.in)
			h.idle()
			report := chickRequest(t, h, tc.in.ID).LastUser()
			for _, w := range tc.inReport {
				if !strings.Contains(report, w) {
					t.Errorf("report lacks %q:\n%s", w, report)
				}
			}
			fins := h.ad.of("finish")
			if len(fins) != 1 {
				t.Fatalf("finishes = %q, want one", texts(fins))
			}
			for _, w := range tc.want {
				if !strings.Contains(fins[0].Text, w) {
					t.Errorf("posted %q, want it to contain %q", fins[0].Text, w)
				}
			}
		})
	}
}
