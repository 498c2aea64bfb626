package hatchery

// Workspace is where a chick's files live inside its container.
const Workspace = "/workspace"

// ChannelFiles are the entries of a channel directory a chick receives
// (decision 3): memory, attachments, scratch, skills, and the daily logs
// (the channel's grep-able memory). Not log.jsonl or context.jsonl, and
// nothing outside the channel.
var ChannelFiles = []string{"MEMORY.md", "attachments", "scratch", "skills", "daily"}

// MaxPackBytes caps what one chick receives at start.
const MaxPackBytes = 1 << 30

// Files says what a chick receives at start.
type Files struct {
	// ChannelDir is the channel's directory on Mother's side.
	ChannelDir string
	// SharedSkills is the workspace's skills/ directory; its entries go to
	// /workspace/skills/ first, and the channel's own skills override them
	// on a name clash.
	SharedSkills string
}

// Labels every chick container carries, so Mother can find and reap
// strays after a crash (decision 4).
const (
	LabelChickID  = "mother.chick.id"
	LabelChannel  = "mother.channel"
	LabelInstance = "mother.instance"
	LabelTier     = "mother.tier"
)

// Environment variables a chick is started with. These, and nothing Mother
// was given, are its whole environment.
const (
	EnvAddr    = "MOTHER_ADDR"
	EnvToken   = "MOTHER_TOKEN"
	EnvChickID = "MOTHER_CHICK_ID"
	// EnvCA is the nest's CA certificate (PEM, public): the chick trusts
	// only it when dialling Mother over TLS.
	EnvCA = "MOTHER_CA_PEM"
)
