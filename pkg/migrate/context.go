package migrate

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/store"
)

// The old context.jsonl is a session file of pi's coding agent, which both
// the TypeScript Mother and mom used (mom-redesign.md: "coding-agent
// compatible"): a header line {"type":"session", provider, modelId}, then
// entries. Version 1 files are a plain sequence (a compaction names its
// first kept entry by index); versions 2 and 3 give every entry an id and
// a parentId (a tree; the context is the path from the last entry to the
// root) and a compaction names its first kept entry by id. The context the
// old agent would have loaded is: the latest compaction's summary, then the
// entries from its first kept entry on. That is what is carried over.

// MaxCarriedMessages caps the messages carried from an old context (after
// merging each answer with its tool calls into one message). Older ones
// stay in log.jsonl, the daily logs and context.old.jsonl.
const MaxCarriedMessages = 200

// Clips for tool use folded into an answer: the old tools (bash, read,
// write, ...) are not Mother's, so their calls and results are carried as
// text, shortened.
const (
	toolArgsChars   = 500
	toolResultChars = 1000
)

// OldContextFile is the name the old context.jsonl is kept under in the
// new channel directory, for reference (the model can read it).
const OldContextFile = "context.old.jsonl"

// oldEntry is one line of an old context.jsonl (any entry type).
type oldEntry struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	ParentID  *string         `json:"parentId"`
	Timestamp string          `json:"timestamp"`
	Provider  string          `json:"provider"`
	ModelID   string          `json:"modelId"`
	Message   json.RawMessage `json:"message"`
	Summary   string          `json:"summary"`
	// FirstKeptEntryID (v2+) or FirstKeptEntryIndex (v1, an index among
	// the file's entries, header included) start the part a compaction
	// kept verbatim.
	FirstKeptEntryID    string          `json:"firstKeptEntryId"`
	FirstKeptEntryIndex *int            `json:"firstKeptEntryIndex"`
	Content             json.RawMessage `json:"content"` // custom_message

	line int
	at   time.Time
}

// oldAgentMessage is an old agent message (pi-ai's user, assistant and
// toolResult messages, and the coding agent's own kinds).
type oldAgentMessage struct {
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"`
	ToolName     string          `json:"toolName"`
	IsError      bool            `json:"isError"`
	StopReason   string          `json:"stopReason"`
	ErrorMessage string          `json:"errorMessage"`
	Command      string          `json:"command"` // bashExecution
	Output       string          `json:"output"`
	Summary      string          `json:"summary"` // branchSummary, compactionSummary
}

// oldPart is one content block.
type oldPart struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// oldContext is what an old context.jsonl knew.
type oldContext struct {
	Provider, Model string
	Started         time.Time
	// Summary is the latest compaction summary ("" when none); Earlier
	// counts the compactions before it (each summary built on the one
	// before, so the latest holds what they knew).
	Summary     string
	SummaryTime time.Time
	Earlier     int
	// Messages are the entries after the summary, converted, oldest first.
	Messages []carriedMessage
	// Dropped counts messages of that part left out by MaxCarriedMessages.
	Dropped int
	// userKeys and botTexts identify every message the file holds (any
	// branch, before or after a compaction), to find where the log
	// stands: user messages as "[name]: text", Mother's answers by text.
	userKeys map[string]bool
	botTexts map[string]bool
	// Last is the time of the latest entry.
	Last     time.Time
	Problems []string
	Entries  int
}

type carriedMessage struct {
	Time time.Time
	Msg  model.Message
}

// readOldContext reads an old context.jsonl. rel names it in problems
// ("<channel>/context.jsonl"); a malformed line is reported as rel:line
// and skipped.
func readOldContext(path, rel string) (*oldContext, error) {
	oc := &oldContext{userKeys: map[string]bool{}, botTexts: map[string]bool{}}
	var entries []*oldEntry
	err := scanLines(path, func(n int, line []byte, torn bool) {
		if torn {
			oc.Problems = append(oc.Problems, fmt.Sprintf("%s:%d: torn last line (%d bytes), probably cut by a crash; skipped", rel, n, len(line)))
			return
		}
		var e oldEntry
		if err := json.Unmarshal(line, &e); err != nil {
			oc.Problems = append(oc.Problems, fmt.Sprintf("%s:%d: not JSON (%v); skipped", rel, n, err))
			return
		}
		if e.Type == "" {
			oc.Problems = append(oc.Problems, fmt.Sprintf("%s:%d: no \"type\"; skipped", rel, n))
			return
		}
		e.line = n
		e.at, _ = time.Parse(time.RFC3339Nano, e.Timestamp)
		entries = append(entries, &e)
	})
	if err != nil {
		return nil, err
	}
	oc.Entries = len(entries)
	for _, e := range entries {
		if e.Type == "session" {
			oc.Provider, oc.Model, oc.Started = e.Provider, e.ModelID, e.at
		}
		if e.at.After(oc.Last) {
			oc.Last = e.at
		}
		if e.Type == "message" {
			oc.remember(e)
		}
	}
	onPath := contextPath(entries)
	// The latest compaction on the path and where its kept part starts.
	comp := -1
	for i, e := range onPath {
		if e.Type == "compaction" {
			if comp >= 0 {
				oc.Earlier++
			}
			comp = i
		}
	}
	var kept []*oldEntry
	if comp < 0 {
		kept = onPath
	} else {
		c := onPath[comp]
		oc.Summary, oc.SummaryTime = c.Summary, c.at
		start := comp // nothing before the compaction unless its first kept entry is found
		for i := 0; i < comp; i++ {
			e := onPath[i]
			if (c.FirstKeptEntryID != "" && e.ID == c.FirstKeptEntryID) ||
				(c.FirstKeptEntryIndex != nil && indexOf(entries, e) == *c.FirstKeptEntryIndex) {
				start = i
				break
			}
		}
		kept = append(append([]*oldEntry(nil), onPath[start:comp]...), onPath[comp+1:]...)
	}
	oc.Messages = oc.convert(kept, rel)
	if n := len(oc.Messages); n > MaxCarriedMessages {
		cut := n - MaxCarriedMessages
		// Start the carried part at a person's message.
		for cut < n && oc.Messages[cut].Msg.Role != model.RoleUser {
			cut++
		}
		oc.Dropped = cut
		oc.Messages = oc.Messages[cut:]
	}
	return oc, nil
}

func indexOf(entries []*oldEntry, e *oldEntry) int {
	for i, x := range entries {
		if x == e {
			return i
		}
	}
	return -1
}

// contextPath returns the entries the old agent would load: with ids (v2+),
// the path from the last entry to the root; without, all of them.
func contextPath(entries []*oldEntry) []*oldEntry {
	byID := map[string]*oldEntry{}
	var last *oldEntry
	for _, e := range entries {
		if e.Type == "session" {
			continue
		}
		if e.ID != "" {
			byID[e.ID] = e
		}
		last = e
	}
	if last == nil {
		return nil
	}
	if len(byID) == 0 || last.ID == "" {
		var out []*oldEntry
		for _, e := range entries {
			if e.Type != "session" {
				out = append(out, e)
			}
		}
		return out
	}
	var rev []*oldEntry
	seen := map[*oldEntry]bool{}
	for e := last; e != nil && !seen[e]; {
		seen[e] = true
		rev = append(rev, e)
		if e.ParentID == nil {
			break
		}
		e = byID[*e.ParentID]
	}
	out := make([]*oldEntry, len(rev))
	for i, e := range rev {
		out[len(rev)-1-i] = e
	}
	return out
}

// remember records a message entry's identity for matching with the log.
func (oc *oldContext) remember(e *oldEntry) {
	var m oldAgentMessage
	if json.Unmarshal(e.Message, &m) != nil {
		return
	}
	text, _, _ := partsText(m.Content)
	switch m.Role {
	case "user":
		oc.userKeys[userKey(text)] = true
	case "assistant":
		for _, p := range parts(m.Content) {
			if p.Type == "text" && strings.TrimSpace(p.Text) != "" {
				oc.botTexts[strings.TrimSpace(p.Text)] = true
			}
		}
		if t := strings.TrimSpace(text); t != "" {
			oc.botTexts[t] = true
		}
	}
}

// stampPrefix is the time the old agents put before a live message:
// "[2025-12-14 10:00:00+00:00] ".
var stampPrefix = regexp.MustCompile(`^\[\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?\] `)

// attachmentsBlock starts the attachment list after a message's text
// (mom: "\n\n<slack_attachments>\n", Mother: "\n<attachments>").
var attachmentsBlock = regexp.MustCompile(`\n+<[a-z_]*attachments>`)

// userKey normalises a user message of the old context as the old sync
// did: without the time stamp and the attachment list, "[name]: text".
func userKey(content string) string {
	s := stampPrefix.ReplaceAllString(content, "")
	if loc := attachmentsBlock.FindStringIndex(s); loc != nil {
		s = s[:loc[0]]
	}
	return s
}

// logKey is a logged message as the old sync wrote it into the context.
func logKey(m chat.ChannelMessage) string {
	name := m.Sender.Username
	if name == "" {
		name = m.Sender.ID
	}
	if name == "" {
		name = "unknown"
	}
	return "[" + name + "]: " + m.Text
}

func parts(raw json.RawMessage) []oldPart {
	var ps []oldPart
	if json.Unmarshal(raw, &ps) != nil {
		return nil
	}
	return ps
}

// partsText joins the text of a content (a string or blocks) and counts
// the images it leaves out and the block types it does not know.
func partsText(raw json.RawMessage) (text string, images int, unknown []string) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, 0, nil
	}
	var texts []string
	for _, p := range parts(raw) {
		switch p.Type {
		case "text":
			texts = append(texts, p.Text)
		case "image":
			images++
		case "thinking", "toolCall":
		default:
			unknown = append(unknown, p.Type)
		}
	}
	return strings.Join(texts, "\n"), images, unknown
}

// convert turns the kept entries into model messages: a person's message
// stays one user message; an answer with its tool calls and their results
// (several old messages) becomes one assistant message, the tool use folded
// in as short notes, since the old tools are not Mother's.
func (oc *oldContext) convert(kept []*oldEntry, rel string) []carriedMessage {
	var out []carriedMessage
	var answer []string
	var answerTime time.Time
	flush := func() {
		if len(answer) > 0 {
			out = append(out, carriedMessage{Time: answerTime, Msg: model.Message{Role: model.RoleAssistant, Content: strings.Join(answer, "\n")}})
		}
		answer = nil
	}
	user := func(t time.Time, text string) {
		flush()
		if strings.TrimSpace(text) != "" {
			out = append(out, carriedMessage{Time: t, Msg: model.Message{Role: model.RoleUser, Content: text}})
		}
	}
	for _, e := range kept {
		switch e.Type {
		case "custom_message":
			text, images, _ := partsText(e.Content)
			user(e.at, withImageNote(text, images))
			continue
		case "branch_summary":
			if e.Summary != "" {
				user(e.at, "[Summary of a branch of the earlier conversation]\n"+e.Summary)
			}
			continue
		case "message":
		default:
			// session metadata (model_change, thinking_level_change,
			// label, custom, session_info): not part of the conversation.
			continue
		}
		var m oldAgentMessage
		if err := json.Unmarshal(e.Message, &m); err != nil || m.Role == "" {
			oc.Problems = append(oc.Problems, fmt.Sprintf("%s:%d: message without a role; skipped", rel, e.line))
			continue
		}
		text, images, unknown := partsText(m.Content)
		if len(unknown) > 0 {
			oc.Problems = append(oc.Problems, fmt.Sprintf("%s:%d: content blocks of type %s not carried", rel, e.line, strings.Join(unknown, ", ")))
		}
		switch m.Role {
		case "user":
			user(e.at, withImageNote(text, images))
		case "custom", "hookMessage":
			user(e.at, withImageNote(text, images))
		case "branchSummary", "compactionSummary":
			user(e.at, "[Summary of a branch of the earlier conversation]\n"+m.Summary)
		case "bashExecution":
			user(e.at, fmt.Sprintf("[ran `%s`]\n%s", m.Command, clipText(m.Output, toolResultChars)))
		case "assistant":
			if len(answer) == 0 {
				answerTime = e.at
			}
			if s, ok := stringContent(m.Content); ok {
				if strings.TrimSpace(s) != "" {
					answer = append(answer, s)
				}
			}
			for _, p := range parts(m.Content) {
				switch p.Type {
				case "text":
					if strings.TrimSpace(p.Text) != "" {
						answer = append(answer, p.Text)
					}
				case "toolCall":
					answer = append(answer, fmt.Sprintf("[used %s: %s]", p.Name, clipText(string(p.Arguments), toolArgsChars)))
				}
			}
			if m.StopReason == "error" && m.ErrorMessage != "" {
				answer = append(answer, "[the answer failed: "+clipText(m.ErrorMessage, toolArgsChars)+"]")
			}
		case "toolResult":
			if len(answer) == 0 {
				answerTime = e.at
			}
			kind := "result"
			if m.IsError {
				kind = "error"
			}
			answer = append(answer, fmt.Sprintf("[%s %s: %s]", m.ToolName, kind, clipText(withImageNote(text, images), toolResultChars)))
		default:
			oc.Problems = append(oc.Problems, fmt.Sprintf("%s:%d: message role %q not carried", rel, e.line, m.Role))
		}
	}
	flush()
	return out
}

func stringContent(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	return "", false
}

func withImageNote(text string, images int) string {
	if images == 0 {
		return text
	}
	return text + fmt.Sprintf("\n[%d image(s) were attached here; not carried over]", images)
}

// clipText cuts s to at most max bytes (at a rune boundary) with a marker.
func clipText(s string, max int) string {
	s = strings.TrimSpace(s)
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf(" [... %d characters cut]", len(s)-cut)
}

// loggedMessage is a converted log message and where its line ends in the
// new log.jsonl.
type loggedMessage struct {
	Msg chat.ChannelMessage
	End int64
}

// contextPlan is the new context built from an old one.
type contextPlan struct {
	Records []store.ContextRecord
	// Upto is the index of the last log message the context holds (-1:
	// none); the new Mother syncs the messages after it on her first run.
	Upto int
	// ByTime says Upto was found by time, no message text matching.
	ByTime bool
	// Missing counts people's messages up to Upto the old context did not
	// hold (they stay in the log only).
	Missing int
}

// planContext builds the new context.jsonl records: a session record, the
// latest summary as a compaction record, the carried messages, and the
// sync cursor placed after the last log message the old context held, so
// the log is not brought in twice and what came after it is.
func planContext(oc *oldContext, logged []loggedMessage) contextPlan {
	p := contextPlan{Upto: -1}
	held := make([]bool, len(logged))
	for i, lm := range logged {
		if lm.Msg.Sender.IsBot {
			held[i] = oc.botTexts[strings.TrimSpace(lm.Msg.Text)]
		} else {
			held[i] = oc.userKeys[logKey(lm.Msg)]
		}
		if held[i] {
			p.Upto = i
		}
	}
	if p.Upto < 0 && !oc.Last.IsZero() && (len(oc.Messages) > 0 || oc.Summary != "") {
		// No text matched (a different format): the old context holds
		// what was logged up to its last entry.
		p.ByTime = true
		for i, lm := range logged {
			if !lm.Msg.Timestamp.After(oc.Last) {
				p.Upto = i
				held[i] = true
			}
		}
	}
	if p.Upto >= 0 {
		// Mother's replies right after the last held message are the
		// answers the old context already holds.
		for p.Upto+1 < len(logged) && logged[p.Upto+1].Msg.Sender.IsBot {
			p.Upto++
		}
		for i := 0; i <= p.Upto; i++ {
			if !held[i] && !logged[i].Msg.Sender.IsBot && !p.ByTime {
				p.Missing++
			}
		}
	}
	p.Records = append(p.Records, store.ContextRecord{Type: store.RecordSession, Time: oc.Started, Provider: oc.Provider, Model: oc.Model})
	if oc.Summary != "" {
		p.Records = append(p.Records, store.ContextRecord{Type: store.RecordCompaction, Time: oc.SummaryTime, Summary: oc.Summary})
	}
	for _, cm := range oc.Messages {
		m := cm.Msg
		p.Records = append(p.Records, store.ContextRecord{Type: store.RecordMessage, Time: cm.Time, Message: &m})
	}
	if p.Upto >= 0 {
		lm := logged[p.Upto]
		p.Records = append(p.Records, store.ContextRecord{Type: store.RecordSeen, Time: lm.Msg.Timestamp, MsgID: lm.Msg.ID, LogEnd: lm.End})
	}
	return p
}

// carryContext converts the old context.jsonl at path into the new
// channel's context, keeps a copy of it as context.old.jsonl, and says in
// cr what it did.
func carryContext(ch *store.Channel, path, rel string, logged []loggedMessage, cr *ChannelReport) error {
	oc, err := readOldContext(path, rel)
	if err != nil {
		return fmt.Errorf("read %s: %w", rel, err)
	}
	cr.Problems = append(cr.Problems, oc.Problems...)
	if oc.Summary == "" && len(oc.Messages) == 0 {
		cr.Context = "the old context holds no conversation; the new one is built from the log (its most recent messages)"
	} else {
		plan := planContext(oc, logged)
		if err := ch.ReplaceContext(plan.Records); err != nil {
			return err
		}
		cr.Context = describeCarry(oc, plan, logged)
	}
	if err := copyFile(path, filepath.Join(ch.Dir(), OldContextFile)); err != nil {
		cr.Problems = append(cr.Problems, fmt.Sprintf("%s: copy to %s: %v", rel, OldContextFile, err))
	} else {
		cr.Files++
	}
	return nil
}

func describeCarry(oc *oldContext, p contextPlan, logged []loggedMessage) string {
	var parts []string
	switch {
	case oc.Summary != "" && oc.Earlier > 0:
		parts = append(parts, fmt.Sprintf("the latest compaction summary carried (it builds on %d earlier one(s))", oc.Earlier))
	case oc.Summary != "":
		parts = append(parts, "the compaction summary carried")
	default:
		parts = append(parts, "no compaction summary")
	}
	parts = append(parts, fmt.Sprintf("%d recent message(s) carried", len(oc.Messages)))
	if oc.Dropped > 0 {
		parts = append(parts, fmt.Sprintf("%d older one(s) after the summary not carried (limit %d; they stay in the log and %s)", oc.Dropped, MaxCarriedMessages, OldContextFile))
	}
	switch {
	case p.Upto < 0 && len(logged) > 0:
		parts = append(parts, "no logged message matched it: the first run brings in the log's most recent messages")
	case p.Upto >= 0:
		how := "matched by text"
		if p.ByTime {
			how = "by time, no text matched"
		}
		parts = append(parts, fmt.Sprintf("it holds the log up to message %s (%s)", logged[p.Upto].Msg.ID, how))
		if rest := len(logged) - 1 - p.Upto; rest > 0 {
			parts = append(parts, fmt.Sprintf("the %d message(s) logged after it come in on the first run", rest))
		}
		if p.Missing > 0 {
			parts = append(parts, fmt.Sprintf("%d earlier logged message(s) were not in it and stay in the log only", p.Missing))
		}
	}
	return strings.Join(parts, "; ")
}
