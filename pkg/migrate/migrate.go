// Package migrate imports the data directory of the TypeScript Mother
// (Discord) or mom (Slack) into Mother's unified layout, without modifying
// the old directory.
//
// The old layout is a workspace with one directory per channel:
//
//	OLD/MEMORY.md MOTHER.md SYSTEM.md skills/ events/
//	OLD/<channelId>/log.jsonl        {date, ts, user, userName, text, attachments, isBot}
//	OLD/<channelId>/MEMORY.md attachments/ skills/ scratch/ daily/ context.jsonl
//
// Messages are converted to chat.ChannelMessage, channels are placed under
// NEW/workspace/channels/<adapter>/, and event channel ids are qualified
// with the adapter name. The old context.jsonl (pi's session format) is
// carried into the new context: its latest compaction summary and the
// turns after it, with the sync cursor placed after the last logged
// message it held (see context.go). Old models files (pi's models.json)
// are merged into NEW/config.json where they map (see models.go).
// Malformed lines are reported as file:line and skipped; nothing under OLD
// is ever written.
package migrate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/dataformat"
	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/store"
)

// Report says what was converted and what was not.
type Report struct {
	Channels  []ChannelReport
	Events    int
	Files     int
	Skipped   []string
	Problems  []string
	OldDir    string
	NewDir    string
	Adapter   string
	Workspace []string
	// Models is what the old models files mapped to (nil: none given).
	Models *ModelsReport
}

// ChannelReport is one channel's conversion.
type ChannelReport struct {
	ID       string
	Messages int
	Files    int
	// Context says what was carried over from the old context.jsonl.
	Context  string
	Problems []string
}

// String renders the report for the operator.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "migrated %s -> %s (adapter %q)\n", r.OldDir, r.NewDir, r.Adapter)
	if len(r.Workspace) > 0 {
		fmt.Fprintf(&b, "workspace files: %s\n", strings.Join(r.Workspace, ", "))
	}
	fmt.Fprintf(&b, "events: %d converted\n", r.Events)
	msgs, files := 0, 0
	for _, c := range r.Channels {
		msgs += c.Messages
		files += c.Files
		fmt.Fprintf(&b, "channel %s: %d messages, %d files\n", c.ID, c.Messages, c.Files)
		if c.Context != "" {
			fmt.Fprintf(&b, "  context: %s\n", c.Context)
		}
		for _, p := range c.Problems {
			fmt.Fprintf(&b, "  not converted: %s\n", p)
		}
	}
	fmt.Fprintf(&b, "total: %d channels, %d messages, %d files\n", len(r.Channels), msgs, files+r.Files)
	if m := r.Models; m != nil {
		if len(m.Files) > 0 {
			fmt.Fprintf(&b, "models files: %s\n", strings.Join(m.Files, ", "))
		}
		for _, s := range m.Mapped {
			fmt.Fprintf(&b, "  mapped: %s\n", s)
		}
		for _, s := range m.NotMapped {
			fmt.Fprintf(&b, "  not mapped: %s\n", s)
		}
		switch {
		case m.Config != "" && m.Backup != "":
			fmt.Fprintf(&b, "config: merged into %s (the previous one kept as %s)\n", m.Config, m.Backup)
		case m.Config != "":
			fmt.Fprintf(&b, "config: written to %s\n", m.Config)
		}
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(&b, "skipped: %s\n", s)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "not converted: %s\n", p)
	}
	return b.String()
}

// Options name the migration.
type Options struct {
	OldDir  string
	NewDir  string
	Adapter string
	// ModelsFiles are old models files (pi's models.json format) whose
	// providers and models are merged into NEW/config.json.
	ModelsFiles []string
	// Getenv is the environment the old Mother ran in, for her own model
	// (MOTHER_MODEL_PROVIDER, MOTHER_MODEL_ID) when her settings.json does
	// not name it; nil: none.
	Getenv func(string) string
}

// workspaceFiles are copied from the old workspace root when present.
var workspaceFiles = []string{"MEMORY.md", "MOTHER.md", "SYSTEM.md"}

// notChannels are old workspace entries that are not channel directories.
var notChannels = map[string]bool{"skills": true, "events": true, "tools": true, "daily": true, "attachments": true, "scratch": true, "channels": true}

// Run performs the migration. It refuses to overwrite a channel that
// already has a log in NEW.
func Run(opts Options) (*Report, error) {
	if err := store.ValidName(opts.Adapter); err != nil {
		return nil, fmt.Errorf("adapter name: %w", err)
	}
	oldAbs, err := filepath.Abs(opts.OldDir)
	if err != nil {
		return nil, err
	}
	newAbs, err := filepath.Abs(opts.NewDir)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(oldAbs); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("old data directory %s: not a directory", opts.OldDir)
	}
	if oldAbs == newAbs || strings.HasPrefix(newAbs+"/", oldAbs+"/") || strings.HasPrefix(oldAbs+"/", newAbs+"/") {
		return nil, errors.New("old and new data directories must be separate (neither inside the other)")
	}
	// The old Mother kept channel directories under workspace/ in some
	// setups; accept OLD or OLD/workspace.
	src := oldAbs
	if looksLikeWorkspace(filepath.Join(oldAbs, "workspace")) && !looksLikeWorkspace(oldAbs) {
		src = filepath.Join(oldAbs, "workspace")
	}
	// NEW in this release's data format (a newer one is refused as it
	// is), held until the import is done.
	dd, err := dataformat.Prepare(newAbs, dataformat.Release)
	if err != nil {
		return nil, err
	}
	defer dd.Close()
	st, err := store.Open(newAbs, store.Options{})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	rep := &Report{OldDir: oldAbs, NewDir: newAbs, Adapter: opts.Adapter}

	for _, name := range workspaceFiles {
		from := filepath.Join(src, name)
		if _, err := os.Lstat(from); err != nil {
			continue
		}
		to := filepath.Join(st.Workspace(), name)
		if _, err := os.Stat(to); err == nil {
			rep.Skipped = append(rep.Skipped, name+" (already present in the new workspace)")
			continue
		}
		if err := copyFile(from, to); err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		rep.Workspace = append(rep.Workspace, name)
	}
	n, problems := copyTree(filepath.Join(src, "skills"), filepath.Join(st.Workspace(), "skills"))
	rep.Files += n
	rep.Problems = append(rep.Problems, problems...)
	events, problems := migrateEvents(filepath.Join(src, "events"), st.EventsDir(), opts.Adapter)
	rep.Events = events
	rep.Problems = append(rep.Problems, problems...)

	if len(opts.ModelsFiles) > 0 {
		own, problem := readOldModel(src, opts.Getenv)
		if problem != "" {
			rep.Problems = append(rep.Problems, problem)
		}
		mr, err := migrateModels(opts.ModelsFiles, newAbs, own)
		if err != nil {
			rep.Problems = append(rep.Problems, "models: "+err.Error())
		} else {
			rep.Models = mr
		}
	}

	entries, err := os.ReadDir(src)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", src, err)
	}
	for _, e := range entries {
		if !e.IsDir() || notChannels[e.Name()] || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		dir := filepath.Join(src, e.Name())
		if !isChannelDir(dir) {
			rep.Skipped = append(rep.Skipped, e.Name()+"/ (no log.jsonl, context.jsonl or MEMORY.md: not a channel)")
			continue
		}
		if err := store.ValidName(e.Name()); err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s/: channel id %v", e.Name(), err))
			continue
		}
		cr, err := migrateChannel(st, opts.Adapter, e.Name(), dir)
		if err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("channel %s: %v", e.Name(), err))
			continue
		}
		rep.Channels = append(rep.Channels, cr)
	}
	return rep, nil
}

func looksLikeWorkspace(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.IsDir() && !notChannels[e.Name()] && isChannelDir(filepath.Join(dir, e.Name())) {
			return true
		}
	}
	return false
}

func isChannelDir(dir string) bool {
	for _, f := range []string{"log.jsonl", "context.jsonl", "MEMORY.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return true
		}
	}
	return false
}

// oldMessage is one line of the old log.jsonl.
type oldMessage struct {
	Date        string          `json:"date"`
	TS          json.RawMessage `json:"ts"`
	User        string          `json:"user"`
	UserName    string          `json:"userName"`
	DisplayName string          `json:"displayName"`
	Text        string          `json:"text"`
	Attachments json.RawMessage `json:"attachments"`
	IsBot       bool            `json:"isBot"`
}

func migrateChannel(st *store.Store, adapter, id, dir string) (ChannelReport, error) {
	cr := ChannelReport{ID: id}
	ch, err := st.Channel(adapter, id)
	if err != nil {
		return cr, err
	}
	if info, err := os.Stat(ch.LogPath()); err == nil && info.Size() > 0 {
		return cr, fmt.Errorf("the new data directory already has a log for %s/%s; not overwriting", adapter, id)
	}
	// Convert the log in memory; it is written (temp file, fsync, rename)
	// after the context, so a crash in between leaves an empty log and
	// running again redoes the channel.
	var buf bytes.Buffer
	var logged []loggedMessage
	seen := map[string]int{}
	daily := map[string][]string{}
	rel := id + "/log.jsonl"
	err = scanLines(filepath.Join(dir, "log.jsonl"), func(lineNo int, line []byte, torn bool) {
		if torn {
			cr.Problems = append(cr.Problems, fmt.Sprintf("%s:%d: torn last line (%d bytes), probably cut by a crash; skipped", rel, lineNo, len(line)))
			return
		}
		m, err := convert(line, id, seen)
		if err != nil {
			cr.Problems = append(cr.Problems, fmt.Sprintf("%s:%d: %v; skipped", rel, lineNo, err))
			return
		}
		out, _ := json.Marshal(m)
		buf.Write(append(out, '\n'))
		logged = append(logged, loggedMessage{Msg: m, End: int64(buf.Len())})
		cr.Messages++
		file, line2 := store.DailyLine(m, m.Timestamp)
		daily[file] = append(daily[file], line2)
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return cr, err
	}
	oldCtx := filepath.Join(dir, "context.jsonl")
	if info, err := os.Lstat(oldCtx); err == nil {
		if !info.Mode().IsRegular() {
			cr.Problems = append(cr.Problems, id+"/context.jsonl: not a regular file (symlink?); not read")
		} else if err := carryContext(ch, oldCtx, id+"/context.jsonl", logged, &cr); err != nil {
			return cr, err
		}
	}
	if buf.Len() > 0 {
		if err := ch.ReplaceLog(buf.Bytes()); err != nil {
			return cr, err
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "MEMORY.md")); err == nil {
		if err := copyFile(filepath.Join(dir, "MEMORY.md"), filepath.Join(ch.Dir(), "MEMORY.md")); err != nil {
			cr.Problems = append(cr.Problems, "MEMORY.md: "+err.Error())
		} else {
			cr.Files++
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "daily")); err != nil {
		// The old directory has no daily logs (mom did not write them):
		// build them from the converted messages.
		for _, file := range slices.Sorted(maps.Keys(daily)) {
			if err := ch.AppendDaily(file, strings.Join(daily[file], "")); err != nil {
				cr.Problems = append(cr.Problems, "daily/"+file+": "+err.Error())
			}
		}
	}
	for _, sub := range []string{"attachments", "skills", "scratch", "daily"} {
		n, problems := copyTree(filepath.Join(dir, sub), filepath.Join(ch.Dir(), sub))
		cr.Files += n
		cr.Problems = append(cr.Problems, problems...)
	}
	return cr, nil
}

// convert turns one old log line into a ChannelMessage.
func convert(line []byte, channelID string, seen map[string]int) (chat.ChannelMessage, error) {
	var o oldMessage
	if err := json.Unmarshal(line, &o); err != nil {
		return chat.ChannelMessage{}, fmt.Errorf("not JSON: %v", err)
	}
	id := rawString(o.TS)
	ts, err := parseTime(o.Date, id)
	if err != nil {
		return chat.ChannelMessage{}, err
	}
	if id == "" {
		id = strconv.FormatInt(ts.UnixNano(), 10)
	}
	// Keep ids unique: the old format could log two lines with one ts.
	if n := seen[id]; n > 0 {
		seen[id] = n + 1
		id = fmt.Sprintf("%s-%d", id, n)
	} else {
		seen[id] = 1
	}
	username := o.UserName
	if username == "" {
		username = o.User
	}
	m := chat.ChannelMessage{
		ID:          id,
		ChannelID:   channelID,
		Timestamp:   ts,
		Sender:      chat.Sender{ID: o.User, Username: username, DisplayName: o.DisplayName, IsBot: o.IsBot},
		Text:        o.Text,
		Attachments: convertAttachments(o.Attachments),
	}
	if m.Sender.ID == "" {
		if o.IsBot {
			m.Sender.ID, m.Sender.Username = "bot", "mother"
		} else {
			return chat.ChannelMessage{}, errors.New("no user")
		}
	}
	return m, nil
}

func rawString(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return strings.TrimSpace(string(raw)) // a number
}

// parseTime uses the ISO date, else a Slack-style "seconds.micros" ts.
func parseTime(date, ts string) (time.Time, error) {
	if date != "" {
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000Z07:00", "2006-01-02 15:04:05"} {
			if t, err := time.Parse(layout, date); err == nil {
				return t, nil
			}
		}
	}
	if sec, frac, ok := strings.Cut(ts, "."); ok {
		s, err1 := strconv.ParseInt(sec, 10, 64)
		us, err2 := strconv.ParseInt((frac + "000000")[:6], 10, 64)
		if err1 == nil && err2 == nil && s > 1_000_000_000 && s < 10_000_000_000 {
			return time.Unix(s, us*1000).UTC(), nil
		}
	}
	if date == "" {
		return time.Time{}, errors.New("no date")
	}
	return time.Time{}, fmt.Errorf("date %q is not ISO 8601", date)
}

// convertAttachments accepts the old forms: [{original, local}],
// [{name, path}], or plain strings.
func convertAttachments(raw json.RawMessage) []chat.ChannelAttachment {
	out := []chat.ChannelAttachment{}
	var items []json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &items) != nil {
		return out
	}
	for _, it := range items {
		var s string
		if json.Unmarshal(it, &s) == nil {
			out = append(out, chat.ChannelAttachment{Filename: filepath.Base(s), LocalPath: "attachments/" + filepath.Base(s)})
			continue
		}
		var o struct {
			Original string `json:"original"`
			Local    string `json:"local"`
			Name     string `json:"name"`
			Path     string `json:"path"`
			Mime     string `json:"mimeType"`
			Size     int64  `json:"size"`
		}
		if json.Unmarshal(it, &o) != nil {
			continue
		}
		local := o.Local
		if local == "" {
			local = o.Path
		}
		name := o.Original
		if name == "" {
			name = o.Name
		}
		if name == "" {
			name = filepath.Base(local)
		}
		if local == "" {
			local = name
		}
		out = append(out, chat.ChannelAttachment{Filename: name, LocalPath: "attachments/" + filepath.Base(local), MimeType: o.Mime, Size: o.Size})
	}
	return out
}

// migrateEvents copies event files, qualifying their channelId.
func migrateEvents(from, to, adapter string) (int, []string) {
	entries, err := os.ReadDir(from)
	if err != nil {
		return 0, nil
	}
	var problems []string
	n := 0
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			problems = append(problems, fmt.Sprintf("events/%s: %v", e.Name(), err))
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal(b, &ev); err != nil {
			problems = append(problems, fmt.Sprintf("events/%s: not JSON (%v); not copied", e.Name(), err))
			continue
		}
		if ch, ok := ev["channelId"].(string); ok && ch != "" && !strings.Contains(ch, "/") {
			ev["channelId"] = chat.QualifiedID(adapter, ch)
		}
		out, _ := json.MarshalIndent(ev, "", "  ")
		dst := filepath.Join(to, e.Name())
		if _, err := os.Stat(dst); err == nil {
			problems = append(problems, fmt.Sprintf("events/%s: already present in the new workspace; not overwritten", e.Name()))
			continue
		}
		if err := atomicfile.WriteFile(dst, append(out, '\n'), 0o600); err != nil {
			problems = append(problems, fmt.Sprintf("events/%s: %v", e.Name(), err))
			continue
		}
		n++
	}
	return n, problems
}

// copyTree copies regular files under from into to, skipping symlinks and
// anything that exists already.
func copyTree(from, to string) (int, []string) {
	if _, err := os.Stat(from); err != nil {
		return 0, nil
	}
	var problems []string
	n := 0
	var paths []string
	_ = filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", p, err))
			return nil
		}
		if !d.IsDir() {
			paths = append(paths, p)
		}
		return nil
	})
	sort.Strings(paths)
	for _, p := range paths {
		rel, _ := filepath.Rel(from, p)
		info, err := os.Lstat(p)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", rel, err))
			continue
		}
		if !info.Mode().IsRegular() {
			problems = append(problems, fmt.Sprintf("%s/%s: not a regular file (symlink?); not copied", filepath.Base(from), rel))
			continue
		}
		dst := filepath.Join(to, rel)
		if _, err := os.Stat(dst); err == nil {
			continue
		}
		if err := fsync.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", rel, err))
			continue
		}
		if err := copyFile(p, dst); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", rel, err))
			continue
		}
		n++
	}
	return n, problems
}

// scanLines calls fn with each non-blank line of path (without its
// newline) and its 1-based number; torn is set for a last line without a
// newline (cut by a crash). A missing file is fs.ErrNotExist.
func scanLines(path string, fn func(n int, line []byte, torn bool)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	for n := 1; ; n++ {
		line, rerr := br.ReadBytes('\n')
		complete := len(line) > 0 && line[len(line)-1] == '\n'
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			fn(n, trimmed, !complete && rerr == io.EOF)
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				return nil
			}
			return fmt.Errorf("read %s: %w", path, rerr)
		}
	}
}

func copyFile(from, to string) error {
	info, err := os.Lstat(from)
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return errors.New("not a regular file; not copied")
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to+".migrate-tmp", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(to + ".migrate-tmp")
		return err
	}
	if err := errors.Join(out.Sync(), out.Close()); err != nil {
		os.Remove(to + ".migrate-tmp")
		return err
	}
	if err := os.Rename(to+".migrate-tmp", to); err != nil {
		return err
	}
	// Keep the old modification time: daily logs and attachments are
	// history.
	return os.Chtimes(to, info.ModTime(), info.ModTime())
}
