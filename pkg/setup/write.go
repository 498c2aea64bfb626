package setup

import (
	"fmt"
	"path/filepath"

	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/fsync"
)

func (r *run) write(orig []byte) error {
	r.section("Result")
	abs, _ := filepath.Abs(r.o.DataDir)
	if len(r.changes) == 0 && r.exists {
		r.say("Nothing changed; %s left as it was.", r.path)
		r.nextSteps(abs)
		return nil
	}
	r.say("Changes:")
	for _, c := range r.changes {
		r.say("  %s", c)
	}
	if r.o.Interactive {
		ok, err := r.p.yes("Write "+r.path+"?", true)
		if err != nil {
			return err
		}
		if !ok {
			r.say("Nothing written.")
			return nil
		}
	}
	data, err := r.cfg.encode()
	if err != nil {
		return err
	}
	if err := fsync.MkdirAll(r.o.DataDir, 0o700); err != nil {
		return fmt.Errorf("make the data directory: %w", err)
	}
	if err := atomicfile.WriteFile(r.path, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", r.path, err)
	}
	r.say("Wrote %s (mode 0600).", r.path)
	if _, err := config.Load(r.o.DataDir, r.o.Getenv); err != nil {
		r.say("  ✗ but Mother does not accept it yet:\n%v", err)
		return fmt.Errorf("the written configuration does not load: %w", err)
	}
	r.say("  ✓ Mother accepts it (as mother --check-config would)")
	r.nextSteps(abs)
	return nil
}

func (r *run) nextSteps(abs string) {
	r.say("\nNext:")
	for _, n := range r.next {
		r.say("  - %s", n)
	}
	r.say("  %s --check-config %s", r.self(), abs)
	switch {
	case abs == "/var/lib/mother":
		r.say("  sudo chown -R mother:mother /var/lib/mother")
		r.say("  sudo systemctl enable --now mother && journalctl -u mother -f")
	case len(r.cfg.child("adapters").keys) == 0:
		// No chat platform: the terminal is where she answers.
		r.say("  %s --cli %s    (no chat platform is configured: Mother answers in this terminal)", r.self(), abs)
	default:
		r.say("  %s %s", r.self(), abs)
		r.say("(or as a service: deploy/README.md, with the data directory /var/lib/mother)")
	}
	if l := r.cfg.str("metrics", "listen"); l != "" {
		how := ""
		if r.cfg.str("metrics", "token") != "" {
			how = ", with metrics.token"
		}
		r.say("Then open %s: the status page (what Mother is doing, what went wrong%s).", statusURL(l), how)
	}
}

// self is how to run this Mother again, as the steps print it.
func (r *run) self() string { return orDefault(r.o.Self, "mother") }
