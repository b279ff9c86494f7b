package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"renga.dev/renga/server"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/secretbox"
	"renga.dev/renga/server/servertest"
)

func mustBox(t *testing.T, keys ...string) *secretbox.Box {
	t.Helper()
	var raw [][]byte
	for _, k := range keys {
		b, err := secretbox.ParseKey(k)
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, b)
	}
	box, err := secretbox.New(raw[0], raw[1:]...)
	if err != nil {
		t.Fatal(err)
	}
	return box
}

// TestIdentityProviderCommands: create (the secret from a file, never a flag's value), get,
// set from the get body written back, disable, delete; then rotate the secret key.
func TestIdentityProviderCommands(t *testing.T) {
	t.Parallel()
	oldKey, newKey := secretbox.NewKey(), secretbox.NewKey()
	e := servertest.Start(t, func(c *server.Config) { c.Secrets = mustBox(t, oldKey) })
	token := e.Token(t, "providers:write")
	remote, local := modes(t, e, token)
	secret := "cli-secret-" + secretbox.NewKey()[:12]
	e.Track(secret)
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	r := run(t, remote, "identity-provider", "create", "--slug", "corp", "--issuer", "https://login.example.com",
		"--display-name", "Corp", "--client-id", "renga", "--client-secret-file", secretFile,
		"--allowed-email-domain", "example.com", "-o", "json")
	if r.code != 0 {
		t.Fatalf("create: %d %s", r.code, r.stderr)
	}
	var p struct {
		ID                  string   `json:"id"`
		PendingRevision     *int64   `json:"pending_revision"`
		AllowedEmailDomains []string `json:"allowed_email_domains"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || p.PendingRevision == nil || strings.Join(p.AllowedEmailDomains, ",") != "example.com" {
		t.Fatalf("create printed %s (%v)", r.stdout, err)
	}
	if strings.Contains(r.stdout+r.stderr, secret) {
		t.Fatal("create printed the secret")
	}

	// get -o json, edited, written back with set.
	r = run(t, remote, "identity-provider", "get", p.ID, "-o", "json")
	if r.code != 0 {
		t.Fatalf("get: %d %s", r.code, r.stderr)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &body); err != nil {
		t.Fatal(err)
	}
	body["display_name"] = "Corp Inc"
	edited, _ := json.Marshal(body)
	doc := filepath.Join(t.TempDir(), "provider.json")
	if err := os.WriteFile(doc, edited, 0o600); err != nil {
		t.Fatal(err)
	}
	r = run(t, remote, "identity-provider", "set", p.ID, "-f", doc, "--if-match", "1", "-o", "json")
	var set struct {
		DisplayName string `json:"display_name"`
		Revision    int64  `json:"revision"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &set) != nil || set.DisplayName != "Corp Inc" || set.Revision != 2 {
		t.Fatalf("set: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := run(t, remote, "identity-provider", "set", p.ID, "-f", doc, "--if-match", "1"); r.code != 5 {
		t.Errorf("set with a stale version: exit %d, want 5: %s", r.code, r.stderr)
	}
	// test prints the single-use test URL of the pending revision, and only it, on stdout.
	r = run(t, remote, "identity-provider", "test", p.ID)
	testURL := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(testURL, e.Config.PublicURL+"/signin/test?capability=") || !strings.Contains(r.stderr, "revision 2") {
		t.Fatalf("test: %d %q %s", r.code, r.stdout, r.stderr)
	}
	e.Track(strings.TrimPrefix(testURL, e.Config.PublicURL+"/signin/test?capability="))
	if r := run(t, remote, "identity-provider", "test", "idp_unknown"); r.code == 0 {
		t.Error("test of an unknown provider succeeded")
	}
	// As a release command (the local operator starts the test).
	r = run(t, local, "identity-provider", "test", p.ID)
	if localURL := strings.TrimSpace(r.stdout); r.code != 0 || !strings.HasPrefix(localURL, e.Config.PublicURL+"/signin/test?capability=") || localURL == testURL {
		t.Fatalf("test as a release command: %d %q %s", r.code, r.stdout, r.stderr)
	} else {
		e.Track(strings.TrimPrefix(localURL, e.Config.PublicURL+"/signin/test?capability="))
	}
	if r := run(t, remote, "identity-provider", "list"); r.code != 0 || !strings.Contains(r.stdout, "corp") {
		t.Errorf("list: %d %s %s", r.code, r.stdout, r.stderr)
	}

	// An organization's own provider's secret is re-sealed too.
	org, err := domain.CreateOrganization(context.Background(), e.Pool, "rotation", "Rotation")
	if err != nil {
		t.Fatal(err)
	}
	orgSecret := secret + "-org"
	op, err := domain.CreateOrganizationProvider(context.Background(), e.Pool, mustBox(t, oldKey), org.ID,
		domain.NewProvider{Slug: "acme", Protocol: "oidc", Issuer: "https://login.acme.example",
			ProviderConfig: domain.ProviderConfig{DisplayName: "Acme", ClientID: "renga"}, ClientSecret: &orgSecret}, domain.BuiltinDefaults)
	if err != nil {
		t.Fatal(err)
	}

	// Rotation: the new key seals, the old one only opens; afterwards the new key alone opens.
	rotate := map[string]string{}
	for k, v := range local {
		rotate[k] = v
	}
	rotate["RENGA_SECRET_KEY"] = newKey
	if r := run(t, rotate, "secret-key", "rotate"); r.code == 0 {
		t.Fatal("rotation without the previous key succeeded: it cannot open the secrets")
	}
	rotate["RENGA_SECRET_KEY_PREVIOUS"] = oldKey
	if r := run(t, rotate, "secret-key", "rotate"); r.code != 0 || !strings.Contains(r.stderr, "Re-sealed 3 secret(s)") {
		t.Fatalf("rotate: %d %s", r.code, r.stderr)
	}
	if r := run(t, rotate, "secret-key", "rotate"); r.code != 0 || !strings.Contains(r.stderr, "Re-sealed 0 secret(s)") {
		t.Errorf("second rotate: %d %s", r.code, r.stderr)
	}
	after := domain.Providers{Secrets: mustBox(t, newKey)}
	for _, rev := range []int64{1, 2} {
		got, ok, err := after.ProviderClientSecret(context.Background(), e.Pool, p.ID, rev)
		if err != nil || !ok || got != secret {
			t.Errorf("revision %d under the new key alone: %q, %v, %v", rev, got, ok, err)
		}
	}
	if got, err := domain.OrganizationProviderClientSecret(context.Background(), e.Pool, mustBox(t, newKey), op.ID); err != nil || got != orgSecret {
		t.Errorf("the organization provider's secret under the new key alone: %q, %v", got, err)
	}

	if r := run(t, remote, "identity-provider", "disable", p.ID, "--yes"); r.code != 0 {
		t.Errorf("disable: %d %s", r.code, r.stderr)
	}
	if r := run(t, remote, "identity-provider", "delete", p.ID, "--yes"); r.code != 0 || !strings.Contains(r.stderr, "Deleted") {
		t.Errorf("delete: %d %s", r.code, r.stderr)
	}
	if r := run(t, remote, "identity-provider", "get", p.ID); r.code == 0 {
		t.Error("get after delete succeeded")
	}
}
