package whatsapp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types/events"
	"rsc.io/qr"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
)

// Link links a WhatsApp account to the adapter env describes (mother link
// whatsapp NAME DATA): it shows a QR code to scan with the phone, and
// takes a phone number typed on term instead to give a pairing code. An
// adapter already linked is left as it is.
func Link(ctx context.Context, env chat.Env, term chat.Terminal) error {
	lg := env.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("component", "whatsapp", "adapter", env.Name)
	if err := checkIDs(env.Config); err != nil {
		return fmt.Errorf("whatsapp: %w", err)
	}
	s, err := OpenSession(ctx, sessionPath(env), lg)
	if err != nil {
		return err
	}
	defer s.Close()
	if jid, err := s.State(ctx, env.Name); err == nil {
		fmt.Fprintf(term.Out, "WhatsApp adapter %q is already linked to +%s (session %s).\nTo link another account: stop Mother, move that file away, and run this again.\n", env.Name, jid.User, s.Path)
		return nil
	}
	name := settingsOf(env).DeviceName
	if name == "" {
		name = DefaultDeviceName
	}
	return linkSession(ctx, s, name, lg, term, clock.OrReal(env.Clock))
}

// linkTimeout bounds a whole linking attempt (WhatsApp itself stops
// offering QR codes after about two and a half minutes).
const linkTimeout = 5 * time.Minute

// linkSession pairs a fresh device in s with the phone.
func linkSession(ctx context.Context, s *Session, deviceName string, lg *slog.Logger, term chat.Terminal, clk clock.Clock) error {
	dev, err := s.Forget(ctx)
	if err != nil {
		return err
	}
	store.SetOSInfo(deviceName, [3]uint32{1, 0, 0})
	cli := whatsmeow.NewClient(dev, waLogger(lg, "link"))
	connected := make(chan struct{}, 1)
	cli.AddEventHandler(func(evt any) {
		if _, ok := evt.(*events.Connected); ok {
			select {
			case connected <- struct{}{}:
			default:
			}
		}
	})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	qrs, err := cli.GetQRChannel(ctx)
	if err != nil {
		return fmt.Errorf("whatsapp link: %w", err)
	}
	if err := cli.Connect(); err != nil {
		return fmt.Errorf("whatsapp link: connect: %w", err)
	}
	defer cli.Disconnect()
	out := term.Out
	fmt.Fprintln(out, "Link Mother to WhatsApp: on the phone open WhatsApp → Settings → Linked devices → Link a device, and scan the code below.")
	var phones <-chan string
	if term.In != nil {
		fmt.Fprintln(out, "Or type the account's phone number with its country code (+49 151 2345678) and press Enter for a pairing code instead.")
		phones = readLines(ctx, term.In)
	}
	deadline := clock.After(clk, linkTimeout)
	for {
		select {
		case item, ok := <-qrs:
			if !ok {
				return errors.New("whatsapp link: WhatsApp ended the linking without success; run it again")
			}
			switch item.Event {
			case whatsmeow.QRChannelEventCode:
				fmt.Fprintln(out)
				WriteQR(out, item.Code)
				fmt.Fprintf(out, "(a new code follows in %s)\n", item.Timeout.Round(time.Second))
			case whatsmeow.QRChannelSuccess.Event:
				if dev.ID == nil {
					return errors.New("whatsapp link: WhatsApp reported success but no device was stored")
				}
				if err := s.ClearLoggedOut(ctx); err != nil {
					return fmt.Errorf("whatsapp link: %w", err)
				}
				fmt.Fprintf(out, "Linked to +%s. The session is in %s; start Mother now.\n", dev.ID.User, s.Path)
				// Let the first connection as a linked device finish (it
				// uploads the device's keys) before disconnecting.
				select {
				case <-connected:
				case <-clock.After(clk, 30*time.Second):
				case <-ctx.Done():
				}
				return nil
			case whatsmeow.QRChannelTimeout.Event:
				return errors.New("whatsapp link: no code was scanned in time; run it again")
			case whatsmeow.QRChannelEventError:
				return fmt.Errorf("whatsapp link: %w", item.Error)
			default:
				return fmt.Errorf("whatsapp link: %s", item.Event)
			}
		case line, ok := <-phones:
			if !ok {
				phones = nil
				continue
			}
			num, err := PhoneNumber(line)
			if err != nil {
				fmt.Fprintf(out, "%v; try again.\n", err)
				continue
			}
			code, err := cli.PairPhone(ctx, num, true, whatsmeow.PairClientChrome, "Chrome ("+deviceName+")")
			if err != nil {
				fmt.Fprintf(out, "No pairing code: %v\n", err)
				continue
			}
			fmt.Fprintf(out, "On the phone: the notification from WhatsApp (or Linked devices → Link a device → Link with phone number instead), then enter: %s\n", code)
		case <-deadline:
			return errors.New("whatsapp link: gave up after 5 minutes; run it again")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// readLines sends the lines of r until it ends or ctx does.
func readLines(ctx context.Context, r io.Reader) <-chan string {
	ch := make(chan string)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" {
				continue
			}
			select {
			case ch <- line:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// PhoneNumber reads a phone number as people write it ("+49 151 2345678",
// "0049-151-2345678") into the digits WhatsApp wants, country code first.
func PhoneNumber(s string) (string, error) {
	s = strings.TrimSpace(s)
	intl := strings.HasPrefix(s, "+") || strings.HasPrefix(s, "00")
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == '+' || r == ' ' || r == '-' || r == '(' || r == ')' || r == '.' || r == '/':
		default:
			return "", fmt.Errorf("%q is not a phone number", s)
		}
	}
	num := b.String()
	if strings.HasPrefix(s, "00") {
		num = strings.TrimPrefix(num, "00")
	}
	if !intl && strings.HasPrefix(num, "0") {
		return "", fmt.Errorf("%q looks like a national number: write it with the country code (+49 …)", s)
	}
	if len(num) < 7 || len(num) > 15 {
		return "", fmt.Errorf("%q: a phone number has 7 to 15 digits with its country code", s)
	}
	return num, nil
}

// WriteQR draws text as a QR code with half blocks, two rows of modules
// per line, dark on light whatever the terminal's colours (ANSI black on
// white), with a quiet zone of two modules.
func WriteQR(w io.Writer, text string) {
	code, err := qr.Encode(text, qr.L)
	if err != nil {
		fmt.Fprintf(w, "(cannot draw the QR code: %v)\n", err)
		return
	}
	const quiet = 2
	n := code.Size + 2*quiet
	dark := func(x, y int) bool {
		x, y = x-quiet, y-quiet
		return x >= 0 && y >= 0 && x < code.Size && y < code.Size && code.Black(x, y)
	}
	var b strings.Builder
	for y := 0; y < n; y += 2 {
		b.WriteString("\x1b[30;47m")
		for x := 0; x < n; x++ {
			top, bottom := dark(x, y), y+1 < n && dark(x, y+1)
			switch {
			case top && bottom:
				b.WriteString("█")
			case top:
				b.WriteString("▀")
			case bottom:
				b.WriteString("▄")
			default:
				b.WriteString(" ")
			}
		}
		b.WriteString("\x1b[0m\n")
	}
	io.WriteString(w, b.String())
}
