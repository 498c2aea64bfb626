package mother

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/recall"
	"github.com/mother-chat/mother/pkg/store"
)

// Recaller searches the channels' history (a *recall.Indexer). Every
// method takes one channel and returns only that channel's documents;
// which channel a run may name is mayRecallChannel's decision.
type Recaller interface {
	Search(ctx context.Context, adapter, channelID, query string, limit int) ([]recall.Hit, error)
	Around(ctx context.Context, adapter, channelID, id string, before, after int) ([]recall.Doc, int, error)
	IsDM(ctx context.Context, adapter, channelID string) (bool, error)
}

// Limits of the recall tools' arguments.
const (
	recallDefaultLimit  = 5
	recallMaxLimit      = 20
	recallDefaultAround = 5
	recallMaxAround     = 25
)

// recallTools are Mother's recall and recall_read.
func (m *Mother) recallTools() []agent.Tool {
	return []agent.Tool{recallTool{m}, recallReadTool{m}}
}

// recallTarget resolves the channel a recall call names ("" for the
// run's own; "<id>" on the run's adapter; "<adapter>/<id>") and checks
// that the run may search it.
func (m *Mother) recallTarget(ctx context.Context, tool, channel string) (adapter, channelID string, err error) {
	info, ok := chat.RunInfoFrom(ctx)
	if !ok || info.Adapter == "" || info.ChannelID == "" {
		return "", "", fmt.Errorf("%s: no channel: history can only be searched inside a channel's run", tool)
	}
	adapter, channelID = info.Adapter, info.ChannelID
	if c := strings.TrimSpace(channel); c != "" {
		if a, id, found := strings.Cut(c, "/"); found {
			adapter, channelID = a, id
		} else {
			channelID = c
		}
		if store.ValidName(adapter) != nil || store.ValidName(channelID) != nil {
			return "", "", fmt.Errorf("channel: %q is not a channel; give <adapter>/<channel id> or leave it out for this channel", channel)
		}
	}
	if adapter == info.Adapter && channelID == info.ChannelID {
		return adapter, channelID, nil
	}
	isDM, err := m.recall.IsDM(ctx, adapter, channelID)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", tool, err)
	}
	// Which channel a run may name is mayRecallChannel's decision (roles:
	// recall.otherChannels, for the person the run acts for); to is
	// qualified, so only the run's own channel (handled above) is "the
	// same".
	if sentence, ok := m.mayRecallChannel(ctx, info.Adapter, info.ChannelID, chat.QualifiedID(adapter, channelID), info.ActingFor, isDM); !ok {
		m.logger.Info("recall of another channel refused", "channel", info.QualifiedChannel(), "asked", chat.QualifiedID(adapter, channelID), "user", info.ActingFor)
		return "", "", errors.New(sentence)
	}
	return adapter, channelID, nil
}

type recallTool struct{ m *Mother }

func (recallTool) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name: "recall",
		Description: "Search this channel's whole history (messages, your answers, chick results, its MEMORY.md), months back, by words " +
			"(and by meaning where an embedding model is configured). Use it for \"what did we say/decide about X\". Returns the best hits, each " +
			"with its id, date and time, who and what kind; read around a hit with recall_read. An admin may name another channel (\"<adapter>/<id>\").",
		Parameters: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{
"query":{"type":"string","description":"words to look for"},
"channel":{"type":"string","description":"another channel, <adapter>/<id> (admins only); leave out for this channel"},
"limit":{"type":"integer","minimum":1,"maximum":%d,"description":"how many hits (default %d)"}},"required":["query"]}`, recallMaxLimit, recallDefaultLimit)),
	}
}

func (t recallTool) Run(ctx context.Context, raw json.RawMessage) (agent.Result, error) {
	var a struct {
		Query   string `json:"query"`
		Channel string `json:"channel"`
		Limit   int    `json:"limit"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return agent.Result{}, fmt.Errorf("arguments: %w", err)
	}
	if strings.TrimSpace(a.Query) == "" {
		return agent.Result{}, errors.New("query: missing; give the words to look for")
	}
	adapter, channelID, err := t.m.recallTarget(ctx, "recall", a.Channel)
	if err != nil {
		return agent.Result{}, err
	}
	// The message the run answers is in her context already, and it
	// matches its own words best: it is left out.
	trigger := ""
	if rl, ok := ctx.Value(runLogKey{}).(runLog); ok {
		trigger = rl.trigger
	}
	text, err := t.m.recallSearch(ctx, adapter, channelID, a.Query, a.Limit, trigger)
	if err != nil {
		return agent.Result{}, err
	}
	return agent.Result{Text: text}, nil
}

type recallReadTool struct{ m *Mother }

func (recallReadTool) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name:        "recall_read",
		Description: "Read the messages around a hit of recall (by its id): the ones before and after it, in order.",
		Parameters: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{
"id":{"type":"string","description":"the id of a recall hit"},
"before":{"type":"integer","minimum":0,"maximum":%[1]d,"description":"messages before it (default %[2]d)"},
"after":{"type":"integer","minimum":0,"maximum":%[1]d,"description":"messages after it (default %[2]d)"},
"channel":{"type":"string","description":"the channel the hit is from, if not this one"}},"required":["id"]}`, recallMaxAround, recallDefaultAround)),
	}
}

func (t recallReadTool) Run(ctx context.Context, raw json.RawMessage) (agent.Result, error) {
	var a struct {
		ID      string `json:"id"`
		Before  *int   `json:"before"`
		After   *int   `json:"after"`
		Channel string `json:"channel"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return agent.Result{}, fmt.Errorf("arguments: %w", err)
	}
	if strings.TrimSpace(a.ID) == "" {
		return agent.Result{}, errors.New("id: missing; give the id of a recall hit")
	}
	around := func(p *int) int {
		if p == nil {
			return recallDefaultAround
		}
		return max(0, min(*p, recallMaxAround))
	}
	adapter, channelID, err := t.m.recallTarget(ctx, "recall_read", a.Channel)
	if err != nil {
		return agent.Result{}, err
	}
	text, err := t.m.recallRead(ctx, adapter, channelID, a.ID, around(a.Before), around(a.After))
	if err != nil {
		return agent.Result{}, err
	}
	return agent.Result{Text: text}, nil
}

// recallRefusal is an answer that refuses a recall call (a bad id), as
// opposed to a failure.
type recallRefusal struct{ error }

// Refusal marks it for the nest.
func (recallRefusal) Refusal() bool { return true }

// recallSearch is the text of the best limit hits of query in the
// channel, leaving out message exclude.
func (m *Mother) recallSearch(ctx context.Context, adapter, channelID, query string, limit int, exclude string) (string, error) {
	if limit <= 0 {
		limit = recallDefaultLimit
	}
	limit = min(limit, recallMaxLimit)
	hits, err := m.recall.Search(ctx, adapter, channelID, query, limit+1)
	if err != nil {
		m.logger.Error("recall failed", "channel", chat.QualifiedID(adapter, channelID), "err", err)
		return "", errors.New("the history cannot be searched right now")
	}
	hits = slices.DeleteFunc(hits, func(h recall.Hit) bool { return exclude != "" && h.ID == exclude && h.Kind != recall.KindMemory })
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return recall.FormatHits(chat.QualifiedID(adapter, channelID), query, hits, time.Local), nil
}

// recallRead is the text of the messages around id in the channel.
func (m *Mother) recallRead(ctx context.Context, adapter, channelID, id string, before, after int) (string, error) {
	docs, at, err := m.recall.Around(ctx, adapter, channelID, strings.TrimSpace(id), before, after)
	if errors.Is(err, recall.ErrNotFound) {
		return "", recallRefusal{fmt.Errorf("id: %q: %w", id, err)}
	}
	if err != nil {
		m.logger.Error("recall_read failed", "channel", chat.QualifiedID(adapter, channelID), "err", err)
		return "", errors.New("the history cannot be read right now")
	}
	return recall.FormatAround(chat.QualifiedID(adapter, channelID), docs, at, time.Local), nil
}

// ChickRecall searches the chick's own channel's history (the nest's
// Recall); a chick never names a channel.
func (m *Mother) ChickRecall(ctx context.Context, in hatchery.Info, query string, limit int) (string, error) {
	if m.recall == nil {
		return "", recallRefusal{errors.New("Mother keeps no index of the channel's history")}
	}
	return m.recallSearch(ctx, in.Adapter, in.ChannelID, query, limit, "")
}

// ChickRecallRead reads around a hit in the chick's own channel.
func (m *Mother) ChickRecallRead(ctx context.Context, in hatchery.Info, id string, before, after int) (string, error) {
	if m.recall == nil {
		return "", recallRefusal{errors.New("Mother keeps no index of the channel's history")}
	}
	return m.recallRead(ctx, in.Adapter, in.ChannelID, id, max(0, min(before, recallMaxAround)), max(0, min(after, recallMaxAround)))
}
