package agent

import (
	"encoding/json"
	"time"

	"github.com/mother-chat/mother/pkg/model"
)

// EventType names what happened in a run.
type EventType string

// Event types, in the order a run emits them.
const (
	EventMessageStart EventType = "message_start"
	// EventThinking: the model is thinking before it answers (once per
	// call, when its first thought arrives). Its thoughts are not in the
	// event: they never reach a channel.
	EventThinking     EventType = "thinking"
	EventMessageDelta EventType = "message_delta"
	EventMessageEnd   EventType = "message_end"
	// EventRetry: the model call failed with a transient error and is
	// tried again after Duration; the partial message streamed so far is
	// void, and a new message_start follows.
	EventRetry           EventType = "retry"
	EventToolStart       EventType = "tool_start"
	EventToolEnd         EventType = "tool_end"
	EventCompactionStart EventType = "compaction_start"
	EventCompactionEnd   EventType = "compaction_end"
	EventRunEnd          EventType = "run_end"
)

// StopReason tells why a run ended.
type StopReason string

// Stop reasons.
const (
	StopDone       StopReason = "done"        // the model gave a final answer
	StopAborted    StopReason = "aborted"     // ctx cancelled: stop command, kill, shutdown
	StopMaxTurns   StopReason = "max_turns"   // the turn limit was reached
	StopToolErrors StopReason = "tool_errors" // circuit breaker: consecutive tool errors
	StopBudget     StopReason = "budget"      // the broker refused a call on a budget
	StopError      StopReason = "error"       // the provider failed
	// StopRepeating: the model made the same call again and again; Final
	// tells the user what was tried.
	StopRepeating StopReason = "repeating"
	// StopUnusable: the model's reply could not be used (empty, or a tool
	// call written as text that could not be read), even when asked
	// again; Final says so in plain words.
	StopUnusable StopReason = "unusable"
)

// Event is one platform-neutral thing that happened in a run. Adapters render
// it; the chick streams it to Mother. Which fields are set depends on Type.
type Event struct {
	Type EventType `json:"type"`
	Time time.Time `json:"time"`

	// Text is the delta (message_delta), the whole assistant text
	// (message_end), why a compaction starts (compaction_start), or the
	// summary (compaction_end).
	Text string `json:"text,omitempty"`

	// Tool fields (tool_start, tool_end).
	ToolCallID string          `json:"toolCallId,omitempty"`
	ToolName   string          `json:"toolName,omitempty"`
	Label      string          `json:"label,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"`
	Result     string          `json:"result,omitempty"`
	// IsError marks a failed tool call or compaction.
	IsError bool `json:"isError,omitempty"`
	// Duration is the tool's run time (tool_end) or the wait before the
	// next attempt (retry).
	Duration time.Duration `json:"duration,omitempty"`
	// Attempt is the number of the attempt about to be made (retry).
	Attempt int `json:"attempt,omitempty"`

	// Usage is set on message_end (that call) and run_end (the whole run).
	Usage model.Usage `json:"usage,omitzero"`
	// AnsweredBy names the fallback that answered instead of the model
	// (message_end), or every one that did in the run (run_end), as
	// "<provider>/<model>"; empty when the model itself answered.
	AnsweredBy string `json:"answeredBy,omitempty"`

	// StopReason is set on run_end.
	StopReason StopReason `json:"stopReason,omitempty"`
	// Err is the error of a run (run_end), a retried call (retry), or a
	// failed compaction (compaction_end).
	Err string `json:"error,omitempty"`
}
