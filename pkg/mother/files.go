package mother

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/prompt"
	"github.com/mother-chat/mother/pkg/session"
	"github.com/mother-chat/mother/pkg/store"
	"github.com/mother-chat/mother/pkg/tools"
)

// MaxOwnFileBytes caps one file written by Mother's write and edit tools
// (a skill's SKILL.md or script, SYSTEM.md). MOTHER.md has its character
// budget (prompt.BudgetMotherMD) on top.
const MaxOwnFileBytes = prompt.MaxOwnFileKB << 10

// MetaFileWrite is the Metadata key of a file-write record in log.jsonl:
// {"tool", "action" (created, replaced, appended, edited), "path" (relative
// to the workspace), "bytes", "requestedBy"}.
const MetaFileWrite = "fileWrite"

// skillName is what a skill directory may be called.
var skillName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ownKind is which of Mother's own files a path is.
type ownKind int

const (
	ownGuide          ownKind = iota + 1 // MOTHER.md
	ownSystem                            // SYSTEM.md
	ownWorkspaceSkill                    // skills/<name>/...
	ownChannelSkill                      // channels/<adapter>/<id>/skills/<name>/...
)

// ownFile is a path Mother may write, resolved.
type ownFile struct {
	kind ownKind
	// rel is the slash path relative to the workspace; abs is it under the
	// workspace's real (symlink-free) path.
	rel, abs string
}

// refusal is a write Mother's file tools will not make, with the reason.
type refusal struct{ path, why string }

func (r *refusal) Error() string {
	return fmt.Sprintf("refused: %s: %s. Nothing was written.", r.path, r.why)
}

func refuse(path, format string, args ...any) error {
	return &refusal{path: path, why: fmt.Sprintf(format, args...)}
}

// fileTools are Mother's write and edit tools (see resolveOwn for what
// they may touch).
func (m *Mother) fileTools() []agent.Tool {
	ft := &fileTools{m: m}
	return []agent.Tool{ownWriteTool{ft}, ownEditTool{ft}}
}

// fileTools holds what write and edit share.
type fileTools struct {
	m  *Mother
	mu sync.Mutex // serialises read-modify-write (append, edit, budgets)
}

// runLogKey carries the channel store and the session of a run, so a file
// write's log record is marked as already in the context (the tool call
// and its result are).
type runLogKey struct{}

type runLog struct {
	ch   *store.Channel
	sess *session.Session
	// trigger is the id of the message the run answers (its log line).
	trigger string
}

// withRunLog returns ctx carrying the run's channel store and session and
// the id of the message it answers.
func withRunLog(ctx context.Context, ch *store.Channel, sess *session.Session, trigger string) context.Context {
	return context.WithValue(ctx, runLogKey{}, runLog{ch: ch, sess: sess, trigger: trigger})
}

const ownFilesHelp = "you may write MOTHER.md, SYSTEM.md and skills/<name>/... (the workspace's, on an admin's request) and this channel's skills/<name>/..."

// resolveOwn decides whether path (relative to the workspace, or absolute
// inside it) is one of Mother's own files in the run described by info,
// and resolves it. Refusals say why. The rules: never `..`, hidden files,
// symlinks, config.json, logs, contexts, memory (update_memory keeps its
// budget), events, other channels' files or anything outside the
// workspace; a channel's run may write that channel's skills; the
// workspace's MOTHER.md, SYSTEM.md and skills only when the requester is an
// admin of the adapter.
func (t *fileTools) resolveOwn(path string, info chat.RunInfo) (ownFile, error) {
	m := t.m
	if strings.TrimSpace(path) == "" {
		return ownFile{}, errors.New("path: missing; give a path relative to the workspace, e.g. skills/<name>/SKILL.md")
	}
	if strings.ContainsRune(path, 0) {
		return ownFile{}, refuse(path, "the path contains a NUL byte")
	}
	for _, part := range strings.FieldsFunc(path, func(r rune) bool { return r == '/' || r == filepath.Separator }) {
		if part == ".." {
			return ownFile{}, refuse(path, "`..` is not allowed in a path; name the file relative to the workspace")
		}
	}
	ws, data := m.store.Workspace(), m.store.DataDir()
	wsReal, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return ownFile{}, fmt.Errorf("workspace: %w", err)
	}
	dataReal, _ := filepath.EvalSymlinks(data)
	rel := filepath.Clean(path)
	if filepath.IsAbs(rel) {
		r, ok := under(rel, ws, wsReal)
		if !ok {
			if r, inData := under(rel, data, dataReal); inData {
				if r == "config.json" {
					return ownFile{}, refuse(path, configWhy)
				}
				return ownFile{}, refuse(path, "that is Mother's own state outside the workspace, kept by the daemon; "+ownFilesHelp)
			}
			return ownFile{}, refuse(path, "that is outside the data directory; "+ownFilesHelp)
		}
		rel = r
	}
	rel = filepath.ToSlash(rel)
	parts := strings.Split(rel, "/")
	for _, p := range parts {
		if strings.HasPrefix(p, ".") {
			return ownFile{}, refuse(path, "hidden files and directories are not yours to write")
		}
	}
	own := ownFile{rel: rel, abs: filepath.Join(wsReal, filepath.FromSlash(rel))}
	switch {
	case rel == "config.json":
		return ownFile{}, refuse(path, configWhy)
	case rel == "MOTHER.md":
		own.kind = ownGuide
	case rel == "SYSTEM.md":
		own.kind = ownSystem
	case rel == "MEMORY.md":
		return ownFile{}, refuse(path, "memory is written with update_memory, which keeps its budget")
	case rel == "REFERENCE.md":
		return ownFile{}, refuse(path, "REFERENCE.md is regenerated from the configuration at every start; an edit would be lost")
	case parts[0] == "events":
		return ownFile{}, refuse(path, "events are managed with schedule_event and cancel_event")
	case parts[0] == "skills":
		if err := skillPath(path, parts[1:]); err != nil {
			return ownFile{}, err
		}
		own.kind = ownWorkspaceSkill
	case parts[0] == "channels":
		if err := t.channelPath(path, rel, parts, info); err != nil {
			return ownFile{}, err
		}
		own.kind = ownChannelSkill
	default:
		return ownFile{}, refuse(path, "that is not one of your files; "+ownFilesHelp)
	}
	if own.kind != ownChannelSkill {
		if err := t.mayWriteWorkspace(info); err != nil {
			return ownFile{}, refuse(path, "%s is the workspace's, shared by every channel: %v", workspaceWhat(own.kind), err)
		}
	}
	if err := noLinks(wsReal, rel, path); err != nil {
		return ownFile{}, err
	}
	return own, nil
}

const configWhy = "config.json is the operator's configuration (adapters, tokens, access control); only the operator changes it, on the host"

func workspaceWhat(k ownKind) string {
	switch k {
	case ownGuide:
		return "MOTHER.md"
	case ownSystem:
		return "SYSTEM.md"
	}
	return "a workspace skill"
}

// under returns p relative to root (or to its real path), if p lies in it.
func under(p, root, real string) (string, bool) {
	for _, r := range []string{root, real} {
		if r == "" {
			continue
		}
		if rel, err := filepath.Rel(r, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return rel, true
		}
	}
	return "", false
}

// skillPath checks <name>/<file...> below a skills/ directory.
func skillPath(path string, rest []string) error {
	if len(rest) < 2 {
		return refuse(path, "name a file inside a skill: skills/<name>/SKILL.md (and files beside it)")
	}
	if !skillName.MatchString(rest[0]) {
		return refuse(path, "a skill's name is letters, digits, '.', '_' and '-' (at most 64), not %q", rest[0])
	}
	return nil
}

// channelPath checks a path under channels/: this run's channel, its
// skills only.
func (t *fileTools) channelPath(path, rel string, parts []string, info chat.RunInfo) error {
	if info.ChannelDir == "" {
		return refuse(path, "channel files can only be written in a channel's run")
	}
	own, err := filepath.Rel(t.m.store.Workspace(), info.ChannelDir)
	if err != nil {
		return refuse(path, "this run's channel directory is not in the workspace")
	}
	own = filepath.ToSlash(own)
	if len(parts) < 3 || strings.Join(parts[:3], "/") != own {
		return refuse(path, "that is another channel's directory; this run (%s) may write only %s/skills/<name>/...", info.QualifiedChannel(), own)
	}
	rest := parts[3:]
	if len(rest) == 0 {
		return refuse(path, "that is this channel's directory; write a skill file in %s/skills/<name>/", own)
	}
	switch name := rest[0]; {
	case name == "skills":
		return skillPath(path, rest[1:])
	case name == "log.jsonl":
		return refuse(path, "log.jsonl is the channel's message log; only Mother's message handling appends to it")
	case strings.HasPrefix(name, "context.") || strings.HasPrefix(name, "context-"):
		return refuse(path, "%s is your model context; it is kept by the daemon", name)
	case name == "daily":
		return refuse(path, "daily/ holds the channel's daily logs, written as messages arrive")
	case name == "MEMORY.md":
		return refuse(path, "memory is written with update_memory, which keeps its budget")
	case name == "attachments":
		return refuse(path, "attachments/ holds the files people sent; they are not rewritten")
	}
	return refuse(path, "that is not one of your files; in this channel you may write %s/skills/<name>/...", own)
}

// mayWriteWorkspace checks the requester may have the workspace's files
// written: an admin of the adapter (or the operator at the terminal).
func (t *fileTools) mayWriteWorkspace(info chat.RunInfo) error {
	if info.UserID == "" {
		return errors.New("it is written only when an admin asks, and this run was not started by a person (an event)")
	}
	if !t.m.isAdmin(info.Adapter, info.UserID) && !info.IsAdmin && !t.m.terminal(info.Adapter) {
		return fmt.Errorf("it is written only when an admin of %s asks, and the requester (%s) is not one; this channel's own skills are yours to write", info.Adapter, info.UserID)
	}
	return nil
}

// noLinks walks rel from the real workspace root and refuses a symlink
// anywhere on it (a link could lead out of the workspace or into another
// channel), a non-directory in the middle, a non-regular file at the end,
// or a file with other hard links.
func noLinks(root, rel, path string) error {
	cur := root
	parts := strings.Split(rel, "/")
	for i, part := range parts {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		shown := strings.Join(parts[:i+1], "/")
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(cur)
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(cur), target)
			}
			where := "a symbolic link"
			if _, inside := under(filepath.Clean(target), root, ""); !inside {
				where = "a symbolic link leading outside the workspace"
			}
			return refuse(path, "%s is %s (to %s); your files are written only through real directories", shown, where, target)
		}
		last := i == len(parts)-1
		if !last && !fi.IsDir() {
			return refuse(path, "%s is not a directory", shown)
		}
		if last {
			if !fi.Mode().IsRegular() {
				return refuse(path, "%s is not a regular file", shown)
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && uint64(st.Nlink) > 1 {
				return refuse(path, "%s has other hard links; it could be another file's content", shown)
			}
		}
	}
	return nil
}

// put writes data to own (checked), crash-safely, within the limits, and
// records the write in the channel's log. old is the previous content
// (nil: no file); action says what it is.
func (t *fileTools) put(ctx context.Context, info chat.RunInfo, tool, action string, own ownFile, old, data []byte) error {
	if len(data) > MaxOwnFileBytes {
		return refuse(own.rel, "the file would be %d bytes, over the %d-byte limit of your files", len(data), MaxOwnFileBytes)
	}
	if own.kind == ownGuide {
		if n := utf8.RuneCount(data); n > prompt.BudgetMotherMD {
			return refuse(own.rel, "MOTHER.md would be %d characters, over its budget of %d (it now has %d); shorten it", n, prompt.BudgetMotherMD, utf8.RuneCount(old))
		}
	}
	if !utf8.Valid(data) {
		return refuse(own.rel, "the content is not UTF-8 text")
	}
	root := filepath.Dir(own.abs)
	if err := fsync.MkdirAll(root, 0o700); err != nil {
		return fmt.Errorf("%s: create directory: %w", own.rel, err)
	}
	// Check again now that the directories exist: nothing on the way may
	// have become a link meanwhile.
	wsReal, err := filepath.EvalSymlinks(t.m.store.Workspace())
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	if err := noLinks(wsReal, own.rel, own.rel); err != nil {
		return err
	}
	perm := fs.FileMode(0o600)
	if fi, err := os.Stat(own.abs); err == nil {
		perm = fi.Mode().Perm()
	}
	if err := atomicfile.WriteFile(own.abs, data, perm); err != nil {
		return fmt.Errorf("%s: %w", own.rel, err)
	}
	t.record(ctx, info, tool, action, own.rel, len(data))
	return nil
}

// record writes a file write to the channel's log.jsonl (and daily log) as
// what it is: a record from Mother with MetaFileWrite metadata, marked as
// already in the run's context.
func (t *fileTools) record(ctx context.Context, info chat.RunInfo, tool, action, rel string, n int) {
	m := t.m
	lg := m.logger.With("channel", info.QualifiedChannel())
	lg.Info("file written", "tool", tool, "action", action, "path", rel, "bytes", n, "requested_by", info.UserID)
	rl, _ := ctx.Value(runLogKey{}).(runLog)
	ch := rl.ch
	if ch == nil {
		var err error
		if ch, err = m.store.Channel(info.Adapter, info.ChannelID); err != nil {
			lg.Error("cannot log file write", "err", err)
			return
		}
	}
	// Mother's own line (ownSender), its Metadata holding MetaFileWrite.
	sender := chat.Sender{Username: OwnUsername, IsBot: true}
	if a, ok := m.Adapter(info.Adapter); ok {
		sender = ownSender(a)
	}
	msg := chat.ChannelMessage{
		ID: m.newID(), ChannelID: info.ChannelID, Timestamp: m.now(),
		Sender:      sender,
		Text:        fmt.Sprintf("[%s] %s %s (%d bytes)", tool, action, rel, n),
		Attachments: []chat.ChannelAttachment{},
		Metadata: map[string]any{MetaFileWrite: map[string]any{
			"tool": tool, "action": action, "path": rel, "bytes": n, "requestedBy": info.UserID,
		}},
	}
	if _, err := ch.AppendMessage(msg); err != nil {
		lg.Error("cannot log file write", "err", err)
		return
	}
	if rl.sess != nil {
		if err := rl.sess.MarkSeen(msg.ID); err != nil {
			lg.Error("cannot mark file write as seen in context", "err", err)
		}
	}
}

func (t *fileTools) runInfo(ctx context.Context, tool string) (chat.RunInfo, error) {
	info, ok := chat.RunInfoFrom(ctx)
	if !ok || info.Adapter == "" || info.ChannelID == "" {
		return chat.RunInfo{}, fmt.Errorf("%s: no channel: your files can only be written inside a channel's run", tool)
	}
	return info, nil
}

func readOld(abs string) ([]byte, error) {
	b, err := os.ReadFile(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

const pathProp = `"path":{"type":"string","description":"relative to the workspace: MOTHER.md, SYSTEM.md, skills/<name>/SKILL.md, or this channel's channels/<adapter>/<id>/skills/<name>/SKILL.md"}`

type ownWriteTool struct{ t *fileTools }

func (ownWriteTool) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name: "write",
		Description: fmt.Sprintf("Create or replace one of your own files (append=true adds to its end instead): this channel's skills "+
			"(channels/<adapter>/<id>/skills/<name>/SKILL.md and files beside it) and, only when an admin asks, the workspace's MOTHER.md "+
			"(at most %d characters, shown to you on every run), SYSTEM.md (your log of changes to the environment: one dated line each, "+
			"not shown) and skills/<name>/.... Nothing else: not config.json, logs, memory (use update_memory), events or other channels. "+
			"At most %d KB a file; every write is recorded in the channel's log.", prompt.BudgetMotherMD, MaxOwnFileBytes>>10),
		Parameters: json.RawMessage(`{"type":"object","properties":{
"label":{"type":"string","description":"a few words shown to users"},
` + pathProp + `,
"content":{"type":"string","description":"the file's complete new content (with append: the text to add)"},
"append":{"type":"boolean","description":"add content at the end of the file instead of replacing it"}},
"required":["path","content"]}`),
	}
}

func (w ownWriteTool) Run(ctx context.Context, raw json.RawMessage) (agent.Result, error) {
	var a struct {
		Path    string  `json:"path"`
		Content *string `json:"content"`
		Append  bool    `json:"append"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return agent.Result{}, fmt.Errorf("write: invalid arguments: %v", err)
	}
	if a.Content == nil {
		return agent.Result{}, errors.New("write: content: missing")
	}
	t := w.t
	info, err := t.runInfo(ctx, "write")
	if err != nil {
		return agent.Result{}, err
	}
	own, err := t.resolveOwn(a.Path, info)
	if err != nil {
		t.m.logger.Info("file write refused", "channel", info.QualifiedChannel(), "tool", "write", "path", a.Path, "err", err)
		return agent.Result{}, fmt.Errorf("write: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old, err := readOld(own.abs)
	if err != nil {
		return agent.Result{}, fmt.Errorf("write: %s: %w", own.rel, err)
	}
	data, action := []byte(*a.Content), "replaced"
	switch {
	case old == nil:
		action = "created"
	case a.Append:
		action = "appended to"
		sep := ""
		if len(old) > 0 && old[len(old)-1] != '\n' {
			sep = "\n"
		}
		data = []byte(string(old) + sep + *a.Content)
	}
	if err := t.put(ctx, info, "write", action, own, old, data); err != nil {
		t.m.logger.Info("file write refused", "channel", info.QualifiedChannel(), "tool", "write", "path", a.Path, "err", err)
		return agent.Result{}, fmt.Errorf("write: %w", err)
	}
	note := ""
	if own.kind == ownGuide {
		note = fmt.Sprintf(" (%d of %d characters)", utf8.RuneCount(data), prompt.BudgetMotherMD)
	}
	return agent.Result{Text: fmt.Sprintf("%s %s%s: %d bytes now. Recorded in the channel's log.", upperFirst(action), own.rel, note, len(data))}, nil
}

type ownEditTool struct{ t *fileTools }

func (ownEditTool) Spec() model.ToolSpec {
	return model.ToolSpec{
		Name: "edit",
		Description: "Replace text in one of your own files (the same files write may change, with the same rules and budgets). " +
			"oldText must occur exactly once, whitespace and line breaks included. Returns a unified diff; recorded in the channel's log.",
		Parameters: json.RawMessage(`{"type":"object","properties":{
"label":{"type":"string","description":"a few words shown to users"},
` + pathProp + `,
"oldText":{"type":"string","description":"the exact text to replace; it must occur exactly once"},
"newText":{"type":"string","description":"the replacement text"}},
"required":["path","oldText","newText"]}`),
	}
}

func (e ownEditTool) Run(ctx context.Context, raw json.RawMessage) (agent.Result, error) {
	var a struct {
		Path    string  `json:"path"`
		OldText *string `json:"oldText"`
		NewText *string `json:"newText"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return agent.Result{}, fmt.Errorf("edit: invalid arguments: %v", err)
	}
	switch {
	case a.OldText == nil:
		return agent.Result{}, errors.New("edit: oldText: missing")
	case a.NewText == nil:
		return agent.Result{}, errors.New("edit: newText: missing")
	case *a.OldText == "":
		return agent.Result{}, errors.New("edit: oldText: empty; to create or replace a whole file use write")
	case *a.OldText == *a.NewText:
		return agent.Result{}, errors.New("edit: oldText and newText are identical, so there is nothing to change")
	}
	t := e.t
	info, err := t.runInfo(ctx, "edit")
	if err != nil {
		return agent.Result{}, err
	}
	own, err := t.resolveOwn(a.Path, info)
	if err != nil {
		t.m.logger.Info("file write refused", "channel", info.QualifiedChannel(), "tool", "edit", "path", a.Path, "err", err)
		return agent.Result{}, fmt.Errorf("edit: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old, err := readOld(own.abs)
	if err != nil {
		return agent.Result{}, fmt.Errorf("edit: %s: %w", own.rel, err)
	}
	if old == nil {
		return agent.Result{}, fmt.Errorf("edit: %s: no such file; create it with write", own.rel)
	}
	s := string(old)
	switch n := strings.Count(s, *a.OldText); {
	case n == 0:
		return agent.Result{}, fmt.Errorf("edit: oldText was not found in %s; read the file and copy the text exactly", own.rel)
	case n > 1:
		return agent.Result{}, fmt.Errorf("edit: oldText occurs %d times in %s; include more surrounding text so it occurs exactly once", n, own.rel)
	}
	data := []byte(strings.Replace(s, *a.OldText, *a.NewText, 1))
	if err := t.put(ctx, info, "edit", "edited", own, old, data); err != nil {
		t.m.logger.Info("file write refused", "channel", info.QualifiedChannel(), "tool", "edit", "path", a.Path, "err", err)
		return agent.Result{}, fmt.Errorf("edit: %w", err)
	}
	return agent.Result{Text: tools.UnifiedDiff(own.rel, old, data, 3) + "Recorded in the channel's log."}, nil
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
