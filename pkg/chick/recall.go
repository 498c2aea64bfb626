package chick

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/model"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// recallTools are the chick's recall and recall_read: they search the
// history of its own channel through Mother (the nest's Recall),
// read-only. The chick names no channel: Mother searches the one it
// works for.
func (r *runner) recallTools() []agent.Tool {
	return []agent.Tool{&recallTool{r: r}, &recallReadTool{r: r}}
}

type recallTool struct{ r *runner }
type recallReadTool struct{ r *runner }

var (
	_ agent.Tool = (*recallTool)(nil)
	_ agent.Tool = (*recallReadTool)(nil)
)

func (t *recallTool) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name: "recall",
		Description: "Search your channel's whole history kept by Mother (messages, her answers, chick results, MEMORY.md), months back. " +
			"Returns the best hits with id, date, who and kind; read around one with recall_read.",
		Parameters: json.RawMessage(`{"type":"object","properties":{
"label":{"type":"string","description":"A few words shown to the user while this runs"},
"query":{"type":"string","description":"words to look for"},
"limit":{"type":"integer","minimum":1,"maximum":20,"description":"how many hits (default 5)"}},"required":["query"]}`),
	}
}

func (t *recallTool) Run(ctx context.Context, raw json.RawMessage) (agent.Result, error) {
	var a struct {
		Query string `json:"query"`
		Limit int    `json:"limit"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return agent.Result{}, fmt.Errorf("recall: invalid arguments: %v", err)
	}
	if strings.TrimSpace(a.Query) == "" {
		return agent.Result{}, fmt.Errorf("recall: query: missing; give the words to look for")
	}
	return t.r.recall(ctx, "recall", &pb.RecallRequest{Query: a.Query, Limit: int32(max(0, min(a.Limit, 20)))})
}

func (t *recallReadTool) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name:        "recall_read",
		Description: "Read the messages around a hit of recall (by its id): the ones before and after it, in order.",
		Parameters: json.RawMessage(`{"type":"object","properties":{
"label":{"type":"string","description":"A few words shown to the user while this runs"},
"id":{"type":"string","description":"the id of a recall hit"},
"before":{"type":"integer","minimum":0,"maximum":25,"description":"messages before it (default 5)"},
"after":{"type":"integer","minimum":0,"maximum":25,"description":"messages after it (default 5)"}},"required":["id"]}`),
	}
}

func (t *recallReadTool) Run(ctx context.Context, raw json.RawMessage) (agent.Result, error) {
	var a struct {
		ID     string `json:"id"`
		Before *int   `json:"before"`
		After  *int   `json:"after"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return agent.Result{}, fmt.Errorf("recall_read: invalid arguments: %v", err)
	}
	if strings.TrimSpace(a.ID) == "" {
		return agent.Result{}, fmt.Errorf("recall_read: id: missing; give the id of a recall hit")
	}
	n := func(p *int) int32 {
		if p == nil {
			return 5
		}
		return int32(max(0, min(*p, 25)))
	}
	return t.r.recall(ctx, "recall_read", &pb.RecallRequest{ReadId: a.ID, Before: n(a.Before), After: n(a.After)})
}

// recall makes one Recall call for the tool named tool.
func (r *runner) recall(ctx context.Context, tool string, req *pb.RecallRequest) (agent.Result, error) {
	var resp *pb.RecallResponse
	err := r.retry(ctx, tool, func(ctx context.Context) error {
		var err error
		resp, err = r.client.Recall(ctx, req)
		return err
	})
	if err != nil {
		if st, ok := status.FromError(err); ok {
			if st.Code() == codes.Unimplemented {
				return agent.Result{}, fmt.Errorf("%s: this Mother offers no search of the channel's history", tool)
			}
			return agent.Result{}, fmt.Errorf("%s: %s", tool, st.Message())
		}
		return agent.Result{}, fmt.Errorf("%s: %w", tool, err)
	}
	return agent.Result{Text: resp.GetResult()}, nil
}
