package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRefusals: what renga-agent refuses before it starts, with exit code 2 (as `renga agent
// run`): an unknown flag, an argument, a bad log level, a configuration it cannot use.
func TestRefusals(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(bad, []byte("renga_url: ftp://example.com\nstate_dir: /tmp/x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"unknown flag":    {"--nope"},
		"argument":        {"run"},
		"log level":       {"--log-level", "loud"},
		"missing config":  {"--config", filepath.Join(t.TempDir(), "missing.yaml")},
		"unusable config": {"--config", bad},
	} {
		if code := run(args); code != exitUsage {
			t.Errorf("%s: exit %d, want %d", name, code, exitUsage)
		}
	}
}
