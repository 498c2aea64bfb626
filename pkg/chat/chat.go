// Package chat holds Mother's platform-neutral message model and the contract
// every chat platform adapter (terminal, Discord, Slack, ...) implements.
//
// Mother's core owns these types; adapters translate their platform's events
// into ChannelMessages and render agent events back into their platform's
// format. Adapters register a constructor by type name (see Register), so a
// new platform is one new package plus one import line in cmd/mother.
package chat

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
)

// ChannelMessage is one message seen in a channel, in the unified format
// stored in log.jsonl (one JSON object per line).
type ChannelMessage struct {
	// ID is unique within the channel; the platform's own id format is kept.
	ID string `json:"id"`
	// ChannelID is the platform's channel id (not qualified by adapter).
	ChannelID string    `json:"channelId"`
	Timestamp time.Time `json:"ts"`
	Sender    Sender    `json:"sender"`
	// Text is the message content, with platform mentions turned into
	// @username.
	Text string `json:"text"`
	// RawText is the platform's original text, when it differs.
	RawText     string              `json:"rawText,omitempty"`
	Attachments []ChannelAttachment `json:"attachments"`
	// IsMention is true when the message addresses Mother (a mention, a DM,
	// or a reply in a thread she started).
	IsMention bool `json:"isMention,omitempty"`
	// IsDM is true for a direct message (access control applies).
	IsDM bool `json:"isDM,omitempty"`
	// ReplyTo is the id of the message this one answers (threads).
	ReplyTo string `json:"replyTo,omitempty"`
	// Metadata carries platform-specific details (thread ids, guild ids).
	Metadata map[string]any `json:"metadata,omitempty"`
}

// Sender identifies who wrote a message.
type Sender struct {
	ID          string `json:"id"`
	Username    string `json:"username"`
	DisplayName string `json:"displayName,omitempty"`
	IsBot       bool   `json:"isBot"`
}

// ChannelAttachment is a file attached to a message, stored under the
// channel directory.
type ChannelAttachment struct {
	Filename string `json:"filename"`
	// LocalPath is relative to the channel directory, e.g.
	// "attachments/1734567890-report.pdf".
	LocalPath string `json:"localPath"`
	MimeType  string `json:"mimeType,omitempty"`
	Size      int64  `json:"size,omitempty"`
}

// ChannelType tells a channel from a direct message.
type ChannelType string

// Channel types.
const (
	ChannelPublic ChannelType = "channel"
	ChannelDM     ChannelType = "dm"
	ChannelGroup  ChannelType = "group"
)

// ChannelInfo describes a channel the adapter knows.
type ChannelInfo struct {
	ID   string      `json:"id"`
	Name string      `json:"name"`
	Type ChannelType `json:"type"`
}

// UserInfo describes a user the adapter knows.
type UserInfo struct {
	ID          string `json:"id"`
	Username    string `json:"username"`
	DisplayName string `json:"displayName,omitempty"`
}

// Inbox receives what an adapter hears. Mother's dispatcher implements it.
type Inbox interface {
	// Deliver hands over one platform message. Adapters call it for every
	// message they see (mentions or not); the dispatcher logs it and decides
	// whether it triggers a run. Late marks a message that arrived while
	// Mother was down (backfill).
	Deliver(ctx context.Context, adapter string, msg ChannelMessage, late bool)
	// Stop asks to abort the current run in a channel (a stop button).
	Stop(ctx context.Context, adapter, channelID, userID string)
}

// Adapter connects Mother to one chat platform account.
type Adapter interface {
	// Name is the configured adapter name ("slack-acme"), used in channel
	// paths (channels/<name>/<channelId>/) and qualified channel ids.
	Name() string
	// Start connects and begins delivering messages to in. It returns once
	// connected (or failed); delivery continues until Stop or ctx ends.
	Start(ctx context.Context, in Inbox) error
	// Stop disconnects. It is safe to call more than once.
	Stop(ctx context.Context) error
	// Channels and Users are what the adapter currently knows; they fill the
	// system prompt's user and channel lists.
	Channels() []ChannelInfo
	Users() []UserInfo
	// SelfID is Mother's own user id on the platform.
	SelfID() string
	// Post sends a standalone notice (markdown) to a channel: queue full,
	// stopping, refusals, restart notices. It returns the platform message id.
	Post(ctx context.Context, channelID, markdown string) (string, error)
	// NewReply starts rendering one agent run in a channel, answering trigger
	// (nil for runs with no triggering message, such as events).
	NewReply(ctx context.Context, channelID string, trigger *ChannelMessage, opts ReplyOptions) Reply
}

// ReplyOptions tune how one reply is rendered.
type ReplyOptions struct {
	// Title names the reply's source, such as "chick c-7f3a" or an event
	// file; adapters show it on the working message.
	Title string
	// Quiet hides tool details and usage.
	Quiet bool
}

// Reply renders one agent run (Mother's own, or a chick's) as it happens.
// Adapters own the rendering: progress on a main message, tool details in a
// thread, the final answer replacing the progress.
type Reply interface {
	// Event renders one agent event. Errors are the adapter's to log; the
	// run goes on regardless.
	Event(ctx context.Context, ev agent.Event)
	// Finish posts the final text (markdown), or an empty string to remove
	// the working message ([SILENT]). It returns the platform id of the
	// message holding the answer. Finish is called exactly once.
	Finish(ctx context.Context, markdown string) (string, error)
}

// Uploader is implemented by adapters that can post files.
type Uploader interface {
	// Upload posts a file from disk to a channel.
	Upload(ctx context.Context, channelID, path, title string) error
}

// QualifiedID joins an adapter name and a channel id: "slack-acme/C123".
func QualifiedID(adapter, channelID string) string {
	return adapter + "/" + channelID
}

// RunInfo says where and for whom a run happens. Mother puts it in the
// run's context so her tools (spawn_chick, events, memory) know the channel
// they act in; see WithRunInfo and RunInfoFrom.
type RunInfo struct {
	Adapter   string
	ChannelID string
	// UserID is who triggered the run (empty for scheduled events).
	UserID string
	// IsAdmin reports whether UserID is an admin of the adapter.
	IsAdmin bool
	// ChannelDir is the channel's directory in the store.
	ChannelDir string
}

// QualifiedChannel is "<adapter>/<channelId>".
func (r RunInfo) QualifiedChannel() string { return QualifiedID(r.Adapter, r.ChannelID) }

type runInfoKey struct{}

// WithRunInfo returns ctx carrying info.
func WithRunInfo(ctx context.Context, info RunInfo) context.Context {
	return context.WithValue(ctx, runInfoKey{}, info)
}

// RunInfoFrom returns the RunInfo in ctx, if any.
func RunInfoFrom(ctx context.Context) (RunInfo, bool) {
	info, ok := ctx.Value(runInfoKey{}).(RunInfo)
	return info, ok
}

// SortedChannels lists the channels of m by type, then name: the order
// adapters report their channels in (Adapter.Channels).
func SortedChannels(m map[string]ChannelInfo) []ChannelInfo {
	out := make([]ChannelInfo, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b ChannelInfo) int {
		if c := cmp.Compare(a.Type, b.Type); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out
}
