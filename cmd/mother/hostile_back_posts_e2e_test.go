package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// TestHostileBackPosts (issue 42, item 4): what a chick makes Mother
// post, and what her model reads about it, from inside real chicks. A
// scripted chick model floods its channel with notices (300 attachments
// and 300 memory updates in one turn, 1,000 skills, 1,000 output files in
// relay mode, on the terminal and on the Discord wire fake), and another
// leaves 3,000 long output file names. The posts stay within
// chicks.posts, the rest is in one folded post, nothing on disk is lost;
// the result logged for Mother's next run is bounded and charged to the
// chick.
func TestHostileBackPosts(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	runHostileRows(t, api,
		hostileRow{"Notices", postsNotices},
		hostileRow{"Report", postsReport},
		hostileRow{"Discord", postsDiscord},
	)
}

// postsModel is the model of the rows' Mothers: Mother delegates each
// message and says so; a chick plays its row's turns (by a word of its
// goal), one turn per model call, then ends. Mother's prompts are
// measured (bytes of system text and messages).
type postsModel struct {
	mu      sync.Mutex
	turns   map[string][]ollamatest.Turn
	prompts []int
}

func (p *postsModel) row(word string, turns ...ollamatest.Turn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.turns == nil {
		p.turns = map[string][]ollamatest.Turn{}
	}
	p.turns[word] = turns
}

// motherPrompts are the sizes of Mother's model calls so far.
func (p *postsModel) motherPrompts() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.prompts...)
}

func (p *postsModel) turn(r ollamatest.Request) ollamatest.Turn {
	switch r.Model {
	case motherModel:
		n := len(r.System())
		for _, m := range r.Messages {
			n += len(m.Content)
		}
		p.mu.Lock()
		p.prompts = append(p.prompts, n)
		p.mu.Unlock()
		if k := len(r.Messages); k > 0 && r.Messages[k-1].Role == "tool" {
			return ollamatest.Turn{Text: "Delegated."}
		}
		if strings.Contains(r.LastUser(), "hello again") {
			return ollamatest.Turn{Text: "Hello."}
		}
		return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "spawn_chick", Args: map[string]any{"label": "delegating", "goal": r.LastUser()}}}}
	case chickModel:
	default:
		return ollamatest.Turn{Status: 404, Error: "unknown model " + r.Model}
	}
	goal := ""
	for _, m := range r.Messages {
		if m.Role == "user" {
			goal = m.Content
			break
		}
	}
	done := 0
	for _, m := range r.Messages {
		if m.Role == "assistant" {
			done++
		}
	}
	p.mu.Lock()
	var turns []ollamatest.Turn
	for w, ts := range p.turns {
		if strings.Contains(goal, w) {
			turns = ts
		}
	}
	p.mu.Unlock()
	if done < len(turns) {
		return turns[done]
	}
	return ollamatest.Turn{Text: fmt.Sprintf("Done: %d tool calls.", len(toolResults(r)))}
}

// postsFloodTurns: files made in one bash call, then attachments and
// memory updates in one turn of calls (alternating contents: never the
// same call twice in a row).
// postsSkillsKept is how many of the 1,000 skills the channel keeps:
// chicks.skills.maxCount's default.
const postsSkillsKept = 100

func postsFloodTurns(attach, memory int, setup string) []ollamatest.Turn {
	var calls []ollamatest.Call
	for i := range max(attach, memory) {
		if i < attach {
			calls = append(calls, ollamatest.Call{Name: "attach", Args: map[string]any{"path": fmt.Sprintf("out/f%d.txt", i), "title": fmt.Sprintf("f%d.txt", i)}})
		}
		if i < memory {
			calls = append(calls, ollamatest.Call{Name: "update_memory", Args: map[string]any{"mode": "append", "content": string(rune('a' + i%2))}})
		}
	}
	mk := fmt.Sprintf("mkdir -p out outputs skills; i=0; while [ $i -lt %d ]; do echo $i > out/f$i.txt; i=$((i+1)); done; %s; echo made", attach, setup)
	return []ollamatest.Turn{{Calls: []ollamatest.Call{bashCall("make", mk)}}, {Calls: calls}}
}

// The chicks.posts defaults (pkg/config DefaultPosts*, DefaultProgress*),
// which the rows run with; written out so that the test builds on a
// Mother without them, and fails there.
const (
	postsPerMinute    = 4
	postsBurst        = 5
	progressPerMinute = 20
	progressBurst     = 20
)

// postsPace is the most notices and progress lines chicks.posts lets
// a chick that ran for d post, with slack for the folded posts.
func postsPace(d time.Duration) (notices, progress int) {
	mins := d.Minutes()
	notices = postsBurst + int(math.Ceil(mins*postsPerMinute)) + 2
	progress = progressBurst + int(math.Ceil(mins*progressPerMinute)) + 1
	return notices, progress
}

var postsChickEnd = regexp.MustCompile(`\(chick (c-[0-9a-zA-Z-]+) · `)

// postsNotices: one chick, on the terminal: 300 attachments and 300
// memory updates in one turn, 1,000 skills and 1,000 output files.
func postsNotices(t *testing.T, api *client.Client) {
	m := &postsModel{}
	skills := `i=0; while [ $i -lt 1000 ]; do mkdir -p skills/s$i; printf -- '---\nname: s%d\ndescription: skill %d\n---\n' $i $i > skills/s$i/SKILL.md; echo $i > outputs/o$i.txt; i=$((i+1)); done`
	m.row("flood", postsFloodTurns(300, 300, skills)...)
	fake := ollamatest.NewFunc(m.turn)
	defer fake.Close()
	data, _ := chickData(t, api, nil)
	p := startChickMother(t, data, chickEnv(fake))
	start := time.Now()
	io.WriteString(p.stdin, "flood the channel\n")
	p.waitCount(t, "· tier local ·", 1, 4*time.Minute)
	took := time.Since(start)
	out := p.out()
	id := ""
	if mm := postsChickEnd.FindStringSubmatch(out); mm != nil {
		id = mm[1]
	}
	notices := strings.Count(out, "[attached ") + strings.Count(out, "🧠 Chick") + strings.Count(out, "📚 Chick") + strings.Count(out, "more than chicks.posts")
	progress := strings.Count(out, "] → ")
	maxN, maxP := postsPace(took)
	t.Logf("chick %s ran %s: %d notices posted (pace %d), %d progress lines (pace %d), stdout %d bytes", id, took.Round(time.Second), notices, maxN, progress, maxP, len(out))
	if notices > maxN {
		t.Errorf("300 attachments, 300 memory updates and 1,000 skills: %d notices posted in %s, want at most %d (chicks.posts)", notices, took.Round(time.Second), maxN)
	}
	if progress > maxP {
		t.Errorf("%d progress lines in %s, want at most %d (chicks.posts.progress*)", progress, took.Round(time.Second), maxP)
	}
	if !strings.Contains(out, "more files it attached") || !strings.Contains(out, "more skill notices") || !strings.Contains(out, "of this channel's memory, all applied") {
		t.Errorf("no folded post naming the files, skills and memory updates:\n%s", tail(out, 3000))
	}
	// Nothing lost.
	chDir := filepath.Join(data, "workspace", "channels", "cli", "local")
	if id != "" {
		files, _ := filepath.Glob(filepath.Join(chDir, "scratch", "chicks", id, "out", "f*.txt"))
		outs, _ := filepath.Glob(filepath.Join(chDir, "scratch", "chicks", id, "outputs", "o*.txt"))
		if len(files) != 300 || len(outs) != 1000 {
			t.Errorf("%d attached and %d output files on disk, want 300 and 1000", len(files), len(outs))
		}
	}
	mem, _ := os.ReadFile(filepath.Join(chDir, "MEMORY.md"))
	if n := len(strings.Fields(string(mem))); n != 300 {
		t.Errorf("MEMORY.md holds %d updates, want 300", n)
	}
	sk, _ := os.ReadDir(filepath.Join(chDir, "skills"))
	// chicks.skills.maxCount (100 by default) keeps the first 100; the
	// other 900 are refused, and their notices folded with the rest.
	if len(sk) != postsSkillsKept {
		t.Errorf("%d skills stored, want %d (chicks.skills.maxCount)", len(sk), postsSkillsKept)
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("exit %d\n%s", code, p.errs())
	}
}

// postsReport: a chick leaves 3,000 output files with 200-character
// names (relay mode). The result logged in log.jsonl and Mother's next
// prompt stay within a few KB of what they were; what she reads of it is
// charged to the chick.
func postsReport(t *testing.T, api *client.Client) {
	m := &postsModel{}
	m.row("names", ollamatest.Turn{Calls: []ollamatest.Call{bashCall("names",
		// One process for the 3,000 files: a shell loop forks a printf
		// for each name, which under make test's load ran past the bash
		// tool's timeout with 1,250 made.
		`mkdir -p outputs; awk 'BEGIN{for(i=0;i<3000;i++){f=sprintf("outputs/%0200d",i); printf "\n" > f; close(f)}}'; echo made`)}})
	fake := ollamatest.NewFunc(m.turn)
	defer fake.Close()
	data, _ := chickData(t, api, nil)
	p := startChickMother(t, data, chickEnv(fake))
	io.WriteString(p.stdin, "write long names\n")
	p.waitCount(t, "· tier local ·", 1, 4*time.Minute)
	before := m.motherPrompts()
	io.WriteString(p.stdin, "hello again\n")
	p.waitOut(t, "Hello.", 2*time.Minute)
	after := m.motherPrompts()
	out := p.out()
	id := ""
	if mm := postsChickEnd.FindStringSubmatch(out); mm != nil {
		id = mm[1]
	}
	// The line as stored (a scanner's line limit would skip a long one).
	var logged, text int
	b, _ := os.ReadFile(filepath.Join(data, "workspace", "channels", "cli", "local", "log.jsonl"))
	for _, line := range strings.Split(string(b), "\n") {
		var msg struct{ Text string }
		if json.Unmarshal([]byte(line), &msg) == nil && strings.HasPrefix(msg.Text, "[chick "+id+", goal: ") {
			logged, text = len(line), len(msg.Text)
		}
	}
	grew := after[len(after)-1] - before[0]
	charged := reportTokens(t, data, id)
	t.Logf("chick %s: result's line in log.jsonl %d bytes; Mother's prompt %d bytes before, %d after (+%d, %d model calls for the next message); %d tokens charged to the chick for it (ledger total %d)",
		id, logged, before[0], after[len(after)-1], grew, len(after)-len(before), charged, ledgerTokens(t, data, id))
	if logged == 0 || logged > 8<<10 {
		t.Errorf("the chick's result's line in log.jsonl is %d bytes, want at most 8 KiB", logged)
	}
	if grew > 16<<10 {
		t.Errorf("Mother's next prompt grew by %d bytes, want at most 16 KiB", grew)
	}
	if charged < int64(text) || text == 0 {
		t.Errorf("%d tokens charged to chick %s for its %d-byte result Mother's model reads, want at least one a byte", charged, id, text)
	}
	files, _ := filepath.Glob(filepath.Join(data, "workspace", "channels", "cli", "local", "scratch", "chicks", id, "outputs", "*"))
	if len(files) != 3000 {
		t.Errorf("%d output files on disk, want 3000", len(files))
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("exit %d\n%s", code, p.errs())
	}
}

// postsDiscord: on the Discord wire fake, a chick attaches 50 files,
// updates the memory 50 times and leaves 1,000 output files (relay
// mode): the messages the fake receives stay within the pace.
func postsDiscord(t *testing.T, api *client.Client) {
	m := &postsModel{}
	m.row("discord", postsFloodTurns(50, 50, `i=0; while [ $i -lt 1000 ]; do echo $i > outputs/an-output-file-with-a-rather-long-name-number-$i.txt; i=$((i+1)); done`)...)
	fake := ollamatest.NewFunc(m.turn)
	defer fake.Close()
	dc := newDiscordFake(t, 0)
	data, _ := chickData(t, api, map[string]any{
		"adapters": map[string]any{"discord": map[string]any{
			"type": "discord", "botToken": "test-token", "apiURL": dc.URL, "guildId": dc.GuildID(),
			"admins": []string{dMario.ID}, "dm": "none",
		}},
	})
	d := &daemon{stderr: &lockedBuffer{}, done: make(chan error, 1)}
	d.cmd = exec.Command(motherBin, "--log-level", "info", data)
	// Not chickEnv: its DISCORD_BOT_TOKEN would override the fake's token.
	d.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "MOTHER_OLLAMA_URL=" + fake.URL, "MOTHER_MODEL_ID=" + motherModel}
	d.cmd.Stdout, d.cmd.Stderr = d.stderr, d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		d.stop(t)
		if t.Failed() {
			t.Logf("mother's log:\n%s", tail(d.stderr.String(), 8000))
		}
	})
	dc.Wait(t, 30*time.Second, "mother on the gateway", func() bool { return dc.ConnectedLocked() == 1 })
	posts := func() int {
		n := 0
		for _, r := range dc.Requests() {
			if r.Method == "POST" && strings.HasSuffix(r.Path, "/messages") {
				n++
			}
		}
		return n
	}
	start, before := time.Now(), posts()
	dc.Say(dGeneral, dMario, "<@"+dc.Bot().ID+"> discord flood")
	var id string
	dc.Wait(t, 4*time.Minute, "the chick's result", func() bool {
		for _, msg := range dc.MessagesLocked(dGeneral) {
			if mm := postsChickEnd.FindStringSubmatch(msg.Content); mm != nil {
				id = mm[1]
				return true
			}
		}
		return false
	})
	time.Sleep(2 * time.Second) // the last parts of a split result
	took := time.Since(start)
	sent := posts() - before
	maxN, maxP := postsPace(took)
	// Besides the notices and the details of the tool calls shown: the
	// working message and the result (at most two parts).
	bound := maxN + maxP + 3
	t.Logf("chick %s ran %s: the Discord fake received %d messages (bound %d)", id, took.Round(time.Second), sent, bound)
	if sent > bound {
		t.Errorf("50 attachments, 50 memory updates and 1,000 output files: the Discord fake received %d messages in %s, want at most %d", sent, took.Round(time.Second), bound)
	}
	var folded bool
	for _, msg := range dc.Messages(dGeneral) {
		if strings.Contains(msg.Content, "more than chicks.posts") {
			folded = true
		}
	}
	if !folded {
		t.Errorf("no folded post in the channel")
	}
	if id != "" {
		files, _ := filepath.Glob(filepath.Join(data, "workspace", "channels", "discord", dGeneral, "scratch", "chicks", id, "outputs", "*"))
		if len(files) != 1000 {
			t.Errorf("%d output files on disk, want 1000", len(files))
		}
	}
}
