package mother

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/anthropic"
	"github.com/mother-chat/mother/pkg/model/anthropic/anthropictest"
	"github.com/mother-chat/mother/pkg/model/ollama"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

var (
	// sentenceChain finds an error chain's labels ("transient: ollama:").
	sentenceChain = regexp.MustCompile(`\b[a-z]+: [a-z]+:`)
	// sentencePackages are names of Mother's packages and of the wire
	// libraries, which no person needs to read.
	sentencePackages = regexp.MustCompile(`\b(ollama|openai|anthropic|broker|hatchery|transient|rpc error|response line|api\.)\b`)
)

// sentenceDoubled finds a word said twice in a row ("ollama: ollama").
func sentenceDoubled(s string) string {
	words := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r == '\'')
	})
	for i := 1; i < len(words); i++ {
		if words[i] == words[i-1] {
			return words[i]
		}
	}
	return ""
}

// checkSentence fails t unless s is one plain sentence for people.
func checkSentence(t *testing.T, what, s string) {
	t.Helper()
	var bad []string
	if s == "" || !strings.ContainsAny(s[:1], "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
		bad = append(bad, "does not start with a capital")
	}
	if strings.HasPrefix(s, "Error:") {
		bad = append(bad, `starts with "Error:"`)
	}
	if m := sentenceChain.FindString(s); m != "" {
		bad = append(bad, fmt.Sprintf("has an error chain (%q)", m))
	}
	if m := sentencePackages.FindString(s); m != "" {
		bad = append(bad, fmt.Sprintf("names a package (%q)", m))
	}
	if w := sentenceDoubled(s); w != "" {
		bad = append(bad, fmt.Sprintf("says %q twice in a row", w))
	}
	if strings.Contains(s, "\n") || len(s) > 320 {
		bad = append(bad, fmt.Sprintf("is %d bytes or more than one line", len(s)))
	}
	if !strings.HasSuffix(s, ".") {
		bad = append(bad, "does not end with a full stop")
	}
	if len(bad) > 0 {
		t.Errorf("%s: %q %s", what, s, strings.Join(bad, ", "))
	}
}

// TestErrorSentences walks every error a person can be told about, made
// by the real code against wire fakes where it has a wire: the sentence
// is plain (no chain, no package, no doubled word, one bounded line).
func TestErrorSentences(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	req := model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}
	ollamaErr := func(turn ollamatest.Turn, timeout time.Duration) error {
		fake := ollamatest.New(turn)
		defer fake.Close()
		p, err := ollama.New(fake.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := ctx
		if timeout > 0 {
			var cancel context.CancelFunc
			c, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		_, err = p.Chat(c, req, nil)
		if err == nil {
			t.Fatalf("%+v: no error", turn)
		}
		return err
	}
	// The agent's retries wrap a transient error so.
	retried := func(err error) error { return fmt.Errorf("%w (gave up after 3 attempts)", err) }

	errs := map[string]error{
		"HTTP 500": retried(ollamaErr(ollamatest.Turn{Status: 500, Error: "llama runner process has terminated"}, 0)),
		"HTTP 401": ollamaErr(ollamatest.Turn{Status: 401, Error: "unauthorized"}, 0),
		"HTTP 404": ollamaErr(ollamatest.Turn{Status: 404, Error: "model 'm' not found"}, 0),
		"HTTP 503": retried(ollamaErr(ollamatest.Turn{Status: 503, Error: "server busy"}, 0)),
		// A bad line is skipped (the reply survives it); a stream of
		// nothing usable ends before its done.
		"bad JSON stream": retried(ollamaErr(ollamatest.Turn{Raw: []string{`{"model":"m","message":{"role":"assistant","content":"x"},"done":fal`}}, 0)),
		"timeout":         ollamaErr(ollamatest.Turn{Text: "late", Delay: 5 * time.Second}, 200*time.Millisecond),
		"context window":  ollamaErr(ollamatest.Turn{Status: 500, Error: "input length exceeds the context length"}, 0),
	}
	// Connection refused: a port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p, err := ollama.New("http://"+addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, errs["connection refused"] = p.Chat(ctx, req, nil)
	// Anthropic's key refused.
	af := anthropictest.New()
	defer af.Close()
	ap, err := anthropic.New("sk-ant-wrong", af.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, errs["anthropic key refused"] = ap.Chat(ctx, model.Request{Model: "claude-sonnet-4-5", Messages: req.Messages}, nil)
	// The broker's refusals: a chick's cap, a channel's daily cap.
	for name, b := range map[string]config.Budgets{"chick cap": {ChickTokens: 100}, "channel cap": {ChannelDailyTokens: 100}} {
		errs[name] = sentenceBrokerRefusal(t, b)
	}
	// The disk: a store write on a full disk (/dev/full answers ENOSPC).
	if f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0); err == nil {
		_, werr := f.Write([]byte("a line\n"))
		f.Close()
		errs["disk full"] = fmt.Errorf("store: append to log.jsonl: %w", werr)
	}
	errs["unknown"] = errors.New("mother: compose: something odd: EOF-ish")
	errs["no answer"] = nil

	for what, err := range errs {
		s := UserError(err)
		checkSentence(t, what, s)
		t.Logf("%s: %v\n\t-> %s", what, err, s)
	}
	if s := UserError(errs["connection refused"]); !strings.Contains(s, addr) {
		t.Errorf("connection refused: %q does not say which server (%s)", s, addr)
	}

	// Chick ends, with outcomes as the hatchery and the nest write them.
	budgetMsg := sentenceBrokerRefusal(t, config.Budgets{ChickTokens: 100}).Error()
	ends := map[string]hatchery.Info{
		"crashed":                              {Record: hatchery.Record{Reason: hatchery.ReasonCrashed, Outcome: "crashed: the chick exited with code 2 without a result"}},
		"hung":                                 {Record: hatchery.Record{Reason: hatchery.ReasonHung, Outcome: "hung: no heartbeat for 30s"}},
		"killed":                               {Record: hatchery.Record{Reason: hatchery.ReasonKilled, Outcome: "killed by the operator"}},
		"cancelled":                            {Record: hatchery.Record{Reason: hatchery.ReasonKilled, Outcome: "cancelled at the request of alice"}},
		"timed out":                            {Record: hatchery.Record{Reason: hatchery.ReasonTimeout, Outcome: "timed out after 10m0s"}},
		"out of budget":                        {Record: hatchery.Record{Reason: hatchery.ReasonBudget, Outcome: budgetMsg}},
		"out of budget, reported by the chick": {Record: hatchery.Record{Reason: hatchery.ReasonBudget, Outcome: "budget exhausted: " + budgetMsg}},
		"incompatible":                         {Record: hatchery.Record{Reason: hatchery.ReasonNoStart, Outcome: "could not start: the chick image speaks wire version 1 and this Mother needs 2 or 3; rebuild the image"}},
		"model failed":                         {Record: hatchery.Record{Reason: hatchery.ReasonError, Outcome: "failed: transient: ollama: ollama: response line: Value looks like object, but can't find closing '}' symbol (gave up after 3 attempts)"}},
		"lost":                                 {Record: hatchery.Record{Reason: hatchery.ReasonLost, Outcome: "lost: its Docker host stopped answering"}},
		"flooding":                             {Record: hatchery.Record{Reason: hatchery.ReasonFlooding, Outcome: "flooding: more than 1000 events a minute"}},
		"shutdown":                             {Record: hatchery.Record{Reason: hatchery.ReasonShutdown, Outcome: "shutdown"}},
	}
	for what, in := range ends {
		in.ID = "c-1234abcd"
		s := chickEnd(in)
		checkSentence(t, "chick "+what, s)
		t.Logf("chick %s: %s\n\t-> %s", what, in.Outcome, s)
	}
}

// sentenceBrokerRefusal is a real broker's refusal of a call on budgets
// (the first call's prompt alone passes a 100-token cap).
func sentenceBrokerRefusal(t *testing.T, budgets config.Budgets) error {
	t.Helper()
	fake := ollamatest.New()
	defer fake.Close()
	cfg := &config.Config{Budgets: budgets}
	cfg.SetDefaults("")
	cfg.Budgets.ChickTokens = budgets.ChickTokens
	cfg.Chicks.Tiers["big"] = config.Tier{Provider: "ollama", Model: "big-model"}
	b, err := broker.New(broker.Options{Config: cfg, Dir: t.TempDir(), Providers: func(string) (model.Provider, error) { return ollama.New(fake.URL, nil) }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	long := model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: strings.Repeat("many words ", 20)}}}
	_, err = b.Generate(t.Context(), broker.Caller{ChickID: "c-1234abcd", Channel: "cli/local", Tier: "big"}, long, nil)
	if !errors.Is(err, model.ErrBudgetExhausted) {
		t.Fatalf("the broker's refusal: %v, want a budget error", err)
	}
	return err
}
