package chat

// Metadata keys Mother's dispatcher reads from ChannelMessage.Metadata.
// Adapters set them; everything else in Metadata is the adapter's own.
const (
	// MetaThreadStarter is the user id of whoever started the thread the
	// message was posted in (Slack: the parent message's author; Discord:
	// the thread's owner). When it equals the adapter's SelfID, the message
	// is in a thread Mother started and triggers a run like a mention.
	// Leave it unset for messages outside threads.
	MetaThreadStarter = "threadStarter"
)
