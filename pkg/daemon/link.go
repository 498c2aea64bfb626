package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/dataformat"
)

// Link links the account of adapter name, of type typ, in
// <data>/config.json (mother link TYPE NAME DATA): WhatsApp shows a QR code
// on term and takes a phone number for a pairing code instead. Types
// configured by tokens have nothing to link (a usage error).
func Link(ctx context.Context, dataDir, typ, name string, getenv func(string) string, term chat.Terminal, logger *slog.Logger) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	if _, err := dataformat.Check(dataDir, dataformat.Release); err != nil {
		return err
	}
	cfg, err := loadConfig(dataDir, getenv)
	if err != nil {
		return err
	}
	ac, ok := cfg.Adapters[name]
	switch {
	case !ok:
		return usageErr(fmt.Errorf("no adapter %q in %s/config.json (add {\"type\": %q} under adapters first)", name, dataDir, typ))
	case ac.Type != typ:
		return usageErr(fmt.Errorf("adapter %q is of type %q, not %q", name, ac.Type, typ))
	}
	// Linking writes under DATA/state: the directory in this release's
	// format first, and no rollback under it meanwhile.
	dd, err := dataformat.Prepare(dataDir, dataformat.Release)
	if err != nil {
		return err
	}
	defer dd.Close()
	err = chat.Link(ctx, chat.Env{Name: name, Config: ac, Logger: logger, DataDir: dataDir}, term)
	if errors.Is(err, chat.ErrNoLink) {
		return usageErr(fmt.Errorf("adapter %q (%s): %w", name, typ, err))
	}
	return err
}

// checkAdapters runs each adapter type's own check (a WhatsApp session
// that is missing or logged out) for --check-config; every problem is
// listed, as config problems are.
func checkAdapters(dataDir string, cfg *config.Config) error {
	var problems []string
	for _, name := range cfg.SortedAdapterNames() {
		env := chat.Env{Name: name, Config: cfg.Adapters[name], DataDir: dataDir, Logger: slog.New(slog.DiscardHandler)}
		if err := chat.Check(context.Background(), env); err != nil {
			problems = append(problems, fmt.Sprintf("adapters.%s: %v", name, err))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return invalid(errors.New(strings.Join(problems, "\n")))
}
