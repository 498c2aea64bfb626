package wire

import (
	"fmt"

	"github.com/mother-chat/mother/pkg/agent"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// names maps the string values of a domain type with a closed set of
// values to a protobuf enum and back. The domain types stay where they
// are (the chick side must not link the hatchery, the tool servers or the
// adapters); nest's tests check that every domain value has its enum.
type names[E ~int32] struct {
	to   map[string]E
	from map[E]string
}

func newNames[E ~int32](m map[string]E) names[E] {
	n := names[E]{to: m, from: make(map[E]string, len(m))}
	for s, e := range m {
		n.from[e] = s
	}
	return n
}

// toProto is the enum of s; an unknown s is UNSPECIFIED.
func (n names[E]) toProto(s string) E { return n.to[s] }

// name is the string of e; UNSPECIFIED and values this build does not
// know (a newer peer's) are "".
func (n names[E]) name(e E) string { return n.from[e] }

var (
	stopReasons = newNames(map[string]pb.StopReason{
		string(agent.StopDone):       pb.StopReason_STOP_REASON_DONE,
		string(agent.StopAborted):    pb.StopReason_STOP_REASON_ABORTED,
		string(agent.StopMaxTurns):   pb.StopReason_STOP_REASON_MAX_TURNS,
		string(agent.StopToolErrors): pb.StopReason_STOP_REASON_TOOL_ERRORS,
		string(agent.StopBudget):     pb.StopReason_STOP_REASON_BUDGET,
		string(agent.StopError):      pb.StopReason_STOP_REASON_ERROR,
		string(agent.StopRepeating):  pb.StopReason_STOP_REASON_REPEATING,
		string(agent.StopUnusable):   pb.StopReason_STOP_REASON_UNUSABLE,
	})
	roles = newNames(map[string]pb.Role{
		"user":      pb.Role_ROLE_USER,
		"assistant": pb.Role_ROLE_ASSISTANT,
		"tool":      pb.Role_ROLE_TOOL,
	})
	chickStates = newNames(map[string]pb.ChickState{
		"queued":   pb.ChickState_CHICK_STATE_QUEUED,
		"starting": pb.ChickState_CHICK_STATE_STARTING,
		"running":  pb.ChickState_CHICK_STATE_RUNNING,
		"stopping": pb.ChickState_CHICK_STATE_STOPPING,
		"done":     pb.ChickState_CHICK_STATE_DONE,
		"failed":   pb.ChickState_CHICK_STATE_FAILED,
		"killed":   pb.ChickState_CHICK_STATE_KILLED,
	})
	adapterStates = newNames(map[string]pb.AdapterState{
		"connected":    pb.AdapterState_ADAPTER_STATE_CONNECTED,
		"reconnecting": pb.AdapterState_ADAPTER_STATE_RECONNECTING,
		"down":         pb.AdapterState_ADAPTER_STATE_DOWN,
	})
	eventTypes = newNames(map[string]pb.EventType{
		"immediate": pb.EventType_EVENT_TYPE_IMMEDIATE,
		"one-shot":  pb.EventType_EVENT_TYPE_ONE_SHOT,
		"periodic":  pb.EventType_EVENT_TYPE_PERIODIC,
	})
	toolServerStates = newNames(map[string]pb.ToolServerState{
		"starting": pb.ToolServerState_TOOL_SERVER_STATE_STARTING,
		"running":  pb.ToolServerState_TOOL_SERVER_STATE_RUNNING,
		"retrying": pb.ToolServerState_TOOL_SERVER_STATE_RETRYING,
		"stopped":  pb.ToolServerState_TOOL_SERVER_STATE_STOPPED,
		"disabled": pb.ToolServerState_TOOL_SERVER_STATE_DISABLED,
	})
	toolTransports = newNames(map[string]pb.ToolTransport{
		"stdio": pb.ToolTransport_TOOL_TRANSPORT_STDIO,
		"http":  pb.ToolTransport_TOOL_TRANSPORT_HTTP,
	})
)

// StopReasonToProto converts an agent stop reason; none is UNSPECIFIED.
func StopReasonToProto(r agent.StopReason) pb.StopReason { return stopReasons.toProto(string(r)) }

// StopReasonFromProto converts back. UNSPECIFIED is none; a value this
// build does not know (a newer chick's) is agent.StopError, so a chick's
// end that cannot be understood is never taken for a success.
func StopReasonFromProto(r pb.StopReason) agent.StopReason {
	if r == pb.StopReason_STOP_REASON_UNSPECIFIED {
		return ""
	}
	if s := stopReasons.name(r); s != "" {
		return agent.StopReason(s)
	}
	return agent.StopError
}

// unknownName is how a value without a name is shown.
func unknownName[E ~int32](n names[E], e E) string {
	if s := n.name(e); s != "" {
		return s
	}
	if e == 0 {
		return "unknown"
	}
	return fmt.Sprintf("unknown (%d)", e)
}

// ChickStateToProto converts a hatchery.State ("queued", "running", ...).
func ChickStateToProto(s string) pb.ChickState { return chickStates.toProto(s) }

// ChickStateName is the hatchery.State of s, or "unknown".
func ChickStateName(s pb.ChickState) string { return unknownName(chickStates, s) }

// AdapterStateToProto converts a chat.ConnState.
func AdapterStateToProto(s string) pb.AdapterState { return adapterStates.toProto(s) }

// AdapterStateName is the chat.ConnState of s, or "unknown".
func AdapterStateName(s pb.AdapterState) string { return unknownName(adapterStates, s) }

// EventTypeToProto converts an events.Type.
func EventTypeToProto(s string) pb.EventType { return eventTypes.toProto(s) }

// EventTypeName is the events.Type of s, or "unknown".
func EventTypeName(s pb.EventType) string { return unknownName(eventTypes, s) }

// ToolServerStateToProto converts a hosttools.State.
func ToolServerStateToProto(s string) pb.ToolServerState { return toolServerStates.toProto(s) }

// ToolServerStateName is the hosttools.State of s, or "unknown".
func ToolServerStateName(s pb.ToolServerState) string { return unknownName(toolServerStates, s) }

// ToolTransportToProto converts a host tool server's transport ("stdio",
// "http").
func ToolTransportToProto(s string) pb.ToolTransport { return toolTransports.toProto(s) }

// ToolTransportName is the transport of s, or "unknown".
func ToolTransportName(s pb.ToolTransport) string { return unknownName(toolTransports, s) }
