package cli

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"renga.dev/renga/agent"
)

func TestAgentRunFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdAgentRun, []flagCase[agentRunOptions]{
		{name: "config", args: []string{"--config", "agent.yaml"}, want: agentRunOptions{Config: "agent.yaml", LogLevel: "info"}},
		{name: "environment only", args: nil, want: agentRunOptions{LogLevel: "info"}},
		{name: "log level", args: []string{"--log-level", "debug"}, want: agentRunOptions{LogLevel: "debug"}},
		{name: "bad log level", args: []string{"--log-level", "loud"}, wantErr: "--log-level must be"},
		{name: "arguments", args: []string{"agent.yaml"}, wantErr: `"agent.yaml"`},
	})
}

func TestAgentStatusFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdAgentStatus, []flagCase[agentStatusOptions]{
		{name: "config", args: []string{"--config", "agent.yaml"}, want: agentStatusOptions{Config: "agent.yaml"}},
		{name: "arguments", args: []string{"x"}, wantErr: `"x"`},
	})
}

func TestResolverServeFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdResolverServe, []flagCase[resolverServeOptions]{
		{name: "defaults", args: []string{"--map", "m.yaml"}, want: resolverServeOptions{Listen: "127.0.0.1:8081", Map: "m.yaml", Rate: 10, Burst: 50}},
		{name: "everything", args: []string{"--map", "m.yaml", "--listen", ":443", "--rate", "0", "--burst", "5", "--tls-cert", "c", "--tls-key", "k"},
			check: func(t *testing.T, got *resolverServeOptions) {
				if got.Listen != ":443" || got.Rate != 0 || got.Burst != 5 || got.TLS.Cert != "c" || got.TLS.Key != "k" {
					t.Errorf("got %+v", got)
				}
			}},
		{name: "no map", args: nil, wantErr: "--map is required"},
		{name: "cert without key", args: []string{"--map", "m", "--tls-cert", "c"}, wantErr: "--tls-cert and --tls-key go together"},
		{name: "negative rate", args: []string{"--map", "m", "--rate", "-1"}, wantErr: "--rate must be"},
	})
}

func runAgentCommand(env map[string]string, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	f := &Factory{Stdout: &out, Stderr: &errOut, Stdin: strings.NewReader(""), Getenv: func(k string) string { return env[k] }}
	defer f.Close()
	return Run(f, args), out.String(), errOut.String()
}

// A bad configuration refuses to start, naming the setting, with the usage exit code.
func TestAgentRunRefusesABadConfiguration(t *testing.T) {
	t.Parallel()
	code, _, stderr := runAgentCommand(map[string]string{"RENGA_AGENT_RENGA_URL": "http://renga.example.com",
		"RENGA_AGENT_INTAKE_KEY": "renga_intake_x"}, "agent", "run")
	if code != ExitUsage || !strings.Contains(stderr, "renga_url") || !strings.Contains(stderr, "allow_insecure_http") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	code, _, stderr = runAgentCommand(nil, "agent", "run", "--config", filepath.Join(t.TempDir(), "missing.yaml"))
	if code != ExitUsage || !strings.Contains(stderr, "missing.yaml") {
		t.Errorf("missing file: exit %d: %s", code, stderr)
	}
}

func TestAgentStatusPrintsTheState(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := map[string]string{"RENGA_AGENT_RENGA_URL": "https://resolver.example.com", "RENGA_AGENT_INTAKE_KEY": "renga_intake_eu1_x",
		"RENGA_AGENT_STATE_DIR": dir}
	if code, _, stderr := runAgentCommand(env, "agent", "status"); code != ExitFailure || !strings.Contains(stderr, "has not started there yet") {
		t.Errorf("before any start: exit %d %s", code, stderr)
	}
	cfg, err := agent.LoadConfig("", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(cfg, agent.Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, _, err := a.Queue().Add("test.tick", time.Now(), map[string]any{}); err != nil {
			t.Fatal(err)
		}
	}
	_ = a.Close()
	code, stdout, stderr := runAgentCommand(env, "agent", "status")
	if code != 0 {
		t.Fatalf("exit %d %s", code, stderr)
	}
	for _, want := range []string{"installation_id\t" + a.InstallationID(), "home\t(not resolved)", "queue_depth\t3", "last_successful_send\tnever",
		"renga_url\thttps://resolver.example.com"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, stdout)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "identity.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("identity.json: %v %v", fi, err)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
