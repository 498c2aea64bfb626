package whatsapp

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
)

// DefaultDeviceName is how the linked device appears in the phone's list
// of linked devices.
const DefaultDeviceName = "Mother"

// Settings are a WhatsApp adapter's own fields in config.json, beside the
// shared ones (type, admins, dm, quiet, quietChannels). There is no token:
// the account is linked once (mother link whatsapp NAME DATA) and the
// session kept in a file.
type Settings struct {
	// Session is the session file (an absolute path, or relative to the
	// data directory). Empty: state/whatsapp/<name>.db under the data
	// directory.
	Session string `json:"session"`
	// DeviceName is the name the phone lists the linked device under
	// (default "Mother").
	DeviceName string `json:"deviceName"`
	// Details shows tool details and usage in the chat. WhatsApp has
	// no threads, so they would go into the chat itself: off by default
	// (Mother is quiet on WhatsApp); quiet and quietChannels still hide
	// them when this is on.
	Details bool `json:"details"`
}

// Validate implements config.AdapterSettings.
func (s *Settings) Validate(bad func(field, format string, args ...any)) {
	if strings.ContainsRune(s.Session, 0) {
		bad("session", "contains a NUL byte")
	}
	if s.Session != "" && strings.HasSuffix(s.Session, string(filepath.Separator)) {
		bad("session", "must name a file, not a directory: %q", s.Session)
	}
	if len(s.DeviceName) > 50 || strings.ContainsAny(s.DeviceName, "\n\r\t") {
		bad("deviceName", "1 to 50 characters on one line")
	}
}

// Spec declares the "whatsapp" type's configuration.
var Spec = config.AdapterSpec{
	NewSettings: func() config.AdapterSettings { return &Settings{} },
	Fields: []config.FieldDoc{
		{Name: "session", Type: "path", Default: "state/whatsapp/<name>.db", Doc: "The linked-device session (SQLite, mode 0600); relative paths are under the data directory."},
		{Name: "deviceName", Type: "string", Default: DefaultDeviceName, Doc: "The name the phone shows under Linked devices."},
		{Name: "details", Type: "bool", Default: "false", Doc: "Show tool details and usage in the chat (WhatsApp has no threads; quiet and quietChannels still apply)."},
	},
}

func init() {
	chat.Register("whatsapp", chat.Type{
		Config: Spec,
		New: func(env chat.Env) (chat.Adapter, error) {
			return New(env, Options{})
		},
		Check: func(ctx context.Context, env chat.Env) error {
			if err := checkIDs(env.Config); err != nil {
				return err
			}
			return CheckSession(ctx, sessionPath(env), env.Name)
		},
		Link: Link,
	})
}

// settingsOf returns the adapter's WhatsApp settings (zero when absent).
func settingsOf(env chat.Env) Settings {
	if s, ok := env.Config.Settings.(*Settings); ok && s != nil {
		return *s
	}
	return Settings{}
}

// sessionPath is the session file of the adapter env describes.
func sessionPath(env chat.Env) string {
	s := settingsOf(env)
	switch {
	case s.Session == "":
		return SessionPath(env.DataDir, env.Name)
	case filepath.IsAbs(s.Session):
		return s.Session
	}
	return filepath.Join(env.DataDir, s.Session)
}

// checkIDs checks that admins and the dm list are phone-number JIDs, the
// form the adapter gives senders (4915112345678@s.whatsapp.net): anything
// else would never match anyone.
func checkIDs(cfg config.Adapter) error {
	check := func(field string, ids []string) error {
		for i, id := range ids {
			if !isUserID(id) {
				return fmt.Errorf("%s[%d]: %q is not a phone-number JID: write the number with its country code and no +, then @s.whatsapp.net (4915112345678@s.whatsapp.net)", field, i, id)
			}
		}
		return nil
	}
	if err := check("admins", cfg.Admins); err != nil {
		return err
	}
	return check("dm", cfg.DM.Users)
}

// isUserID reports whether id is a phone-number JID without a device.
func isUserID(id string) bool {
	num, ok := strings.CutSuffix(id, "@"+userServer)
	return ok && len(num) >= 5 && len(num) <= 20 && strings.Trim(num, "0123456789") == ""
}
