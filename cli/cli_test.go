package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"renga.dev/renga/cli"
	"renga.dev/renga/server/servertest"
)

func TestMain(m *testing.M) {
	cli.Version = "test"
	servertest.Main(m)
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs the renga command line with env as its whole environment.
func run(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	f := &cli.Factory{Stdout: &out, Stderr: &errOut, Stdin: strings.NewReader(""),
		Getenv: func(k string) string { return env[k] }}
	defer f.Close()
	code := cli.Run(f, args)
	return result{code, out.String(), errOut.String()}
}

// modes gives the environment of a remote client and of a release command on one deployment.
func modes(t *testing.T, e *servertest.Env, token string) (remote, local map[string]string) {
	remote = map[string]string{"RENGA_URL": e.URL, "RENGA_OPERATOR_TOKEN": token}
	// The release command reads the same configuration the server was started with.
	local = map[string]string{"RENGA_DATABASE_URL": e.DBURL, "RENGA_ENV": "development",
		"RENGA_PUBLIC_URL": e.Config.PublicURL}
	return remote, local
}

var volatile = regexp.MustCompile(`"(id|created_at|updated_at|slug|display_name)": "[^"]*"`)

func TestCommandsRemoteAndLocalPrintTheSameJSON(t *testing.T) {
	t.Parallel()
	e := servertest.Start(t)
	remote, local := modes(t, e, e.Token(t, servertest.AllScopes()...))

	// Reads of the same state print byte-identical JSON either way.
	created := run(t, remote, "-o", "json", "org", "create", "acme", "--display-name", "Acme")
	if created.code != 0 {
		t.Fatalf("create: %+v", created)
	}
	var org struct{ ID string }
	if err := json.Unmarshal([]byte(created.stdout), &org); err != nil || org.ID == "" {
		t.Fatalf("create output: %q", created.stdout)
	}
	for _, args := range [][]string{
		{"deployment", "show"},
		{"org", "get", org.ID},
		{"org", "list"},
		{"org", "list", "--slug", "acme"},
		{"audit", "list", "--organization", org.ID},
	} {
		args = append([]string{"-o", "json"}, args...)
		r, l := run(t, remote, args...), run(t, local, args...)
		if r.code != 0 || l.code != 0 || r.stdout != l.stdout {
			t.Errorf("%v: remote %d %q / local %d %q (stderr %q / %q)", args, r.code, r.stdout, l.code, l.stdout, r.stderr, l.stderr)
		}
	}

	// Writes print the same shape (IDs, times and the values given differ).
	localCreated := run(t, local, "-o", "json", "org", "create", "acme-local", "--display-name", "Acme local")
	if localCreated.code != 0 {
		t.Fatalf("local create: %+v", localCreated)
	}
	if a, b := volatile.ReplaceAllString(created.stdout, `"$1": "_"`), volatile.ReplaceAllString(localCreated.stdout, `"$1": "_"`); a != b {
		t.Errorf("create output differs:\n%s\n%s", a, b)
	}
	for _, env := range []map[string]string{remote, local} {
		r := run(t, env, "-o", "json", "org", "update", org.ID, "--display-name", "Acme "+env["RENGA_URL"], "--if-match", "current")
		if r.code != 0 || !strings.Contains(r.stdout, `"version"`) {
			t.Errorf("update: %+v", r)
		}
	}

	// A release command's mutation is audited as the local operator with an invocation ID.
	audit := run(t, remote, "-o", "json", "audit", "list", "--actor", "local-operator")
	var events struct {
		Items []struct {
			Actor struct {
				Type         string  `json:"type"`
				InvocationID *string `json:"invocation_id"`
			} `json:"actor"`
			Operation string `json:"operation"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(audit.stdout), &events); err != nil {
		t.Fatal(err, audit.stdout)
	}
	if len(events.Items) != 2 {
		t.Fatalf("local-operator events = %d, want 2: %s", len(events.Items), audit.stdout)
	}
	for _, ev := range events.Items {
		if ev.Actor.Type != "local_operator" || ev.Actor.InvocationID == nil || !strings.HasPrefix(*ev.Actor.InvocationID, "inv_") {
			t.Errorf("event actor: %+v", ev.Actor)
		}
	}
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	e := servertest.Start(t)
	remote, local := modes(t, e, e.Token(t, "organizations:write"))
	for _, env := range []map[string]string{remote, local} {
		mode := "remote"
		if env["RENGA_URL"] == "" {
			mode = "local"
		}
		slug := "exit-" + mode
		first := run(t, env, "org", "create", slug, "--display-name", "X", "--idempotency-key", "key-"+mode)
		if first.code != cli.ExitOK {
			t.Fatalf("%s create: %+v", mode, first)
		}
		if !strings.Contains(first.stderr, "Idempotency-Key: key-"+mode+" (rerun with --idempotency-key key-"+mode) ||
			strings.Contains(first.stderr, "secret") {
			t.Errorf("%s: the key used is not reported on stderr, or with a secret the command does not show: %q", mode, first.stderr)
		}
		// Rerunning with the same key recovers the same operation.
		again := run(t, env, "org", "create", slug, "--display-name", "X", "--idempotency-key", "key-"+mode)
		if again.code != cli.ExitOK || again.stdout != first.stdout {
			t.Errorf("%s rerun: %+v vs %+v", mode, again, first)
		}
		generated := run(t, env, "org", "create", "gen-"+mode, "--display-name", "X")
		if generated.code != cli.ExitOK || !strings.Contains(generated.stderr, "Idempotency-Key: ") {
			t.Errorf("%s generated key: %+v", mode, generated)
		}
		id := strings.Fields(first.stdout)[0]
		cases := []struct {
			args []string
			code int
		}{
			{[]string{"org", "create", slug, "--display-name", "X"}, cli.ExitConflict},
			{[]string{"org", "update", id, "--display-name", "Y", "--if-match", "9"}, cli.ExitPrecondition},
			{[]string{"org", "get", "org_00000000000000000000000000"}, cli.ExitFailure},
			{[]string{"org", "create", "BAD", "--display-name", "X"}, cli.ExitUsage},
			{[]string{"org", "create"}, cli.ExitUsage},
			{[]string{"org", "frobnicate"}, cli.ExitUsage},
			{[]string{"-o", "yaml", "org", "list"}, cli.ExitUsage},
		}
		if mode == "remote" {
			cases = append(cases, struct {
				args []string
				code int
			}{[]string{"audit", "list"}, cli.ExitAuth})
		}
		for _, c := range cases {
			r := run(t, env, c.args...)
			if r.code != c.code {
				t.Errorf("%s %v: exit %d, want %d (%q)", mode, c.args, r.code, c.code, r.stderr)
			}
			// A refused write changed nothing: its key is not worth a line.
			if strings.Contains(r.stderr, "Idempotency-Key: ") {
				t.Errorf("%s %v: the key is told after a refusal: %q", mode, c.args, r.stderr)
			}
		}
	}
	bad := map[string]string{"RENGA_URL": e.URL, "RENGA_OPERATOR_TOKEN": "renga_operator_nope"}
	if r := run(t, bad, "org", "list"); r.code != cli.ExitAuth {
		t.Errorf("bad token: exit %d (%q)", r.code, r.stderr)
	}
	if r := run(t, map[string]string{}, "org", "list"); r.code != cli.ExitUsage {
		t.Errorf("no configuration: exit %d (%q)", r.code, r.stderr)
	}
}

func TestOperatorTokenReleaseCommands(t *testing.T) {
	t.Parallel()
	e := servertest.Start(t)
	local := map[string]string{"RENGA_DATABASE_URL": e.DBURL}
	created := run(t, local, "-o", "json", "operator-token", "create", "--name", "ci", "--scope", "organizations:read", "--expires-in", "1h")
	var tok struct{ ID, Token string }
	if err := json.Unmarshal([]byte(created.stdout), &tok); err != nil || !strings.HasPrefix(tok.Token, "renga_operator_") {
		t.Fatalf("create: %+v", created)
	}
	e.Track(tok.Token)
	remote := map[string]string{"RENGA_URL": e.URL, "RENGA_OPERATOR_TOKEN": tok.Token}
	if r := run(t, remote, "org", "list"); r.code != 0 {
		t.Fatalf("the new token does not work: %+v", r)
	}
	if r := run(t, remote, "-o", "json", "token", "show"); r.code != 0 || !strings.Contains(r.stdout, tok.ID) || strings.Contains(r.stdout, tok.Token) {
		t.Errorf("token show: %+v", r)
	}
	list := run(t, local, "-o", "json", "operator-token", "list")
	if !strings.Contains(list.stdout, tok.ID) || strings.Contains(list.stdout, tok.Token) {
		t.Errorf("list: %+v", list)
	}
	if r := run(t, local, "operator-token", "revoke", tok.ID, "--yes"); r.code != 0 {
		t.Fatalf("revoke: %+v", r)
	}
	if r := run(t, remote, "org", "list"); r.code != cli.ExitAuth {
		t.Errorf("revoked token still works: %+v", r)
	}
	if r := run(t, local, "operator-token", "create", "--name", "x", "--scope", "everything"); r.code != cli.ExitUsage {
		t.Errorf("unknown scope: %+v", r)
	}
	// Minting and revoking are audited as the local operator, without the secret.
	var n int
	if err := e.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_events WHERE actor_type = 'local_operator'
		AND operation IN ('createOperatorToken', 'revokeOperatorToken') AND token_id = $1 AND invocation_id IS NOT NULL`, tok.ID).Scan(&n); err != nil || n != 2 {
		t.Errorf("audit events for the token = %d (%v), want 2", n, err)
	}
}
