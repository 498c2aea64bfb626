package main

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// budgetsBytesPerToken is how the fake model counts tokens: about four
// bytes a token, as real tokenizers do on English and code.
const budgetsBytesPerToken = 4

// budgetsChickSpent is what the ledger charged the chicks' own calls (not
// the reports Mother's model read about them), and how many calls.
func budgetsChickSpent(t *testing.T, data string) (tokens int64, calls int) {
	t.Helper()
	for _, e := range ledgerLines(data) {
		if e.Kind == "" && e.Chick != "" && !e.Report {
			tokens += e.In + e.Out
			calls++
		}
	}
	return tokens, calls
}

// budgetsRun runs one chick with budgets.chickTokens budget against a fake
// that counts tokens as a real model does and honours num_predict. The
// chick's model asks for a new command every turn (its results differ, so
// no guard stops it) until the broker refuses a call. It returns the
// channel's output, the tokens the ledger charged the chick, and the
// num_predict of each chick call the model server received.
func budgetsRun(t *testing.T, budget int) (out string, spent int64, predicts []float64) {
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	data, _ := chickData(t, api, map[string]any{"budgets": map[string]any{"chickTokens": budget}})
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if r.Model == motherModel {
			if !hasToolResult(r) {
				return motherTurn("Count for a long time.")
			}
			return ollamatest.Turn{Text: "Counting."}
		}
		n := len(toolResults(r))
		return ollamatest.Turn{Text: fmt.Sprintf("Step %d.", n+1), Calls: []ollamatest.Call{{Name: "bash", Args: map[string]any{"label": fmt.Sprintf("step %d", n+1), "command": fmt.Sprintf("seq %d %d", 1000*n, 1000*n+40)}}}}
	})
	fake.SetRealUsage(budgetsBytesPerToken)
	defer fake.Close()
	p := startChickMother(t, data, chickEnv(fake))
	io.WriteString(p.stdin, "count\n")
	p.stdin.Close()
	if code := p.wait(t, 4*time.Minute); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, p.out(), p.errs())
	}
	for _, r := range fake.Requests() {
		if r.Model == chickModel {
			v, _ := r.Options["num_predict"].(float64)
			predicts = append(predicts, v)
		}
	}
	spent, _ = budgetsChickSpent(t, data)
	return p.out(), spent, predicts
}

// TestBudgetsChickSpendsItsBudget: a chick with a budget of 50,000 tokens
// spends at least 90% of it before the broker stops it, and never more.
// Before, every call reserved a token per byte of its whole prompt plus
// the tier's 8,192 output tokens, so the chick was stopped near two
// thirds spent.
func TestBudgetsChickSpendsItsBudget(t *testing.T) {
	t.Parallel()
	const budget = 50000
	out, spent, predicts := budgetsRun(t, budget)
	t.Logf("spent %d of %d tokens in %d calls; num_predict sent: %v", spent, budget, len(predicts), predicts)
	if spent > budget {
		t.Errorf("the chick spent %d tokens, over its budget of %d", spent, budget)
	}
	if spent < budget*9/10 {
		t.Errorf("the chick was stopped after spending %d of its %d tokens (%d%%), want at least 90%%\n%s", spent, budget, spent*100/budget, tail(out, 3000))
	}
	if !strings.Contains(out, "budget") {
		t.Errorf("the channel does not say the budget stopped the chick:\n%s", tail(out, 3000))
	}
}

// TestBudgetsSmallBudgetFirstCall: a chick whose budget holds its first
// prompt but not the tier's whole output limit besides makes its first
// call, with the output limit lowered to what is left and sent as
// num_predict. Before, that call was refused ("may cost up to 16,047").
func TestBudgetsSmallBudgetFirstCall(t *testing.T) {
	t.Parallel()
	const budget = 12000
	out, spent, predicts := budgetsRun(t, budget)
	t.Logf("spent %d of %d tokens in %d calls; num_predict sent: %v", spent, budget, len(predicts), predicts)
	if len(predicts) == 0 {
		t.Fatalf("no chick call reached the model server:\n%s", tail(out, 3000))
	}
	if predicts[0] < 256 || predicts[0] >= 8192 {
		t.Errorf("the first call was sent with num_predict %v, want the budget's rest after the prompt (at least 256, under the tier's 8192)", predicts[0])
	}
	if spent > budget {
		t.Errorf("the chick spent %d tokens, over its budget of %d", spent, budget)
	}
}

// TestBudgetsPlainErrorThroughBinary: a model server that answers HTTP 500
// every time, then one that refuses the key, then a budget Mother's own
// calls cannot pass: the terminal reads one plain sentence each, not the
// error chain ("Error: transient: ollama: HTTP 500: ...").
func TestBudgetsPlainErrorThroughBinary(t *testing.T) {
	t.Parallel()
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		switch u := r.LastUser(); {
		case strings.HasSuffix(u, "fail"):
			return ollamatest.Turn{Status: 500, Error: "llama runner process has terminated: exit status 2"}
		case strings.HasSuffix(u, "key"):
			return ollamatest.Turn{Status: 401, Error: "unauthorized"}
		}
		return ollamatest.Turn{Text: "fine"}
	})
	defer fake.Close()
	data := t.TempDir()
	r := runMother(t, "fail\nkey\n", []string{"MOTHER_OLLAMA_URL=" + fake.URL}, "--cli", data)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	want := []string{"My model server failed to answer, even after retries; try again in a moment.", "The model provider refused my API key; the owner needs to check the key in config.json."}
	if len(lines) != len(want) {
		t.Fatalf("stdout has %d lines, want %d:\n%s", len(lines), len(want), r.stdout)
	}
	for i, l := range lines {
		if l != want[i] {
			t.Errorf("line %d = %q, want %q", i+1, l, want[i])
		}
	}
	if !strings.Contains(r.stderr, "llama runner process has terminated") {
		t.Errorf("the log lacks the provider's own error:\n%s", r.stderr)
	}
}
