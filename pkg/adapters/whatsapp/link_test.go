package whatsapp

import (
	"bytes"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"rsc.io/qr"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
)

func chatEnv(dir string) chat.Env {
	return chat.Env{Name: "wa", Config: config.Adapter{Type: "whatsapp", Settings: &Settings{}}, DataDir: dir, Logger: slog.New(slog.DiscardHandler)}
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// TestWriteQR reads the drawn code back, module by module, and compares
// it with the QR code of the text.
func TestWriteQR(t *testing.T) {
	t.Parallel()
	const code = "2@AbCdEfGhIjKlMnOpQrStUvWxYz0123456789+/=,Zm9vYmFy,YmF6cXV4,c2VjcmV0"
	var b bytes.Buffer
	WriteQR(&b, code)
	want, err := qr.Encode(code, qr.L)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(ansi.ReplaceAllString(b.String(), ""), "\n"), "\n")
	n := want.Size + 4
	if len(lines) != (n+1)/2 {
		t.Fatalf("%d lines, want %d for a %d-module code with its quiet zone", len(lines), (n+1)/2, want.Size)
	}
	for ly, l := range lines {
		rs := []rune(l)
		if len(rs) != n {
			t.Fatalf("line %d has %d columns, want %d", ly, len(rs), n)
		}
		for x, r := range rs {
			top := r == '█' || r == '▀'
			bottom := r == '█' || r == '▄'
			for k, got := range []bool{top, bottom} {
				y := 2*ly + k
				mx, my := x-2, y-2
				exp := mx >= 0 && my >= 0 && mx < want.Size && my < want.Size && want.Black(mx, my)
				if y < n && got != exp {
					t.Fatalf("module (%d,%d) drawn dark=%v, want %v", mx, my, got, exp)
				}
			}
		}
	}
	if !strings.Contains(b.String(), "\x1b[30;47m") {
		t.Errorf("the code is not drawn black on white")
	}
}

func TestPhoneNumber(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"+49 151 2345678":   "491512345678",
		"0049-151-2345678":  "491512345678",
		"+1 (555) 010-9999": "15550109999",
		"491512345678":      "491512345678",
	} {
		if got, err := PhoneNumber(in); err != nil || got != want {
			t.Errorf("PhoneNumber(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"0151 2345678", "+49 abc", "+12", "+1234567890123456"} {
		if got, err := PhoneNumber(bad); err == nil {
			t.Errorf("PhoneNumber(%q) = %q, want an error", bad, got)
		}
	}
}

// TestLinkAlreadyLinked: linking an adapter whose session holds a device
// says so and leaves it alone (no connection is made).
func TestLinkAlreadyLinked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := chatEnv(dir)
	s, err := OpenSession(t.Context(), SessionPath(dir, "wa"), nil)
	if err != nil {
		t.Fatal(err)
	}
	dev, _ := s.Device(t.Context())
	saveLinkedDevice(t, dev, newTestDeviceJID())
	s.Close()
	var out bytes.Buffer
	if err := Link(t.Context(), env, chat.Terminal{Out: &out}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "already linked to +4915100000001") {
		t.Errorf("Link said %q", out.String())
	}
}

func TestLinkRefusesBadAdmins(t *testing.T) {
	t.Parallel()
	env := chatEnv(t.TempDir())
	env.Config.Admins = []string{"+49 151"}
	if err := Link(t.Context(), env, chat.Terminal{Out: &bytes.Buffer{}}); err == nil || !strings.Contains(err.Error(), "admins[0]") {
		t.Errorf("Link with a bad admin = %v", err)
	}
}
