package whatsapp

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/fsync"
	signallog "go.mau.fi/libsignal/logger"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/store/sqlstore"
	"go.mau.fi/whatsmeow/types"
	waLog "go.mau.fi/whatsmeow/util/log"

	// The pure-Go SQLite driver ("sqlite"): Mother stays a static
	// CGO_ENABLED=0 binary.
	_ "modernc.org/sqlite"
)

// Errors a session check reports; callers branch on them.
var (
	// ErrNotLinked: the session holds no linked device yet.
	ErrNotLinked = errors.New("not linked")
	// ErrLoggedOut: the phone (or WhatsApp) ended the linked session.
	ErrLoggedOut = errors.New("logged out")
)

// SessionPath is where the adapter named name keeps its session under
// Mother's data directory.
func SessionPath(dataDir, name string) string {
	return filepath.Join(dataDir, "state", "whatsapp", name+".db")
}

// Session is a WhatsApp account's linked-device session: whatsmeow's SQL
// store (device keys, Signal sessions, contacts) in one SQLite file of mode
// 0600, plus two small tables of Mother's own: whether the session was
// logged out, and the ids of the messages already handled (duplicates
// after reconnects and offline sync are dropped across restarts).
type Session struct {
	Path      string
	db        *sql.DB
	container *sqlstore.Container
}

// OpenSession opens (creating it if needed) the session file at path.
// A file that is not a usable session (corrupted, not SQLite) is an error
// that names the file and says how to start over.
func OpenSession(ctx context.Context, path string, lg *slog.Logger) (*Session, error) {
	if err := fsync.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("whatsapp session: %w", err)
	}
	// Create the file 0600 before SQLite does (it would use the umask),
	// and tighten a file someone loosened: it holds the account's keys.
	// SQLite gives its journal files the database's mode.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("whatsapp session: %w", err)
	}
	f.Close()
	if err := os.Chmod(path, 0o600); err != nil {
		return nil, fmt.Errorf("whatsapp session: %w", err)
	}
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?_pragma=foreign_keys(1)&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("whatsapp session %s: %w", path, err)
	}
	// The pragmas in the DSN are applied to every connection the pool
	// opens (foreign keys are per connection in SQLite); WAL lets readers
	// and the writer work at once, busy_timeout waits out the rest. The
	// pool is not limited to one connection: whatsmeow, like its own
	// example, may query outside a transaction while one is open.
	unusable := func(err error) error {
		db.Close()
		return fmt.Errorf("whatsapp session %s is unusable (%v): move the file away and link again with `mother link whatsapp NAME DATA`", path, err)
	}
	if err := db.PingContext(ctx); err != nil {
		return nil, unusable(err)
	}
	if _, err := db.ExecContext(ctx, `PRAGMA quick_check`); err != nil {
		return nil, unusable(err)
	}
	c := sqlstore.NewWithDB(db, "sqlite3", waLogger(lg, "store"))
	if err := c.Upgrade(ctx); err != nil {
		return nil, unusable(err)
	}
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS mother_state (key TEXT PRIMARY KEY, value TEXT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS mother_seen (id TEXT PRIMARY KEY, at INTEGER NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS mother_seen_at ON mother_seen (at)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return nil, unusable(err)
		}
	}
	return &Session{Path: path, db: db, container: c}, nil
}

// Close closes the file.
func (s *Session) Close() error { return s.db.Close() }

// Device returns the linked device, or a new unlinked one (its ID is nil)
// when none was linked.
func (s *Session) Device(ctx context.Context) (*store.Device, error) {
	d, err := s.container.GetFirstDevice(ctx)
	if err != nil {
		return nil, fmt.Errorf("whatsapp session %s: read device: %w", s.Path, err)
	}
	return d, nil
}

// Forget deletes the linked device (after a logout, before linking
// again) and returns a fresh unlinked one.
func (s *Session) Forget(ctx context.Context) (*store.Device, error) {
	d, err := s.Device(ctx)
	if err != nil {
		return nil, err
	}
	if d.ID != nil {
		if err := d.Delete(ctx); err != nil {
			return nil, fmt.Errorf("whatsapp session %s: delete the old device: %w", s.Path, err)
		}
	}
	return s.container.NewDevice(), nil
}

const loggedOutKey = "logged_out"

// MarkLoggedOut records that WhatsApp ended the session, and why.
func (s *Session) MarkLoggedOut(ctx context.Context, reason string, at time.Time) error {
	v := at.UTC().Format(time.RFC3339) + " " + reason
	_, err := s.db.ExecContext(ctx, `INSERT INTO mother_state (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`, loggedOutKey, v)
	return err
}

// ClearLoggedOut forgets a logout (a new link succeeded).
func (s *Session) ClearLoggedOut(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM mother_state WHERE key = ?`, loggedOutKey)
	return err
}

// LoggedOut reports a recorded logout: when, and why.
func (s *Session) LoggedOut(ctx context.Context) (reason string, ok bool, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT value FROM mother_state WHERE key = ?`, loggedOutKey).Scan(&reason)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return reason, true, nil
}

// State is the session's state as a check reports it: nil when linked,
// else an error wrapping ErrNotLinked or ErrLoggedOut that says what to do.
func (s *Session) State(ctx context.Context, name string) (types.JID, error) {
	if reason, ok, err := s.LoggedOut(ctx); err != nil {
		return types.EmptyJID, fmt.Errorf("whatsapp session %s: %w", s.Path, err)
	} else if ok {
		return types.EmptyJID, fmt.Errorf("%w (%s): link again with `mother link whatsapp %s DATA`", ErrLoggedOut, reason, name)
	}
	d, err := s.Device(ctx)
	if err != nil {
		return types.EmptyJID, err
	}
	if d.ID == nil {
		return types.EmptyJID, fmt.Errorf("%w yet: run `mother link whatsapp %s DATA` (or start Mother in a terminal to scan the QR code)", ErrNotLinked, name)
	}
	return *d.ID, nil
}

// seenKeep is how long handled message ids are remembered; WhatsApp keeps
// undelivered messages for its offline sync for about as long.
const seenKeep = 30 * 24 * time.Hour

// MarkSeen records a message id as handled and reports whether it was new.
// Ids older than seenKeep are dropped now and then.
func (s *Session) MarkSeen(ctx context.Context, id string, now time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO mother_seen (id, at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING`, id, now.Unix())
	if err != nil {
		return true, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return true, err
	}
	return n == 1, nil
}

// TrimSeen forgets ids handled before now - seenKeep.
func (s *Session) TrimSeen(ctx context.Context, now time.Time) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM mother_seen WHERE at < ?`, now.Add(-seenKeep).Unix())
	return err
}

// CheckSession opens the session of adapter name read-only in spirit (it
// creates nothing a start would not) and reports whether it is linked.
func CheckSession(ctx context.Context, path, name string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: no session at %s: run `mother link whatsapp %s DATA` (or start Mother in a terminal to scan the QR code)", ErrNotLinked, path, name)
	}
	s, err := OpenSession(ctx, path, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	_, err = s.State(ctx, name)
	return err
}

func init() {
	// libsignal installs its default logger lazily, from whichever
	// goroutine logs first, unsynchronised (a data race when two devices
	// sign at once); install one here, before any goroutine can, that
	// sends its warnings and errors to slog instead of standard output.
	var l signallog.Loggable = signalLogger{}
	signallog.Setup(&l)
}

// signalLogger is libsignal's logger: warnings and errors to slog's
// default logger, the rest dropped.
type signalLogger struct{}

func (signalLogger) Debug(string, string) {}
func (signalLogger) Info(string, string)  {}
func (signalLogger) Warning(caller, msg string) {
	slog.Warn("libsignal: "+msg, "component", "whatsapp", "caller", caller)
}
func (signalLogger) Error(caller, msg string) {
	slog.Error("libsignal: "+msg, "component", "whatsapp", "caller", caller)
}
func (signalLogger) Configure(string) {}

// waLogger bridges whatsmeow's logger to slog (nil: discard).
func waLogger(lg *slog.Logger, module string) waLog.Logger {
	if lg == nil {
		return waLog.Noop
	}
	return &slogBridge{lg: lg.With("module", module)}
}

type slogBridge struct{ lg *slog.Logger }

func (b *slogBridge) Errorf(msg string, args ...any) {
	b.lg.Error("whatsmeow: " + strings.TrimSpace(fmt.Sprintf(msg, args...)))
}

func (b *slogBridge) Warnf(msg string, args ...any) {
	b.lg.Warn("whatsmeow: " + strings.TrimSpace(fmt.Sprintf(msg, args...)))
}

// Infof goes to debug: whatsmeow's info lines are chatty.
func (b *slogBridge) Infof(msg string, args ...any) {
	b.lg.Debug("whatsmeow: " + strings.TrimSpace(fmt.Sprintf(msg, args...)))
}

func (b *slogBridge) Debugf(msg string, args ...any) {
	if b.lg.Enabled(context.Background(), slog.LevelDebug-4) {
		b.lg.Log(context.Background(), slog.LevelDebug-4, "whatsmeow: "+fmt.Sprintf(msg, args...))
	}
}

func (b *slogBridge) Sub(module string) waLog.Logger {
	return &slogBridge{lg: b.lg.With("sub", module)}
}
