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
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

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
	// Choice marks a click on a button of a message posted with
	// Chooser.PostChoices: Text is the chosen Choice's ID, Sender is who
	// clicked, ReplyTo is the message holding the buttons and ID is the
	// click's own id. A click is an answer, not something said: Mother
	// acts on it but neither logs it as a message nor shows it to her
	// model, and adapters never backfill clicks.
	Choice bool `json:"choice,omitempty"`
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
	// Voice marks a voice message or an audio file, which Mother hears
	// (transcribes); Seconds is how long it lasts as the platform says
	// (0: unknown, read from the file when it is OGG).
	Voice   bool    `json:"voice,omitempty"`
	Seconds float64 `json:"seconds,omitempty"`
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
	//
	// It returns nil once the message is Mother's: stored (and, if it
	// calls for one, its answer queued), or dropped for good (it can never
	// be stored: a channel id that cannot be a directory). It returns an
	// error matching ErrNotStored when Mother could not store it (a full
	// or failing disk): the adapter must then not mark the message handled
	// on its platform (no update offset confirmed, no catch-up cursor
	// moved past it, no "seen" kept) and delivers it again later, see
	// RetryReady. docs/adapters.md says what "handled" is on each
	// platform.
	Deliver(ctx context.Context, adapter string, msg ChannelMessage, late bool) error
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
	// What Post, Reply, Upload titles, choices and direct messages carry
	// is inert: it notifies nobody (see Mention and Mentioner).
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

// Choice is one button of a message posted with Chooser.PostChoices.
type Choice struct {
	// ID is what a click on the button delivers (as the Text of a
	// ChannelMessage with Choice set): opaque to the adapter, unique
	// within the message, 1 to MaxChoiceID bytes.
	ID string
	// Label is the button's text (1 to MaxChoiceLabel characters).
	Label string
	// Style colours the button (ChoiceDefault when empty).
	Style ChoiceStyle
}

// ChoiceStyle is how a button looks.
type ChoiceStyle string

// Choice styles; platforms without colours show every button alike.
const (
	ChoiceDefault ChoiceStyle = ""
	ChoicePrimary ChoiceStyle = "primary"
	ChoiceDanger  ChoiceStyle = "danger"
)

// Limits on choices, the tightest of the platforms' (Discord's custom_id
// is 100 bytes, of which adapters keep some for their own prefix; a
// Discord action row holds 5 buttons; a Slack button label 75 characters).
const (
	MaxChoices     = 5
	MaxChoiceID    = 80
	MaxChoiceLabel = 75
)

// CheckChoices validates choices for PostChoices: 1 to MaxChoices of
// them, each with a unique ID within the limit, a label and a known style.
func CheckChoices(choices []Choice) error {
	if len(choices) == 0 || len(choices) > MaxChoices {
		return fmt.Errorf("%d choices: want 1 to %d", len(choices), MaxChoices)
	}
	seen := map[string]bool{}
	for _, c := range choices {
		switch {
		case c.ID == "" || len(c.ID) > MaxChoiceID:
			return fmt.Errorf("choice id %q: want 1 to %d bytes", c.ID, MaxChoiceID)
		case seen[c.ID]:
			return fmt.Errorf("choice id %q: used twice", c.ID)
		case strings.TrimSpace(c.Label) == "" || utf8.RuneCountInString(c.Label) > MaxChoiceLabel:
			return fmt.Errorf("choice %q: want a label of 1 to %d characters", c.ID, MaxChoiceLabel)
		}
		switch c.Style {
		case ChoiceDefault, ChoicePrimary, ChoiceDanger:
		default:
			return fmt.Errorf("choice %q: unknown style %q", c.ID, c.Style)
		}
		seen[c.ID] = true
	}
	return nil
}

// Chooser is implemented by adapters that can post a message with
// buttons. A click comes back through Inbox.Deliver as a ChannelMessage
// with Choice set, from the user who clicked. The two methods belong
// together: buttons that could not be taken away would stay clickable
// after the question was answered.
type Chooser interface {
	// PostChoices posts markdown to a channel with one button per choice
	// (in order) and returns the platform id of the message holding the
	// buttons. The choices are checked with CheckChoices.
	PostChoices(ctx context.Context, channelID, markdown string, choices []Choice) (string, error)
	// EndChoices replaces the text of that message with markdown and
	// removes its buttons (the question was answered or has lapsed).
	EndChoices(ctx context.Context, channelID, messageID, markdown string) error
}

// ClickReplier is implemented by adapters that can answer a click so that
// only the user who clicked sees the answer (Discord: an ephemeral
// follow-up of the interaction; Slack: an ephemeral message).
type ClickReplier interface {
	// ReplyToClick shows markdown to the sender of click (a ChannelMessage
	// with Choice set, as the adapter delivered it) and to nobody else.
	ReplyToClick(ctx context.Context, click ChannelMessage, markdown string) error
}

// MemberLookup is implemented by adapters that can say what the platform
// knows of a person, for roles (config.Roles): references such as
// "role:<id>" (Discord guild roles), "group:<id>" (Slack user groups) or
// "chatAdmins" (a Telegram chat's administrators, a WhatsApp group's
// admins). It asks the platform by user id only; Mother caches the answer
// and bounds the wait.
type MemberLookup interface {
	// MemberRefs returns userID's references in channelID.
	MemberRefs(ctx context.Context, channelID, userID string) ([]string, error)
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
	// Kind is what the run answers: "message" (a person's message),
	// "event" or "chick" (a chick's result); empty outside Mother's runs.
	Kind string
	// Event is the event file of a scheduled event's run ("backup.json");
	// empty for any other run.
	Event string
	// EventMaySchedule: an admin allowed that event's runs to schedule
	// events of their own.
	EventMaySchedule bool
	// ActingFor is the user id whose roles the run has: the sender of a
	// message, the person a chick was started for, the person who
	// scheduled an event (empty: the channel's default role).
	ActingFor string
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
