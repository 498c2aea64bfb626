package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/mother-chat/mother/pkg/adapters/discord"  // registers "discord"
	_ "github.com/mother-chat/mother/pkg/adapters/slack"    // registers "slack"
	_ "github.com/mother-chat/mother/pkg/adapters/telegram" // registers "telegram"
	_ "github.com/mother-chat/mother/pkg/adapters/whatsapp" // registers "whatsapp"
	"github.com/mother-chat/mother/pkg/config"
)

// TestDocsListEveryAdapter keeps the docs' adapter lists in step with the
// adapters the binary registers: the index row of docs/README.md and
// docs/adapters.md name every registered type.
func TestDocsListEveryAdapter(t *testing.T) {
	types := config.AdapterTypes()
	if len(types) < 4 {
		t.Fatalf("registered adapter types %v: the imports above register four", types)
	}
	index, err := os.ReadFile(filepath.Join(repoRoot, "docs", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, line := range strings.Split(string(index), "\n") {
		if strings.Contains(line, "(adapters.md)") {
			row = strings.ToLower(line)
		}
	}
	page, err := os.ReadFile(filepath.Join(repoRoot, "docs", "adapters.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range types {
		if !strings.Contains(row, typ) {
			t.Errorf("docs/README.md's adapters row does not name %q: %s", typ, row)
		}
		if !strings.Contains(strings.ToLower(string(page)), "## "+typ) {
			t.Errorf("docs/adapters.md has no section for %q", typ)
		}
	}
}
