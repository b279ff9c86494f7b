package cli_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"renga.dev/renga/cli"
	"renga.dev/renga/server/servertest"
)

// runAnswering runs a command line as if stdin were a terminal on which a person types answer.
func runAnswering(t *testing.T, env map[string]string, answer string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	f := &cli.Factory{Stdout: &out, Stderr: &errOut, Stdin: strings.NewReader(answer), StdinIsTerminal: true,
		Getenv: func(k string) string { return env[k] }}
	defer f.Close()
	code := cli.Run(f, args)
	return result{code, out.String(), errOut.String()}
}

// TestDestructiveCommandsConfirm: org suspend and delete ask for the organization's slug on a
// terminal, operator-token revoke and invitation revoke for a yes; any other answer changes
// nothing (exit 1), and without a terminal they refuse to run without --yes (exit 2).
func TestDestructiveCommandsConfirm(t *testing.T) {
	t.Parallel()
	e := servertest.Start(t)
	remote, local := modes(t, e, e.Token(t, servertest.AllScopes()...))
	var org struct{ ID string }
	if err := json.Unmarshal([]byte(run(t, remote, "-o", "json", "org", "create", "doomed", "--display-name", "Doomed").stdout), &org); err != nil {
		t.Fatal(err)
	}
	state := func() string {
		t.Helper()
		var o struct{ State string }
		if err := json.Unmarshal([]byte(run(t, remote, "-o", "json", "org", "get", org.ID).stdout), &o); err != nil {
			t.Fatal(err)
		}
		return o.State
	}

	for _, args := range [][]string{{"org", "delete", org.ID}, {"org", "suspend", org.ID, "--reason", "unpaid"}} {
		if r := run(t, remote, args...); r.code != cli.ExitUsage || !strings.Contains(r.stderr, "pass --yes to confirm") {
			t.Errorf("%v without a terminal or --yes: %+v", args, r)
		}
		r := runAnswering(t, remote, "Doomed\n", args...)
		if r.code != cli.ExitFailure || !strings.Contains(r.stderr, "Type doomed to confirm: ") ||
			!strings.Contains(r.stderr, `not confirmed (typed "Doomed", not "doomed"): nothing changed`) {
			t.Errorf("%v answered with the display name: %+v", args, r)
		}
		if r := runAnswering(t, remote, "", args...); r.code != cli.ExitFailure {
			t.Errorf("%v answered with nothing (end of input): %+v", args, r)
		}
	}
	if s := state(); s != "active" {
		t.Fatalf("state after refused confirmations = %s", s)
	}
	if r := runAnswering(t, remote, "doomed\n", "-o", "json", "org", "suspend", org.ID, "--reason", "unpaid"); r.code != 0 ||
		!strings.Contains(r.stderr, "Suspending organization doomed ("+org.ID+`, "Doomed")`) || state() != "suspended" {
		t.Errorf("suspend confirmed: %+v", r)
	}
	if r := runAnswering(t, local, "doomed\n", "org", "delete", org.ID); r.code != 0 || state() != "deletion_pending" {
		t.Errorf("delete confirmed as a release command: %+v", r)
	}
	if r := runAnswering(t, remote, "doomed\n", "org", "delete", "org_00000000000000000000000000"); r.code != cli.ExitFailure ||
		!strings.Contains(r.stderr, "not_found") || strings.Contains(r.stderr, "Type") {
		t.Errorf("delete of an unknown organization asks nothing: %+v", r)
	}

	// An invitation: a yes revokes it, anything else changes nothing.
	var other struct{ ID string }
	if err := json.Unmarshal([]byte(run(t, remote, "-o", "json", "org", "create", "invited", "--display-name", "Invited").stdout), &other); err != nil {
		t.Fatal(err)
	}
	var inv struct{ ID, State string }
	if err := json.Unmarshal([]byte(run(t, remote, "-o", "json", "org", "invite", other.ID, "ada@example.com").stdout), &inv); err != nil {
		t.Fatal(err)
	}
	revoke := []string{"-o", "json", "invitation", "revoke", other.ID, inv.ID}
	if r := run(t, remote, revoke...); r.code != cli.ExitUsage || !strings.Contains(r.stderr, "--yes") {
		t.Errorf("invitation revoke without a terminal or --yes: %+v", r)
	}
	if r := runAnswering(t, remote, "n\n", revoke...); r.code != cli.ExitFailure ||
		!strings.Contains(r.stderr, "Revoke invitation "+inv.ID+" of ada@example.com (pending)? Its link stops working. [y/N]: ") {
		t.Errorf("invitation revoke answered no: %+v", r)
	}
	if r := run(t, remote, "-o", "json", "invitation", "get", other.ID, inv.ID); !strings.Contains(r.stdout, `"state": "pending"`) {
		t.Errorf("invitation after a no: %+v", r)
	}
	if r := runAnswering(t, remote, "y\n", revoke...); r.code != 0 || !strings.Contains(r.stdout, `"state": "revoked"`) {
		t.Errorf("invitation revoke answered yes: %+v", r)
	}

	// An operator token (release-only): a yes revokes it.
	var tok struct{ ID, Token string }
	if err := json.Unmarshal([]byte(run(t, local, "-o", "json", "operator-token", "create", "--name", "ci", "--scope", "organizations:read").stdout), &tok); err != nil {
		t.Fatal(err)
	}
	e.Track(tok.Token)
	withToken := map[string]string{"RENGA_URL": e.URL, "RENGA_OPERATOR_TOKEN": tok.Token}
	if r := run(t, local, "operator-token", "revoke", tok.ID); r.code != cli.ExitUsage || !strings.Contains(r.stderr, "pass --yes") {
		t.Errorf("operator-token revoke without a terminal or --yes: %+v", r)
	}
	if r := runAnswering(t, local, "\n", "operator-token", "revoke", tok.ID); r.code != cli.ExitFailure ||
		!strings.Contains(r.stderr, "Revoke operator token "+tok.ID+" (ci)?") {
		t.Errorf("operator-token revoke answered with Enter: %+v", r)
	}
	if r := run(t, withToken, "org", "list"); r.code != 0 {
		t.Errorf("the token stopped working though not confirmed: %+v", r)
	}
	if r := runAnswering(t, local, "nope\n", "operator-token", "revoke", "tok_unknown"); r.code != cli.ExitFailure ||
		!strings.Contains(r.stderr, "no operator token tok_unknown") || strings.Contains(r.stderr, "[y/N]") {
		t.Errorf("revoke of an unknown token asks nothing: %+v", r)
	}
	if r := runAnswering(t, local, "YES\n", "operator-token", "revoke", tok.ID); r.code != 0 {
		t.Errorf("operator-token revoke answered yes: %+v", r)
	}
	if r := run(t, withToken, "org", "list"); r.code != cli.ExitAuth {
		t.Errorf("the revoked token still works: %+v", r)
	}
}
