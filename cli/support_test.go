package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// TestSupportCommands: support status, enable (remote) and disable (a release command, keeping
// the names); an owner's support-grant create, list and revoke; the operator's support access
// shows the grant.
func TestSupportCommands(t *testing.T) {
	t.Parallel()
	e := servertest.Start(t)
	remote, local := modes(t, e, e.Token(t, "support:write", "providers:write"))
	ctx := context.Background()
	p, err := (domain.Providers{Secrets: e.Config.Secrets}).CreateIdentityProvider(ctx, e.Pool, domain.NewProvider{Slug: "corp",
		Protocol: "oidc", Issuer: "https://login.example.com", ProviderConfig: domain.ProviderConfig{DisplayName: "Corp", ClientID: "c"}})
	if err != nil {
		t.Fatal(err)
	}
	type source struct {
		Enabled    bool     `json:"enabled"`
		ProviderID *string  `json:"provider_id"`
		Emails     []string `json:"allowed_emails"`
		Version    int64    `json:"version"`
	}
	decode := func(name string, r result) source {
		t.Helper()
		var s source
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &s) != nil {
			t.Fatalf("%s: %d %s %s", name, r.code, r.stdout, r.stderr)
		}
		return s
	}
	if s := decode("status", run(t, remote, "support", "status", "-o", "json")); s.Enabled || s.Version != 1 {
		t.Errorf("status: %+v", s)
	}
	if r := run(t, remote, "support", "enable", "--provider", p.ID, "--if-match", "1"); r.code != 2 || !strings.Contains(r.stderr, "--email") {
		t.Errorf("enable naming nobody: %d %s", r.code, r.stderr)
	}
	s := decode("enable", run(t, remote, "support", "enable", "--provider", p.ID, "--email", "alice@ops.example", "--if-match", "1", "-o", "json"))
	if !s.Enabled || *s.ProviderID != p.ID || strings.Join(s.Emails, ",") != "alice@ops.example" || s.Version != 2 {
		t.Errorf("enable: %+v", s)
	}
	if r := run(t, remote, "support", "disable", "--if-match", "1"); r.code != 5 {
		t.Errorf("disable with a stale version: exit %d, want 5: %s", r.code, r.stderr)
	}
	s = decode("disable", run(t, local, "support", "disable", "--if-match", "current", "-o", "json"))
	if s.Enabled || s.ProviderID == nil || *s.ProviderID != p.ID || strings.Join(s.Emails, ",") != "alice@ops.example" {
		t.Errorf("disable (release command): %+v", s)
	}

	// An owner grants, lists and revokes.
	o, err := domain.CreateOrganization(ctx, e.Pool, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := domain.CreateInvitation(ctx, e.Pool, o.ID, "owner@acme.example")
	if err != nil {
		t.Fatal(err)
	}
	a, err := domain.AcceptInvitation(ctx, e.Pool, secret, "Owner", domain.BuiltinDefaults)
	if err != nil {
		t.Fatal(err)
	}
	e.Track(secret, a.APIKey)
	owner := map[string]string{"RENGA_URL": e.URL, "RENGA_API_KEY": a.APIKey}
	if r := run(t, owner, "owner", "support-grant", "create", "--expires-in", "800h"); r.code == 0 || !strings.Contains(r.stderr, "30 days") {
		t.Errorf("a grant over 30 days: %d %s", r.code, r.stderr)
	}
	r := run(t, owner, "owner", "support-grant", "create", "--expires-in", "4h", "--email", "alice@ops.example", "-o", "json")
	var g struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &g) != nil || g.State != "active" {
		t.Fatalf("grant: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := run(t, owner, "owner", "support-grant", "list"); r.code != 0 || !strings.Contains(r.stdout, g.ID) || !strings.Contains(r.stdout, "alice@ops.example") {
		t.Errorf("list: %d %s %s", r.code, r.stdout, r.stderr)
	}
	access := run(t, remote, "support", "access", o.ID)
	if access.code != 0 || !strings.Contains(access.stdout, g.ID) || !strings.Contains(access.stdout, "active") {
		t.Errorf("support access: %d %s %s", access.code, access.stdout, access.stderr)
	}
	if r := run(t, owner, "owner", "support-grant", "revoke", g.ID); r.code != 0 || !strings.Contains(r.stdout, "revoked") {
		t.Errorf("revoke: %d %s %s", r.code, r.stdout, r.stderr)
	}
}
