package main

import (
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// What a chick sends back, its model calls (issue 42, item 3): with its
// leaked token a chick's program sends Generate calls carrying many large
// images, from three chicks at once. They are refused unread past
// chicks.calls.maxRequestBytes, refused before a provider past
// chicks.calls.maxImages, and the largest calls allowed, from three
// chicks at once, raise Mother's RSS by at most callsRSSBound; images are
// reserved by their size in the ledger; the control: a call with a small
// image is answered.

// callsRSSBound is how far Mother's RSS may rise while three chicks send
// their largest calls (the goal).
const callsRSSBound = 64 << 20

// The calls of the row, as the attack program's flags.
const (
	// callsHuge is the call: 12 images of 5 MiB (60 MiB, under
	// the 64 MiB gRPC took before).
	callsHuge = "-images 12 -image-bytes 5242880 -parallel 1 -rounds 1 -max 16 -system HOSTILE-CALLS-HUGE"
	// callsLargest is the largest call the defaults allow, two at once
	// (chicks.maxModelCallsPerChick), three times: 4 images of 512 KiB
	// (chicks.calls.maxImages, maxImageBytes 2m) and 1 MB of text,
	// 3.1 MB in all (maxRequestBytes 3m).
	callsLargest = "-images 4 -image-bytes 524288 -text-bytes 1000000 -parallel 2 -rounds 3 -max 18 -system HOSTILE-CALLS-LARGEST"
	// callsMany: five small images, one more than a call may have.
	callsMany = "-images 5 -image-bytes 1024 -parallel 1 -rounds 1 -max 16 -system HOSTILE-CALLS-MANY"
	// callsSmall and callsBig differ in their one image's size only
	// (16 KiB, 2 MiB): the ledger tells them apart by their output limit
	// (16, 17).
	callsSmall = "-images 1 -image-bytes 16384 -parallel 1 -rounds 1 -max 16 -system HOSTILE-CALLS-SMALL"
	callsBig   = "-images 1 -image-bytes 2097152 -parallel 1 -rounds 1 -max 17 -system HOSTILE-CALLS-BIG"
)

// callsImageBytesPerToken is the least rate images are reserved at
// (broker.ImageBytesPerToken; written here so that the test builds on
// the code before it).
const callsImageBytesPerToken = 1024

// TestHostileBackCalls runs the rows of "what a chick sends back" that
// are model calls, from inside real chicks.
func TestHostileBackCalls(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	buildAttack(t)
	plainMother(t)
	t.Run("Images", func(t *testing.T) { callsImages(t, api) })
}

// callsRows are the row words of the three chicks.
var callsRows = []string{"callsa", "callsb", "callsc"}

func callsImages(t *testing.T, api *client.Client) {
	h := newHostileModel(api)
	for _, w := range callsRows {
		h.row(w,
			attackCall("huge", "calls", callsHuge),
			attackCall("largest", "calls", callsLargest),
			attackCall("many", "calls", callsMany),
			attackCall("small", "calls", callsSmall),
			attackCall("big", "calls", callsBig))
	}
	var (
		p  *chickProc
		mu sync.Mutex
		// Mother's RSS before the first attack call, then its highest.
		rss = newRSSPeak(20 * time.Millisecond)
		// at is how many chicks reached the largest calls: they wait
		// for each other, so that the three send at once.
		at       int
		together = make(chan struct{})
	)
	for _, w := range callsRows {
		h.onTurn[w] = func(_ leaked, done int) {
			switch done {
			case 0:
				rss.start(p.cmd.Process.Pid)
			case 1:
				mu.Lock()
				at++
				if at == len(callsRows) {
					close(together)
				}
				mu.Unlock()
				select {
				case <-together:
				case <-time.After(90 * time.Second):
				}
			}
		}
	}
	fake := ollamatest.NewFunc(h.turn)
	defer fake.Close()
	// Room in every budget: the row measures memory, and a call of 8 MB
	// reserves a token a byte.
	var data string
	p, data = hostileMotherBin(t, plainMother(t), api, h, fake,
		map[string]any{"budgets": map[string]any{"chickTokens": 1 << 40, "userDailyTokens": 1 << 40}}, map[string]any{"timeout": "6m"})
	for _, w := range callsRows {
		io.WriteString(p.stdin, w+" model calls\n")
	}
	p.waitCount(t, "(chick c-", len(callsRows), 5*time.Minute)
	base, peak := rss.end()
	after := vmRSS(p.cmd.Process.Pid)
	out := p.out()
	mu.Lock()
	t.Logf("Mother's RSS: %d MB before, %d MB at most while three chicks sent their calls, %d MB after", base>>20, peak>>20, after>>20)
	if base <= 0 || peak-base > callsRSSBound {
		t.Errorf("Mother's RSS went from %d MB to %d MB while three chicks sent model calls, want within %d MB", base>>20, peak>>20, callsRSSBound>>20)
	}
	mu.Unlock()
	lines := regexp.MustCompile(`CALLS(ERR)? HOSTILE-CALLS-[^\n]*`).FindAllString(out, -1)
	t.Logf("the calls:\n%s", strings.Join(lines, "\n"))
	count := func(re string) int { return len(regexp.MustCompile(re).FindAllString(out, -1)) }
	// The call: refused from its length, unread (gRPC's words,
	// which a chick reads as such), and Mother's log names the setting.
	if n := count(`CALLS HOSTILE-CALLS-HUGE answered=0 refused=1`); n != len(callsRows) {
		t.Errorf("12 images of 5 MiB: refused in %d of %d chicks, want all", n, len(callsRows))
	}
	if n := count(`CALLSERR HOSTILE-CALLS-HUGE 1x ResourceExhausted: grpc: received message larger than max \(629\d{5} vs\. 3145728\)`); n != len(callsRows) {
		t.Errorf("12 images of 5 MiB: %d of %d refusals say the call is larger than the 3 MiB Mother reads", n, len(callsRows))
	}
	if n := strings.Count(p.errs(), "model call refused unread"); n != len(callsRows) || !strings.Contains(p.errs(), "chicks.calls.maxRequestBytes") {
		t.Errorf("Mother's log tells %d of %d refusals of a call for its size, naming chicks.calls.maxRequestBytes", n, len(callsRows))
	}
	if n := count(`CALLS HOSTILE-CALLS-LARGEST answered=6 refused=0`); n != len(callsRows) {
		t.Errorf("the largest calls allowed: all six answered in %d of %d chicks", n, len(callsRows))
	}
	if n := count(`CALLSERR HOSTILE-CALLS-MANY 1x InvalidArgument: model call refused: it carries 5 images, more than the 4 a call may have \(chicks.calls.maxImages\)`); n != len(callsRows) {
		t.Errorf("five images: refused in %d of %d chicks, want all, naming chicks.calls.maxImages", n, len(callsRows))
	}
	// The control.
	if n := count(`CALLS HOSTILE-CALLS-SMALL answered=1 refused=0`); n != len(callsRows) {
		t.Errorf("the control, a call with a 16 KiB image: answered in %d of %d chicks", n, len(callsRows))
	}
	// Images reserved by their size: the two calls differ in one image,
	// 16 KiB and 4 MiB.
	for _, w := range callsRows {
		id := h.leak(w).ID
		small, big := callsReserved(data, id, 16), callsReserved(data, id, 17)
		// 3,072 tokens against the least an image counts (85), less
		// some slack.
		want := int64(2*1024*1024/callsImageBytesPerToken - 100)
		t.Logf("chick %s: reserved %d input tokens for a 16 KiB image, %d for a 2 MiB one", id, small, big)
		if small <= 0 || big-small < want {
			t.Errorf("chick %s: the ledger reserved %d input tokens for a call with a 16 KiB image and %d for the same with a 2 MiB one, want the second at least %d more", id, small, big, want)
		}
	}
	if t.Failed() {
		t.Logf("the channel:\n%s", tail(out, 4000))
	}
	p.stdin.Close()
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("exit %d\n%s", code, p.errs())
	}
}

// callsReserved is the input tokens the ledger reserved for chick id's
// call with output limit rout (-1: none).
func callsReserved(data, id string, rout int64) int64 {
	found := int64(-1)
	for _, e := range ledgerLines(data) {
		if e.Chick == id && e.Kind == "reserve" && e.ReserveOut == rout {
			found = e.ReserveIn
		}
	}
	return found
}
