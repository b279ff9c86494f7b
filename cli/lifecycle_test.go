package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"renga.dev/renga/cli"
	"renga.dev/renga/server/servertest"
)

// TestLifecycleCommands runs the organization lifecycle and policy commands remotely and as
// release commands, and checks reads print the same JSON either way.
func TestLifecycleCommands(t *testing.T) {
	t.Parallel()
	e := servertest.Start(t)
	remote, local := modes(t, e, e.Token(t, servertest.AllScopes()...))
	var org struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	created := run(t, remote, "-o", "json", "org", "create", "life", "--display-name", "Life")
	if err := json.Unmarshal([]byte(created.stdout), &org); err != nil {
		t.Fatalf("create: %+v", created)
	}
	for _, env := range []map[string]string{remote, local} {
		for _, step := range []struct {
			args  []string
			state string
		}{
			{[]string{"org", "suspend", org.ID, "--reason", "unpaid", "--yes"}, "suspended"},
			{[]string{"org", "suspend", org.ID, "--reason", "again", "--yes"}, "suspended"},
			{[]string{"org", "delete", org.ID, "--yes"}, "deletion_pending"},
			{[]string{"org", "undelete", org.ID}, "suspended"},
			{[]string{"org", "resume", org.ID}, "active"},
			{[]string{"org", "resume", org.ID}, "active"},
		} {
			r := run(t, env, append([]string{"-o", "json"}, step.args...)...)
			if r.code != 0 || !strings.Contains(r.stdout, `"state": "`+step.state+`"`) {
				t.Errorf("%v: %+v", step.args, r)
			}
		}
	}

	// Policy: set from a file with the version read, then a stale set exits 5.
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(policy, []byte(`{"limits": {"max_users": 3}, "locked_settings": {"require_mfa": true}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run(t, remote, "-o", "json", "policy", "set", org.ID, "-f", policy, "--if-match", "1"); r.code != 0 || !strings.Contains(r.stdout, `"version": 2`) {
		t.Errorf("policy set: %+v", r)
	}
	if r := run(t, local, "policy", "set", org.ID, "-f", policy, "--if-match", "1"); r.code != cli.ExitPrecondition {
		t.Errorf("stale policy set: %+v", r)
	}
	if r := run(t, local, "-o", "json", "policy", "set", org.ID, "-f", policy, "--if-match", "current"); r.code != 0 || !strings.Contains(r.stdout, `"version": 3`) {
		t.Errorf("policy set --if-match current: %+v", r)
	}
	if r := run(t, remote, "policy", "set", org.ID, "-f", filepath.Join(dir, "missing.json"), "--if-match", "3"); r.code != cli.ExitUsage {
		t.Errorf("missing file: %+v", r)
	}

	// Invitations: the release command queues the same mail the API does.
	if r := run(t, local, "-o", "json", "org", "invite", org.ID, "owner@example.com"); r.code != 0 || !strings.Contains(r.stdout, `"state": "pending"`) {
		t.Errorf("invite: %+v", r)
	}

	for _, args := range [][]string{
		{"policy", "get", org.ID},
		{"policy", "effective", org.ID},
		{"org", "owners", org.ID},
		{"invitation", "list", org.ID},
		{"usage", org.ID, "--from", "2026-01-01", "--to", "2026-01-03"},
		{"usage", "--from", "2026-01-01", "--to", "2026-01-03"},
	} {
		args = append([]string{"-o", "json"}, args...)
		r, l := run(t, remote, args...), run(t, local, args...)
		if r.code != 0 || l.code != 0 || r.stdout != l.stdout {
			t.Errorf("%v: remote %d %q / local %d %q (stderr %q / %q)", args, r.code, r.stdout, l.code, l.stdout, r.stderr, l.stderr)
		}
	}
	if r := run(t, remote, "-o", "json", "policy", "effective", org.ID); !strings.Contains(r.stdout, `"max_users": {`) ||
		!strings.Contains(r.stdout, `"source": "organization"`) {
		t.Errorf("effective: %s", r.stdout)
	}
	// The table (tab-separated when piped): one row per value, max_users set above by the policy.
	if r := run(t, remote, "policy", "effective", org.ID); r.code != 0 ||
		!strings.Contains(r.stdout, "limits.max_users\t3\torganization\n") ||
		!strings.Contains(r.stdout, "settings.require_mfa\ttrue\torganization\n") {
		t.Errorf("effective table: %+v", r)
	}
	if r := run(t, remote, "usage", "--from", "2026-02-01", "--to", "2025-01-01"); r.code != cli.ExitUsage {
		t.Errorf("reversed range: %+v", r)
	}
}

// TestOwnerCommands follows the invitation from the operator's command to the mail file (no
// SMTP configured in development) to the owner's commands.
func TestOwnerCommands(t *testing.T) {
	t.Parallel()
	e := servertest.Start(t)
	e.StartJobs(t)
	remote, _ := modes(t, e, e.Token(t, "organizations:write", "policies:write"))
	var org struct{ ID string }
	if err := json.Unmarshal([]byte(run(t, remote, "-o", "json", "org", "create", "owned", "--display-name", "Owned").stdout), &org); err != nil {
		t.Fatal(err)
	}
	if r := run(t, remote, "org", "invite", org.ID, "Ada@Example.com"); r.code != 0 {
		t.Fatalf("invite: %+v", r)
	}
	token := waitForInvitationFile(t, filepath.Join(e.Config.DataDir, "mail"))
	e.Track(token)
	owner := map[string]string{"RENGA_URL": e.URL}
	accepted := run(t, owner, "-o", "json", "owner", "accept", token, "--display-name", "Ada")
	var a struct {
		APIKey string `json:"api_key"`
		User   struct {
			Email string `json:"email"`
		} `json:"user"`
	}
	if err := json.Unmarshal([]byte(accepted.stdout), &a); err != nil || !strings.HasPrefix(a.APIKey, "renga_user_") || a.User.Email != "ada@example.com" {
		t.Fatalf("accept: %+v", accepted)
	}
	if !strings.Contains(accepted.stderr, "You are an owner of owned. Your personal API key is shown once; store it now") {
		t.Errorf("accept does not say the key is shown once: %q", accepted.stderr)
	}
	e.Track(a.APIKey)
	if r := run(t, owner, "owner", "accept", token, "--display-name", "Ada"); r.code != cli.ExitFailure || !strings.Contains(r.stderr, "invitation_accepted") {
		t.Errorf("second accept: %+v", r)
	}
	owner["RENGA_API_KEY"] = a.APIKey
	if r := run(t, owner, "-o", "json", "owner", "me"); r.code != 0 || !strings.Contains(r.stdout, org.ID) {
		t.Errorf("me: %+v", r)
	}
	activity := run(t, owner, "-o", "json", "owner", "activity")
	for _, op := range []string{"createOrganization", "createInvitation", "acceptInvitation"} {
		if !strings.Contains(activity.stdout, `"operation": "`+op+`"`) {
			t.Errorf("activity lacks %s: %s", op, activity.stdout)
		}
	}
	settings := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(settings, []byte(`{"require_mfa": true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run(t, owner, "-o", "json", "owner", "settings", "set", "-f", settings, "--if-match", "1"); r.code != 0 || !strings.Contains(r.stdout, `"require_mfa": true`) {
		t.Errorf("settings set: %+v", r)
	}
	// Under a lock, the settings read show the locked value, and writing them back with another
	// field changed succeeds.
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(`{"locked_settings": {"session_max_age_hours": 12}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run(t, remote, "policy", "set", org.ID, "-f", policy, "--if-match", "1"); r.code != 0 {
		t.Fatalf("policy set: %+v", r)
	}
	read := run(t, owner, "-o", "json", "owner", "settings", "get")
	if read.code != 0 || !strings.Contains(read.stdout, `"session_max_age_hours": 12`) {
		t.Errorf("settings get under a lock: %+v", read)
	}
	if err := os.WriteFile(settings, []byte(strings.Replace(read.stdout, `"require_sso": false`, `"require_sso": true`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run(t, owner, "-o", "json", "owner", "settings", "set", "-f", settings, "--if-match", "current"); r.code != 0 ||
		!strings.Contains(r.stdout, `"require_sso": true`) || !strings.Contains(r.stdout, `"session_max_age_hours": 12`) {
		t.Errorf("settings read under a lock, written back with require_sso changed: %+v", r)
	}
	// A command that shows a secret once says its rerun leaves the secret out.
	if r := run(t, owner, "owner", "intake-key", "create", "--name", "laptops"); r.code != 0 || !strings.Contains(r.stdout, "renga_intake_") ||
		!strings.Contains(r.stderr, "the rerun's answer leaves out the secret, shown only this once") {
		t.Errorf("intake-key create: %+v", r)
	}
	// The organization's own identity provider: created with a secret read from a file (never
	// printed), listed, disabled.
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("org-idp-secret-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	created := run(t, owner, "-o", "json", "owner", "identity-provider", "create", "--slug", "acme", "--issuer", "https://login.acme.example",
		"--display-name", "Acme", "--client-id", "renga", "--client-secret-file", secretFile)
	var oip struct {
		ID              string `json:"id"`
		HasClientSecret bool   `json:"has_client_secret"`
	}
	if created.code != 0 || json.Unmarshal([]byte(created.stdout), &oip) != nil || !oip.HasClientSecret ||
		strings.Contains(created.stdout+created.stderr, "org-idp-secret-value") {
		t.Fatalf("owner identity-provider create: %+v", created)
	}
	if r := run(t, owner, "owner", "identity-provider", "disable", oip.ID); r.code != 0 || !strings.Contains(r.stdout, "owner") {
		t.Errorf("owner identity-provider disable: %+v", r)
	}
	if r := run(t, owner, "owner", "identity-provider", "list"); r.code != 0 || !strings.Contains(r.stdout, oip.ID) || !strings.Contains(r.stdout, "disabled") {
		t.Errorf("owner identity-provider list: %+v", r)
	}
	if r := run(t, owner, "org", "list"); r.code != cli.ExitUsage && r.code != cli.ExitAuth {
		t.Errorf("an owner's key used for operator commands: %+v", r)
	}
}

// waitForInvitationFile waits for the mail worker's .eml file and returns the invitation secret.
func waitForInvitationFile(t *testing.T, dir string) string {
	t.Helper()
	for i := 0; i < 200; i++ {
		files, _ := filepath.Glob(filepath.Join(dir, "*.eml"))
		if len(files) == 1 {
			b, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range strings.FieldsFunc(string(b), func(r rune) bool { return strings.ContainsRune(" \r\n\"'#=", r) }) {
				if strings.HasPrefix(f, "renga_invite_") {
					return f
				}
			}
			t.Fatalf("no invitation token in the mail:\n%s", b)
		}
		waitABit()
	}
	t.Fatal("no mail written")
	return ""
}

func waitABit() { time.Sleep(50 * time.Millisecond) }
