package agent_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"renga.dev/renga/agent"
	"renga.dev/renga/server/domain"
)

func TestConfigFileAndEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte(testKey("eu1")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "agent.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("renga_url: https://resolver.example.com/\nintake_key_file: " + keyFile + "\nstate_dir: " + dir + "\ninterval: 30s\nqueue_max_bytes: 8388608\n")
	c, err := agent.LoadConfig(path, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c.RengaURL != "https://resolver.example.com/" || c.IntakeKey != testKey("eu1") || c.Interval != 30*time.Second ||
		c.QueueMaxBytes != 8<<20 || c.AllowInsecureHTTP || c.StateDir != dir {
		t.Errorf("from the file: %+v", c)
	}
	env := map[string]string{"RENGA_AGENT_RENGA_URL": "http://127.0.0.1:8080", "RENGA_AGENT_ALLOW_INSECURE_HTTP": "true",
		"RENGA_AGENT_INTERVAL": "5s", "RENGA_AGENT_QUEUE_MAX_BYTES": "16777216", "RENGA_AGENT_STATE_DIR": "/tmp/x"}
	c, err = agent.LoadConfig(path, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.RengaURL != "http://127.0.0.1:8080" || !c.AllowInsecureHTTP || c.Interval != 5*time.Second || c.QueueMaxBytes != 16<<20 || c.StateDir != "/tmp/x" {
		t.Errorf("the environment wins: %+v", c)
	}
	// Only the environment, and the defaults.
	c, err = agent.LoadConfig("", func(k string) string {
		return map[string]string{"RENGA_AGENT_RENGA_URL": "https://r.example.com", "RENGA_AGENT_INTAKE_KEY": testKey("")}[k]
	})
	if err != nil || c.StateDir != agent.DefaultStateDir || c.Interval != agent.DefaultInterval || c.QueueMaxBytes != agent.DefaultQueueMaxBytes {
		t.Errorf("defaults: %+v %v", c, err)
	}
}

func TestBadConfigNamesTheSetting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := map[string]string{"RENGA_AGENT_RENGA_URL": "https://r.example.com", "RENGA_AGENT_INTAKE_KEY": testKey("a")}
	for _, tc := range []struct {
		env     map[string]string
		file    string
		setting string
	}{
		{map[string]string{"RENGA_AGENT_RENGA_URL": ""}, "", "renga_url"},
		{map[string]string{"RENGA_AGENT_RENGA_URL": "http://r.example.com"}, "", "renga_url"},
		{map[string]string{"RENGA_AGENT_RENGA_URL": "https://r.example.com?x=1"}, "", "renga_url"},
		{map[string]string{"RENGA_AGENT_RENGA_URL": "ftp://r.example.com"}, "", "renga_url"},
		{map[string]string{"RENGA_AGENT_INTAKE_KEY": ""}, "", "intake_key"},
		{map[string]string{"RENGA_AGENT_INTAKE_KEY": "renga_user_abc"}, "", "intake_key"},
		{map[string]string{"RENGA_AGENT_INTAKE_KEY": "renga_intake_EU_abc"}, "", "intake_key"},
		{map[string]string{"RENGA_AGENT_INTAKE_KEY_FILE": filepath.Join(dir, "missing")}, "", "intake_key_file"},
		{map[string]string{"RENGA_AGENT_INTERVAL": "often"}, "", "interval"},
		{map[string]string{"RENGA_AGENT_INTERVAL": "1ms"}, "", "interval"},
		{map[string]string{"RENGA_AGENT_QUEUE_MAX_BYTES": "lots"}, "", "queue_max_bytes"},
		{map[string]string{"RENGA_AGENT_QUEUE_MAX_BYTES": "1000"}, "", "queue_max_bytes"},
		{map[string]string{"RENGA_AGENT_ALLOW_INSECURE_HTTP": "maybe"}, "", "allow_insecure_http"},
	} {
		getenv := func(k string) string {
			if v, ok := tc.env[k]; ok {
				return v
			}
			return good[k]
		}
		_, err := agent.LoadConfig("", getenv)
		var ce *agent.ConfigError
		if !errors.As(err, &ce) || ce.Setting != tc.setting {
			t.Errorf("%v: %v, want an error naming %s", tc.env, err, tc.setting)
		}
	}
	// A bad value in the file is refused by the setting's name too.
	path := filepath.Join(dir, "agent.yaml")
	for content, setting := range map[string]string{
		"queue_max_bytes: lots\n":       "queue_max_bytes",
		"allow_insecure_http: maybe\n":  "allow_insecure_http",
		"interval: 5\n":                 "interval",
		"renga_url: http://x.example\n": "renga_url",
	} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := agent.LoadConfig(path, func(k string) string {
			if k == "RENGA_AGENT_RENGA_URL" && strings.HasPrefix(content, "renga_url") {
				return ""
			}
			return good[k]
		})
		var ce *agent.ConfigError
		if !errors.As(err, &ce) || ce.Setting != setting {
			t.Errorf("file %q: %v, want an error naming %s", content, err, setting)
		}
	}
	// An unknown setting in the file is refused, by name.
	if err := os.WriteFile(path, []byte("renga_url: https://r.example.com\nintake_keys: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.LoadConfig(path, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "intake_keys") {
		t.Errorf("unknown setting: %v", err)
	}
}

func TestDeploymentIdentifier(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]string{
		domain.NewIntakeKeySecret(""):       "",
		domain.NewIntakeKeySecret("eu1"):    "eu1",
		domain.NewIntakeKeySecret("acme-2"): "acme-2",
	} {
		got, err := agent.DeploymentIdentifier(key)
		if err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", key[:20], got, err, want)
		}
	}
	for _, bad := range []string{"", "renga_intake_", "renga_operator_x", "renga_intake_UPPER_x", "renga_intake_eu1_",
		"renga_intake_seventeen-chars-xx_x"} {
		if _, err := agent.DeploymentIdentifier(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// The agent signs exactly what the server verifies.
func TestStringToSignMatchesTheServer(t *testing.T) {
	t.Parallel()
	body := []byte(`{"batch_id":"b","observations":[]}`)
	a := agent.StringToSign("POST", "/api/v1/agent/observations?x=1", "1700000000", "ins_x", body)
	s := domain.StringToSign("POST", "/api/v1/agent/observations?x=1", "1700000000", "ins_x", body)
	if a != s {
		t.Errorf("agent %q\nserver %q", a, s)
	}
}
