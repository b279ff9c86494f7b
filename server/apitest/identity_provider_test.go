package apitest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"renga.dev/renga/server"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

const providersPath = "/api/v1/operator/identity-providers"

// identityProvider is a provider as read, kept whole so a test can write it back.
type identityProvider struct {
	ID              string   `json:"id"`
	Slug            string   `json:"slug"`
	Issuer          string   `json:"issuer"`
	Source          string   `json:"source"`
	State           string   `json:"state"`
	DisplayName     string   `json:"display_name"`
	ClientID        string   `json:"client_id"`
	Scopes          []string `json:"scopes"`
	Revision        int64    `json:"revision"`
	ActiveRevision  *int64   `json:"active_revision"`
	PendingRevision *int64   `json:"pending_revision"`
	Version         int64    `json:"version"`
}

func newProviderBody(slug, secret string) map[string]any {
	b := map[string]any{"slug": slug, "protocol": "oidc", "issuer": "https://login.example.com/" + slug,
		"display_name": "Provider " + slug, "client_id": "renga-" + slug, "allowed_email_domains": []string{"example.com"}}
	if secret != "" {
		b["client_secret"] = map[string]string{"value": secret}
	}
	return b
}

func createProvider(t testing.TB, env *servertest.Env, token string, body map[string]any) (identityProvider, reply) {
	t.Helper()
	rep := send(t, env, req{Method: http.MethodPost, Path: providersPath, Token: token, Body: jsonBody(body),
		Header: headers("Idempotency-Key", newKey())})
	if rep.Status != http.StatusCreated {
		t.Fatalf("create provider: %d %s", rep.Status, rep.Body)
	}
	var p identityProvider
	rep.decode(t, &p)
	return p, rep
}

func getProvider(t testing.TB, env *servertest.Env, token, id string) (identityProvider, reply) {
	t.Helper()
	rep := send(t, env, req{Method: http.MethodGet, Path: providersPath + "/" + id, Token: token})
	if rep.Status != http.StatusOK {
		t.Fatalf("GET provider: %d %s", rep.Status, rep.Body)
	}
	var p identityProvider
	rep.decode(t, &p)
	return p, rep
}

func putProvider(env *servertest.Env, token, id, ifMatch string, body []byte) (reply, error) {
	return sendE(env, req{Method: http.MethodPut, Path: providersPath + "/" + id, Token: token, Body: body,
		Header: headers("If-Match", ifMatch)})
}

// storedSecret opens the client secret a provider's revision holds ("" when none).
func storedSecret(t testing.TB, env *servertest.Env, id string, revision int64) string {
	t.Helper()
	p := domain.Providers{Env: env.Config.IdentityProviders, Secrets: env.Config.Secrets}
	s, ok, err := p.ProviderClientSecret(context.Background(), env.Pool, id, revision)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return ""
	}
	return s
}

// noSecretMember fails when a provider body carries a client_secret member at all.
func noSecretMember(t testing.TB, body []byte) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("provider body is not a JSON object: %s", body)
	}
	if _, ok := m["client_secret"]; ok {
		t.Errorf("a provider response carries client_secret: %s", body)
	}
}

// TestIdentityProviderLifecycle: create, read, write back, replace and clear the secret,
// disable; the secret is never in a response, the audit or the logs, and is sealed at rest
// (the harness's secret scan reads the provider tables too).
func TestIdentityProviderLifecycle(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	token := env.Token(t, "providers:write", "audit:read")
	first, second := "first-"+newKey(), "second-"+newKey()
	env.Track(first, second)

	p, rep := createProvider(t, env, token, newProviderBody("corp", first))
	noSecretMember(t, rep.Body)
	if rep.Header.Get("Location") != providersPath+"/"+p.ID || rep.Header.Get("ETag") != `"1"` {
		t.Errorf("Location %q, ETag %q", rep.Header.Get("Location"), rep.Header.Get("ETag"))
	}
	if p.Source != "stored" || p.State != "enabled" || p.Revision != 1 || p.ActiveRevision != nil ||
		p.PendingRevision == nil || *p.PendingRevision != 1 || strings.Join(p.Scopes, " ") != "openid email profile" {
		t.Errorf("created provider = %+v", p)
	}
	if got := storedSecret(t, env, p.ID, 1); got != first {
		t.Errorf("stored secret = %q", got)
	}

	// Write-back: the GET body with one field changed keeps the secret and makes revision 2.
	_, rep = getProvider(t, env, token, p.ID)
	noSecretMember(t, rep.Body)
	var doc map[string]any
	rep.decode(t, &doc)
	doc["display_name"] = "Example Corp"
	out, err := putProvider(env, token, p.ID, rep.Header.Get("ETag"), jsonBody(doc))
	if err != nil || out.Status != http.StatusOK {
		t.Fatalf("write-back: %v %d %s", err, out.Status, out.Body)
	}
	noSecretMember(t, out.Body)
	var written identityProvider
	out.decode(t, &written)
	if written.Revision != 2 || written.PendingRevision == nil || *written.PendingRevision != 2 || written.DisplayName != "Example Corp" ||
		written.Version != 2 || out.Header.Get("ETag") != `"2"` {
		t.Errorf("after write-back = %+v (ETag %s)", written, out.Header.Get("ETag"))
	}
	if got := storedSecret(t, env, p.ID, 2); got != first {
		t.Errorf("write-back changed the secret to %q", got)
	}

	// Preconditions: missing If-Match 428, stale 412 with the current version.
	if out, _ := sendE(env, req{Method: http.MethodPut, Path: providersPath + "/" + p.ID, Token: token, Body: jsonBody(doc)}); out.Status != http.StatusPreconditionRequired {
		t.Errorf("PUT without If-Match: %d %s", out.Status, out.Body)
	}
	out, _ = putProvider(env, token, p.ID, `"1"`, jsonBody(doc))
	if out.Status != http.StatusPreconditionFailed || out.problem(t).CurrentVersion == nil || *out.problem(t).CurrentVersion != 2 {
		t.Errorf("stale If-Match: %d %s", out.Status, out.Body)
	}

	// Immutable members must match; an unknown member is refused.
	for field, value := range map[string]any{"issuer": "https://elsewhere.example.com", "slug": "other", "unknown": 1} {
		bad := map[string]any{}
		for k, v := range doc {
			bad[k] = v
		}
		bad[field] = value
		out, _ := putProvider(env, token, p.ID, `"2"`, jsonBody(bad))
		if out.Status != http.StatusBadRequest || !strings.Contains(string(out.Body), field) {
			t.Errorf("PUT changing %s: %d %s", field, out.Status, out.Body)
		}
	}

	// Replace the secret.
	replace := map[string]any{"display_name": "Example Corp", "client_id": "renga-corp", "allowed_email_domains": []string{"example.com"},
		"client_secret": map[string]string{"value": second}}
	out, _ = putProvider(env, token, p.ID, `"2"`, jsonBody(replace))
	if out.Status != http.StatusOK {
		t.Fatalf("replace secret: %d %s", out.Status, out.Body)
	}
	noSecretMember(t, out.Body)
	if got := storedSecret(t, env, p.ID, 3); got != second {
		t.Errorf("replaced secret = %q", got)
	}

	// Clearing needs the provider disabled.
	clear := []byte(`{"display_name": "Example Corp", "client_id": "renga-corp", "allowed_email_domains": ["example.com"], "client_secret": null}`)
	out, _ = putProvider(env, token, p.ID, `"3"`, clear)
	if out.Status != http.StatusConflict || out.problem(t).Error != "provider_enabled" {
		t.Errorf("clear while enabled: %d %s", out.Status, out.Body)
	}
	out = send(t, env, req{Method: http.MethodPost, Path: providersPath + "/" + p.ID + "/disable", Token: token})
	var disabled identityProvider
	out.decode(t, &disabled)
	if out.Status != http.StatusOK || disabled.State != "disabled" || disabled.Version != 4 {
		t.Fatalf("disable: %d %s", out.Status, out.Body)
	}
	// Target-state idempotent: disabling again changes nothing.
	out = send(t, env, req{Method: http.MethodPost, Path: providersPath + "/" + p.ID + "/disable", Token: token})
	out.decode(t, &disabled)
	if out.Status != http.StatusOK || disabled.Version != 4 {
		t.Errorf("second disable: %d %s", out.Status, out.Body)
	}
	out, _ = putProvider(env, token, p.ID, `"4"`, clear)
	if out.Status != http.StatusOK {
		t.Fatalf("clear while disabled: %d %s", out.Status, out.Body)
	}
	if got := storedSecret(t, env, p.ID, 4); got != "" {
		t.Errorf("cleared secret = %q", got)
	}

	// The audit names the provider and which fields changed, never a value.
	rep = send(t, env, req{Method: http.MethodGet, Path: "/api/v1/operator/audit-events?operation=putIdentityProvider", Token: token})
	var events struct {
		Items []struct {
			Outcome string   `json:"outcome"`
			Changed []string `json:"changed_fields"`
			Targets struct {
				ProviderID *string `json:"provider_id"`
			} `json:"targets"`
		} `json:"items"`
	}
	rep.decode(t, &events)
	var summary []string
	for _, e := range events.Items {
		if e.Targets.ProviderID == nil || *e.Targets.ProviderID != p.ID {
			t.Errorf("audit event without the provider: %+v", e)
		}
		summary = append(summary, e.Outcome+":"+strings.Join(e.Changed, ","))
	}
	// Newest first: clear, clear refused while enabled, replace, three immutable or unknown
	// members, stale If-Match, no If-Match, write-back.
	want := "succeeded:client_secret failed: succeeded:client_secret failed: failed: failed: failed: failed: succeeded:display_name"
	if got := strings.Join(summary, " "); got != want {
		t.Errorf("audit of the PUTs, newest first:\n got %s\nwant %s", got, want)
	}
}

// TestIdentityProviderRefusals: what the schemas cannot say is refused with a clear 400 or 409,
// and nothing is stored.
func TestIdentityProviderRefusals(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	token := env.Token(t, "providers:write")
	createProvider(t, env, token, newProviderBody("taken", ""))
	for name, c := range map[string]struct {
		edit   func(map[string]any)
		status int
		want   string
	}{
		"slug taken":             {func(b map[string]any) { b["slug"] = "taken" }, http.StatusConflict, "slug_taken"},
		"scopes without openid":  {func(b map[string]any) { b["scopes"] = []string{"email"} }, http.StatusBadRequest, "scopes"},
		"scope twice":            {func(b map[string]any) { b["scopes"] = []string{"openid", "openid"} }, http.StatusBadRequest, "scopes"},
		"http issuer":            {func(b map[string]any) { b["issuer"] = "http://login.example.com" }, http.StatusBadRequest, "issuer"},
		"issuer with a query":    {func(b map[string]any) { b["issuer"] = "https://login.example.com/?a=b" }, http.StatusBadRequest, "issuer"},
		"issuer with a password": {func(b map[string]any) { b["issuer"] = "https://u:p@login.example.com" }, http.StatusBadRequest, "issuer"},
		"upper-case slug":        {func(b map[string]any) { b["slug"] = "Corp" }, http.StatusBadRequest, "slug"},
		"unknown protocol":       {func(b map[string]any) { b["protocol"] = "saml" }, http.StatusBadRequest, "protocol"},
		"empty secret":           {func(b map[string]any) { b["client_secret"] = map[string]string{"value": ""} }, http.StatusBadRequest, "value"},
		"domain twice":           {func(b map[string]any) { b["allowed_email_domains"] = []string{"a.example", "a.example"} }, http.StatusBadRequest, "allowed_email_domains"},
	} {
		t.Run(name, func(t *testing.T) {
			body := newProviderBody("fresh", "")
			c.edit(body)
			rep := send(t, env, req{Method: http.MethodPost, Path: providersPath, Token: token, Body: jsonBody(body),
				Header: headers("Idempotency-Key", newKey())})
			if rep.Status != c.status || !strings.Contains(string(rep.Body), c.want) {
				t.Errorf("%d %s; want %d naming %s", rep.Status, rep.Body, c.status, c.want)
			}
		})
	}
	// An http issuer on a loopback address is accepted (development and tests).
	body := newProviderBody("local", "")
	body["issuer"] = "http://127.0.0.1:9999"
	createProvider(t, env, token, body)
	// The longest display name and client ID the schema allows are accepted: the domain's own
	// limits are the schema's, not one less. Fails when: len(DisplayName) > 100 or
	// len(ClientID) > 255 (identity_provider.go) is made >=.
	longName, longClient := strings.Repeat("d", 100), strings.Repeat("c", 255)
	body = newProviderBody("longest", "")
	body["display_name"], body["client_id"] = longName, longClient
	if p, _ := createProvider(t, env, token, body); p.DisplayName != longName || p.ClientID != longClient {
		t.Errorf("the longest display name and client ID: stored %q, %q", p.DisplayName, p.ClientID)
	}
	var n int
	if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM identity_providers`).Scan(&n); err != nil || n != 3 {
		t.Errorf("providers stored: %d, %v; want 3", n, err)
	}
	// Scopes: providers:read cannot write.
	reader := env.Token(t, "providers:read")
	rep := send(t, env, req{Method: http.MethodPost, Path: providersPath, Token: reader, Body: jsonBody(newProviderBody("r", "")),
		Header: headers("Idempotency-Key", newKey())})
	if rep.Status != http.StatusForbidden {
		t.Errorf("create with providers:read: %d", rep.Status)
	}
}

// TestProviderLockoutGuard: no change leaves the deployment without a usable sign-in method,
// even when two changes race.
func TestProviderLockoutGuard(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	token := env.Token(t, "providers:write")
	op := startOP(t, env)

	// Nothing usable yet: disabling and deleting are allowed (there is nothing to lose).
	inactive, _ := createProvider(t, env, token, newProviderBody("inactive", ""))
	if rep := send(t, env, req{Method: http.MethodPost, Path: providersPath + "/" + inactive.ID + "/disable", Token: token}); rep.Status != http.StatusOK {
		t.Fatalf("disable an inactive provider: %d %s", rep.Status, rep.Body)
	}

	for trial := range 5 {
		a := storeProvider(t, env, token, op, fmt.Sprintf("a%d", trial))
		b := storeProvider(t, env, token, op, fmt.Sprintf("b%d", trial))
		activateByTest(t, env, token, op, a.ID)
		activateByTest(t, env, token, op, b.ID)
		// Two disables at once: one wins, the other is refused.
		var wg sync.WaitGroup
		codes := make([]string, 2)
		for i, id := range []string{a.ID, b.ID} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rep, err := sendE(env, req{Method: http.MethodPost, Path: providersPath + "/" + id + "/disable", Token: token})
				if err != nil {
					codes[i] = err.Error()
					return
				}
				codes[i] = fmt.Sprint(rep.Status)
				if rep.Status != http.StatusOK {
					var p problemBody
					_ = json.Unmarshal(rep.Body, &p)
					codes[i] += " " + p.Error
				}
			}()
		}
		wg.Wait()
		if got := codes[0] + " + " + codes[1]; got != "200 + 409 lockout" && got != "409 lockout + 200" {
			t.Fatalf("trial %d: two disables of the last two providers: %v; want one 200 and one 409 lockout", trial, codes)
		}
		// The survivor cannot be deleted either.
		survivor := a.ID
		if codes[0] == "200" {
			survivor = b.ID
		}
		rep := send(t, env, req{Method: http.MethodDelete, Path: providersPath + "/" + survivor, Token: token})
		if rep.Status != http.StatusConflict || rep.problem(t).Error != "lockout" {
			t.Fatalf("delete the last usable provider: %d %s", rep.Status, rep.Body)
		}
		// Clean up for the next trial: a fresh usable provider first, then the survivor goes.
		next := storeProvider(t, env, token, op, fmt.Sprintf("n%d", trial))
		activateByTest(t, env, token, op, next.ID)
		if rep := send(t, env, req{Method: http.MethodDelete, Path: providersPath + "/" + survivor, Token: token}); rep.Status != http.StatusNoContent {
			t.Fatalf("delete with another usable provider: %d %s", rep.Status, rep.Body)
		}
		if rep := send(t, env, req{Method: http.MethodGet, Path: providersPath + "/" + survivor, Token: token}); rep.Status != http.StatusNotFound {
			t.Fatalf("GET a deleted provider: %d", rep.Status)
		}
		if _, err := env.Pool.Exec(context.Background(), `UPDATE identity_providers SET state = 'disabled' WHERE id = $1`, next.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEnvironmentProviders: providers from RENGA_IDENTITY_PROVIDERS are listed, read-only,
// count as usable sign-in, override a compatible stored provider, and an incompatible
// collision refuses boot naming both.
func TestEnvironmentProviders(t *testing.T) {
	t.Parallel()
	envProviders, err := domain.ParseEnvProviders(`[{"slug":"corp","protocol":"oidc","issuer":"https://login.example.com/corp",
		"display_name":"Corp (environment)","client_id":"env-client","client_secret":"env-secret-value"}]`)
	if err != nil {
		t.Fatal(err)
	}
	env := servertest.Start(t, func(c *server.Config) { c.IdentityProviders = envProviders })
	env.Track("env-secret-value")
	token := env.Token(t, "providers:write")

	rep := send(t, env, req{Method: http.MethodGet, Path: providersPath, Token: token})
	var list struct {
		Items []identityProvider `json:"items"`
	}
	rep.decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].Source != "environment" || list.Items[0].Slug != "corp" || list.Items[0].ActiveRevision == nil {
		t.Fatalf("list = %s", rep.Body)
	}
	id := list.Items[0].ID
	got, rep := getProvider(t, env, token, id)
	noSecretMember(t, rep.Body)
	if got.DisplayName != "Corp (environment)" {
		t.Errorf("GET environment provider = %+v", got)
	}
	for _, r := range []req{
		{Method: http.MethodPut, Path: providersPath + "/" + id, Token: token, Header: headers("If-Match", `"1"`),
			Body: jsonBody(map[string]any{"display_name": "x", "client_id": "y"})},
		{Method: http.MethodPost, Path: providersPath + "/" + id + "/disable", Token: token},
		{Method: http.MethodDelete, Path: providersPath + "/" + id, Token: token},
	} {
		rep := send(t, env, r)
		if rep.Status != http.StatusConflict || rep.problem(t).Error != "read_only" {
			t.Errorf("%s %s: %d %s; want 409 read_only", r.Method, r.Path, rep.Status, rep.Body)
		}
	}
	rep = send(t, env, req{Method: http.MethodPost, Path: providersPath, Token: token, Body: jsonBody(newProviderBody("corp", "")),
		Header: headers("Idempotency-Key", newKey())})
	if rep.Status != http.StatusConflict || rep.problem(t).Error != "slug_taken" {
		t.Errorf("create over an environment slug: %d %s", rep.Status, rep.Body)
	}
	// The environment provider is a usable sign-in method: the last stored one can go.
	op := startOP(t, env)
	stored := storeProvider(t, env, token, op, "stored")
	activateByTest(t, env, token, op, stored.ID)
	if rep := send(t, env, req{Method: http.MethodPost, Path: providersPath + "/" + stored.ID + "/disable", Token: token}); rep.Status != http.StatusOK {
		t.Errorf("disable beside an environment provider: %d %s", rep.Status, rep.Body)
	}

	// Boot: a stored provider "stored" (issuer .../stored) and the environment naming it.
	boot := func(issuer string) error {
		e, err := domain.ParseEnvProviders(fmt.Sprintf(`[{"slug":"stored","protocol":"oidc","issuer":%q,"display_name":"S","client_id":"c"}]`, issuer))
		if err != nil {
			t.Fatal(err)
		}
		cfg := env.Config
		cfg.IdentityProviders = e
		_, err = server.New(cfg, env.Pool, slog.New(slog.NewTextHandler(io.Discard, nil)))
		return err
	}
	err = boot("https://other.example.com")
	if err == nil || !strings.Contains(err.Error(), `"stored"`) || !strings.Contains(err.Error(), stored.ID) ||
		!strings.Contains(err.Error(), "RENGA_IDENTITY_PROVIDERS") {
		t.Errorf("incompatible collision: %v; want a refusal naming both", err)
	}
	if err := boot(op.Issuer); err != nil {
		t.Errorf("compatible collision refused: %v", err)
	}
}
