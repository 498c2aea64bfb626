package config

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestMetricsTokenOpensOtherAddresses: a non-loopback metrics.listen is
// accepted with a token, from config.json or MOTHER_METRICS_TOKEN, and the
// token never prints.
func TestMetricsTokenOpensOtherAddresses(t *testing.T) {
	t.Parallel()
	const tok = "metrics-token-0123456789abcdef"
	for name, tc := range map[string]struct {
		body string
		env  map[string]string
	}{
		"config": {`{"metrics": {"listen": "0.0.0.0:9464", "token": "` + tok + `"}}`, nil},
		"env":    {`{"metrics": {"listen": "0.0.0.0:9464"}}`, map[string]string{"MOTHER_METRICS_TOKEN": tok}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg, err := load(t, tc.body, tc.env)
			if err != nil {
				t.Fatalf("Load(%s) = %v, want it accepted", tc.body, err)
			}
			if cfg.Metrics.Token.Value() != tok {
				t.Errorf("metrics.token = %q, want the configured one", cfg.Metrics.Token.Value())
			}
			if b, _ := json.Marshal(cfg); strings.Contains(string(b), tok) || strings.Contains(fmt.Sprintf("%+v", cfg), tok) {
				t.Error("the metrics token prints")
			}
		})
	}
}

// TestSecretValues: every secret of a configuration is found, the
// adapters' tokens among them, and nothing that is not one.
func TestSecretValues(t *testing.T) {
	t.Parallel()
	body := `{
		"adapters": {"slack-acme": {"type": "slack", "botToken": "xoxb-bot-SECRET1", "appToken": "xapp-app-SECRET2"}},
		"providers": {"anthropic": {"apiKey": "sk-ant-SECRET3"}},
		"mcpServers": {"notes": {"command": "notes", "env": {"NOTES_KEY": "notes-SECRET4", "DEBUG": "1", "MODE": "verbose"}}, "web": {"url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer web-SECRET5"}}},
		"metrics": {"listen": "127.0.0.1:9464", "token": "metrics-SECRET6-0123456789"}
	}`
	cfg, err := load(t, body, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.SecretValues()
	want := []string{"metrics-SECRET6-0123456789", "Bearer web-SECRET5", "xapp-app-SECRET2", "xoxb-bot-SECRET1", "sk-ant-SECRET3", "notes-SECRET4"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("SecretValues() = %q, want %q", got, want)
	}
}
