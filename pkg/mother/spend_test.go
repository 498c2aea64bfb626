package mother

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/events"
	"github.com/mother-chat/mother/pkg/model"
)

func TestEventRunsPauseOnCapsAndFailures(t *testing.T) {
	t.Parallel()
	reset := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	capped := &model.BudgetError{Scope: "event", Name: "check.json", Unit: "usd", Reset: reset, Msg: "budget exhausted: event check.json spent $1.00 of $1.00 today (budgets.mother.eventDailyUSD)"}
	periodic := Job{Kind: KindEvent, EventFile: "check.json", EventPeriodic: true}
	oneShot := Job{Kind: KindEvent, EventFile: "once.json"}

	p, text := budgetPause(periodic, agent.Output{StopReason: agent.StopBudget, Err: capped})
	if p == nil || !p.Until.Equal(reset) || !strings.Contains(p.Reason, "budgets.mother.eventDailyUSD") ||
		!strings.HasPrefix(text, "I paused event check.json until 2026-11-28 00:00 UTC: event check.json spent $1.00 of $1.00 today") {
		t.Errorf("at a daily cap: %+v, %q", p, text)
	}
	if p, _ := budgetPause(oneShot, agent.Output{StopReason: agent.StopBudget, Err: capped}); p != nil {
		t.Error("a one-shot event paused")
	}
	chickCap := &model.BudgetError{Scope: "chick", Msg: "budget exhausted: chick c-1"}
	if p, _ := budgetPause(periodic, agent.Output{StopReason: agent.StopBudget, Err: chickCap}); p != nil {
		t.Error("paused on a cap that does not reset")
	}

	boom := errors.New("model server said no\nmore detail")
	for failures, wantPause := range map[int]bool{0: false, 1: false, 2: true} {
		job := periodic
		job.EventFailures = failures
		r, text := eventResult(job, Outcome{Ran: true, Err: boom})
		if !r.Finished || !r.Failed || (r.Pause != nil) != wantPause || (text != "") != wantPause {
			t.Errorf("failures before %d: %+v, %q", failures, r, text)
		}
		if wantPause && (!r.Pause.Until.IsZero() || !strings.Contains(text, "its last 3 runs failed (the last with: model server said no)")) {
			t.Errorf("third failure: %+v, %q", r.Pause, text)
		}
	}
	job := oneShot
	job.EventFailures = 5
	if r, text := eventResult(job, Outcome{Ran: true, Err: boom}); r.Pause != nil || text != "" {
		t.Error("a one-shot event paused for failures")
	}
	job = periodic
	job.EventFailures = 2
	for _, o := range []Outcome{{Ran: true}, {Ran: true, Err: boom, Stopped: true}, {Skipped: true}} {
		if r, _ := eventResult(job, o); r.Failed || r.Pause != nil || !r.Finished {
			t.Errorf("%+v: %+v", o, r)
		}
	}
	if r, _ := eventResult(job, Outcome{Ran: true, Err: boom, Shutdown: true}); r.Finished || r.Failed {
		t.Errorf("a shutdown: %+v", r)
	}
	capPause := &events.Pause{Until: reset}
	if r, text := eventResult(job, Outcome{Ran: true, Err: capped, Pause: capPause}); r.Pause != capPause || r.Failed || text != "" {
		t.Errorf("a cap's pause: %+v, %q", r, text)
	}
}
