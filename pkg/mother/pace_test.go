package mother

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
)

// paceChick is chick c-1 of channel C1 in h, with its channel directory.
func paceChick(h *harness, id string) hatchery.Info {
	chDir := filepath.Join(h.data, "workspace", "channels", "rec", "C1")
	if err := os.MkdirAll(chDir, 0o700); err != nil {
		h.t.Fatal(err)
	}
	return hatchery.Info{Record: hatchery.Record{ID: id, Adapter: "rec", ChannelID: "C1", ChannelDir: chDir, Tier: "local", Goal: "flood"}, Channel: "rec/C1"}
}

// drained waits until chick id's view has rendered what it was given
// (Idle waits for the chick's end).
func drained(t *testing.T, h *harness, id string) {
	t.Helper()
	h.m.mu.Lock()
	v := h.m.chickViews[id]
	h.m.mu.Unlock()
	if v == nil {
		return
	}
	done := make(chan struct{})
	v.do(func() { close(done) })
	waitClosed(t, done, "the chick's view")
}

// storeChickFile writes a chick's output file as the hatchery stores it
// and tells the observer.
func storeChickFile(t *testing.T, h *harness, in hatchery.Info, name string, attach bool) {
	t.Helper()
	rel := filepath.Join("scratch", "chicks", in.ID, name)
	path := filepath.Join(in.ChannelDir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(name), 0o600); err != nil {
		t.Fatal(err)
	}
	h.m.ChickObserver().ChickFile(in, hatchery.File{Path: path, RelPath: rel, Attach: attach, Title: name, Size: int64(len(name))})
}

// TestPostsPacedPerChick: a chick that attaches 300 files, updates the
// memory 300 times and proposes 40 skills at once gets chicks.posts.burst
// notices posted; the rest wait, folded, and go out as one post when the
// pace allows, naming what they hold; at its end what is still folded is
// one post before its result. Nothing is lost: every file is on disk,
// every memory update applied, every skill stored.
func TestPostsPacedPerChick(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	h := newHarness(t, withClock(clk), withUploads(), withChickResults(config.ResultsRelay))
	in := paceChick(h, "c-1")
	burst, perMinute := config.DefaultPostsBurst, config.DefaultPostsPerMinute

	for i := range 300 {
		storeChickFile(t, h, in, fmt.Sprintf("out/file-%03d.txt", i), true)
		ok, msg, err := h.m.UpdateChickMemory(t.Context(), in, "append", "m")
		if !ok || err != nil {
			t.Fatalf("UpdateChickMemory #%d = %v, %q, %v", i, ok, msg, err)
		}
	}
	for i := range 40 {
		if ok, msg, err := h.m.ProposeSkill(t.Context(), in, skillProposal(fmt.Sprintf("skill-%02d", i), "a skill")); !ok || err != nil {
			t.Fatalf("ProposeSkill #%d = %v, %q, %v", i, ok, msg, err)
		}
	}
	drained(t, h, in.ID)
	shown := func() int { return len(h.ad.of("upload")) + len(h.ad.of("post")) }
	if n := shown(); n != burst {
		t.Fatalf("680 notices at once: %d posted, want the burst %d:\n%s", n, burst, strings.Join(texts(h.ad.all()), "\n"))
	}

	// The pace allows one more a while later: the folded post.
	clk.Advance(time.Minute / time.Duration(perMinute))
	waitFor(t, "the folded post", func() bool { return shown() == burst+1 })
	fold := h.ad.of("post")[len(h.ad.of("post"))-1].Text
	for _, want := range []string{"Chick c-1", "more files it attached", "`out/file-", "in `scratch/chicks/c-1/`", "more updates of this channel's memory", "more skill notices", "`skill-"} {
		if !strings.Contains(fold, want) {
			t.Errorf("folded post lacks %q:\n%s", want, fold)
		}
	}
	if len(fold) > 2000 {
		t.Errorf("folded post is %d bytes, want it to fit one chat message", len(fold))
	}

	// More while the pace is spent: folded again, and posted at the end,
	// before the result.
	for i := range 10 {
		storeChickFile(t, h, in, fmt.Sprintf("late-%d.txt", i), true)
	}
	drained(t, h, in.ID)
	if n := shown(); n != burst+1 {
		t.Errorf("%d posts after more notices with the pace spent, want %d", n, burst+1)
	}
	end := in
	end.State, end.Reason, end.Result = hatchery.StateDone, hatchery.ReasonDone, &hatchery.Result{Text: "Flooded."}
	h.m.ChickObserver().ChickEnded(end)
	h.idle()
	posts := h.ad.of("post")
	if n := shown(); n != burst+2 {
		t.Errorf("%d posts after the end, want %d (one more folded post)", n, burst+2)
	}
	if last := posts[len(posts)-1].Text; !strings.Contains(last, "10 more files it attached") || !strings.Contains(last, "`late-0.txt`") {
		t.Errorf("the last folded post = %q, want the 10 late files", last)
	}
	fin := h.ad.of("finish")
	if len(fin) != 1 || !strings.Contains(fin[0].Text, "Flooded.") {
		t.Fatalf("finish = %+v, want the result", fin)
	}
	if n := len(fin[0].Text); n > 2000 || !strings.Contains(fin[0].Text, "files in `scratch/chicks/c-1/`") {
		t.Errorf("the result (%d bytes) does not summarise the folded files:\n%s", n, fin[0].Text)
	}

	// Nothing lost.
	for i := range 300 {
		if _, err := os.Stat(filepath.Join(in.ChannelDir, "scratch", "chicks", "c-1", fmt.Sprintf("out/file-%03d.txt", i))); err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
	}
	mem, _ := os.ReadFile(filepath.Join(in.ChannelDir, "MEMORY.md"))
	if n := strings.Count(string(mem), "m\n"); n != 300 {
		t.Errorf("MEMORY.md holds %d updates, want 300", n)
	}
	skills, _ := os.ReadDir(filepath.Join(in.ChannelDir, "skills"))
	if len(skills) != 40 {
		t.Errorf("%d skills stored, want 40", len(skills))
	}
	// Each post is in the log, for Mother's next run.
	var logged int
	for _, m := range h.logged("C1") {
		if strings.Contains(m.Text, "more than chicks.posts lets it post one by one") {
			logged++
		}
	}
	if logged != 2 {
		t.Errorf("%d folded posts logged, want 2", logged)
	}
}

// TestPostsPacedPerChickAlone: one chick's pace is its own; another
// chick of the same channel posts its own burst.
func TestPostsPacedPerChickAlone(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	h := newHarness(t, withClock(clk))
	a, b := paceChick(h, "c-a"), paceChick(h, "c-b")
	for range 20 {
		h.m.UpdateChickMemory(t.Context(), a, "append", "a")
	}
	for range 3 {
		h.m.UpdateChickMemory(t.Context(), b, "append", "b")
	}
	var na, nb int
	for _, r := range h.ad.of("post") {
		switch {
		case strings.Contains(r.Text, "Chick c-a updated"):
			na++
		case strings.Contains(r.Text, "Chick c-b updated"):
			nb++
		}
	}
	if na != config.DefaultPostsBurst || nb != 3 {
		t.Errorf("posted %d of c-a's 20 and %d of c-b's 3, want %d and 3", na, nb, config.DefaultPostsBurst)
	}
}

// TestProgressPaced: a chick's tool calls past chicks.posts.progress*
// are not shown (neither start nor end); those shown keep their end; the
// end's folded post counts the others.
func TestProgressPaced(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	h := newHarness(t, withClock(clk), withChickResults(config.ResultsRelay))
	in := paceChick(h, "c-p")
	obs := h.m.ChickObserver()
	for i := range 100 {
		id := fmt.Sprintf("call-%d", i)
		obs.ChickEvent(in, agent.Event{Type: agent.EventToolStart, ToolName: "bash", ToolCallID: id})
		obs.ChickEvent(in, agent.Event{Type: agent.EventToolEnd, ToolName: "bash", ToolCallID: id, Result: "ok"})
	}
	end := in
	end.State, end.Reason, end.Result = hatchery.StateDone, hatchery.ReasonDone, &hatchery.Result{Text: "Done."}
	obs.ChickEnded(end)
	h.idle()
	starts, ends := len(h.ad.of("tool")), len(h.ad.of("detail"))
	if starts != config.DefaultProgressBurst || ends != starts {
		t.Errorf("100 tool calls at once: %d starts and %d ends shown, want %d of each", starts, ends, config.DefaultProgressBurst)
	}
	posts := h.ad.of("post")
	if len(posts) != 1 || !strings.Contains(posts[0].Text, "80 tool calls not shown") || !strings.Contains(posts[0].Text, "momctl chicks tail c-p") {
		t.Errorf("posts = %q, want one folded post counting 80 tool calls", texts(posts))
	}
}

// reportMeterFunc is a ReportMeter recording what it charged.
type recMeter struct {
	mu      sync.Mutex
	charged map[string][]string
}

func (r *recMeter) ChargeReport(in hatchery.Info, text string) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.charged == nil {
		r.charged = map[string][]string{}
	}
	r.charged[in.ID] = append(r.charged[in.ID], text)
	return int64(len(text)), nil
}

func (r *recMeter) of(id string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.charged[id]...)
}

// TestReportBoundedAndCharged: a chick that leaves 3,000 files with long
// names gets a report (answer mode) and a result (relay mode) of a few
// KB, with the file count, the first names and where they all are; what
// Mother's model reads is charged to the chick.
func TestReportBoundedAndCharged(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{config.ResultsAnswer, config.ResultsRelay} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, withChickResults(mode))
			meter := &recMeter{}
			h.m.reports = meter
			in := paceChick(h, "c-r")
			long := strings.Repeat("n", 200)
			for i := range 3000 {
				storeChickFile(t, h, in, fmt.Sprintf("out/%s-%04d.txt", long, i), false)
			}
			end := in
			end.State, end.Reason, end.Result = hatchery.StateDone, hatchery.ReasonDone, &hatchery.Result{Text: "Wrote 3000 files."}
			h.m.ChickObserver().ChickEnded(end)
			waitFor(t, "the chick's result logged", func() bool {
				if fi, err := os.Stat(filepath.Join(in.ChannelDir, "log.jsonl")); err != nil || fi.Size() == 0 {
					return false
				}
				for _, m := range h.logged("C1") {
					if strings.Contains(m.Text, "Wrote 3000 files.") {
						return true
					}
				}
				return false
			})
			h.idle()
			var report string
			for _, m := range h.logged("C1") {
				if report == "" && strings.Contains(m.Text, "Wrote 3000 files.") {
					report = m.Text // the first: Mother's answer may quote it
				}
			}
			if len(report) > 4096 {
				t.Errorf("the logged report is %d bytes, want at most 4 KiB:\n%.600s", len(report), report)
			}
			for _, want := range []string{"3000 files in `scratch/chicks/c-r/`", "`out/nnnn", "and 2995 more"} {
				if !strings.Contains(report, want) {
					t.Errorf("the report lacks %q:\n%s", want, report)
				}
			}
			charged := meter.of("c-r")
			// Relay mode logs the result under a "[chick …]" line.
			if len(charged) != 1 || !strings.HasSuffix(report, charged[0]) {
				t.Errorf("charged %d texts to the chick, want its report once", len(charged))
			}
		})
	}
}
