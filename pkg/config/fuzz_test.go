package config

import (
	"errors"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the config parser and validator: they
// must never panic, and every rejection must be a list of field errors.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		`{"adapters": {"d": {"type": "discord", "botToken": "x", "dm": ["1"]}}}`,
		`{"chicks": {"timeout": "5m", "hosts": [{"address": "tcp://h:2376"}]}}`,
		`{"adapters": {"s": {"type": "slack", "dm": 3}}, "log": {"level": 1}}`,
		`{"mcpServers": {"n": {"command": "x", "timeout": "x"}}}`,
		`[`, `null`, `{"a":`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var cfg Config
		if err := Parse(b, &cfg); err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("Parse error %v is not a field error list", err)
			}
			return
		}
		cfg.ApplyEnv(func(string) string { return "" })
		cfg.SetDefaults(t.TempDir())
		if err := cfg.Validate(); err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("Validate error %v is not a field error list", err)
			}
		}
	})
}
