package apitest

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"renga.dev/renga/server/oidctest"
	"renga.dev/renga/server/servertest"
)

const supportSourcePath = "/api/v1/operator/support/source"

type supportSource struct {
	Enabled            bool     `json:"enabled"`
	ProviderID         *string  `json:"provider_id"`
	AllowedEmails      []string `json:"allowed_emails"`
	AllowedEmailDomain *string  `json:"allowed_email_domain"`
	Version            int64    `json:"version"`
}

// putSupportSource replaces the support source with body (at the version stored now).
func putSupportSource(t testing.TB, env *servertest.Env, token string, body map[string]any) supportSource {
	t.Helper()
	got := send(t, env, req{Method: http.MethodGet, Path: supportSourcePath, Token: token})
	if got.Status != http.StatusOK {
		t.Fatalf("GET support source: %d %s", got.Status, got.Body)
	}
	rep := send(t, env, req{Method: http.MethodPut, Path: supportSourcePath, Token: token, Body: jsonBody(body),
		Header: headers("If-Match", got.Header.Get("ETag"))})
	if rep.Status != http.StatusOK {
		t.Fatalf("PUT support source %s: %d %s", jsonBody(body), rep.Status, rep.Body)
	}
	var s supportSource
	rep.decode(t, &s)
	return s
}

// TestSupportSource: the document's default, its validation (an enabled source names an
// existing provider and some people), If-Match, scopes and its audit.
func TestSupportSource(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	token := env.Token(t, "support:write", "providers:write", "audit:read")
	reader := env.Token(t, "support:read")
	p, _ := createProvider(t, env, token, newProviderBody("support", "s3cret-support"))
	env.Track("s3cret-support")

	got := send(t, env, req{Method: http.MethodGet, Path: supportSourcePath, Token: reader})
	var s supportSource
	got.decode(t, &s)
	if got.Status != http.StatusOK || s.Enabled || s.ProviderID != nil || len(s.AllowedEmails) != 0 || s.AllowedEmailDomain != nil ||
		s.Version != 1 || got.Header.Get("ETag") != `"1"` {
		t.Fatalf("default support source: %d %s (ETag %s)", got.Status, got.Body, got.Header.Get("ETag"))
	}

	put := func(token, ifMatch string, body map[string]any) reply {
		t.Helper()
		h := http.Header{}
		if ifMatch != "" {
			h.Set("If-Match", ifMatch)
		}
		return send(t, env, req{Method: http.MethodPut, Path: supportSourcePath, Token: token, Body: jsonBody(body), Header: h})
	}
	for name, c := range map[string]struct {
		body  map[string]any
		field string
	}{
		"enabled without a provider": {map[string]any{"enabled": true, "allowed_emails": []string{"a@ops.example"}}, "provider_id"},
		"an unknown provider": {map[string]any{"enabled": true, "provider_id": "idp_" + strings.Repeat("0", 26),
			"allowed_emails": []string{"a@ops.example"}}, "provider_id"},
		"enabled naming nobody": {map[string]any{"enabled": true, "provider_id": p.ID}, "allowed_emails"},
		"a malformed email":     {map[string]any{"enabled": true, "provider_id": p.ID, "allowed_emails": []string{"not-an-email"}}, ""},
		"a malformed domain":    {map[string]any{"enabled": true, "provider_id": p.ID, "allowed_email_domain": "Not A Domain"}, "allowed_email_domain"},
		"an unknown member":     {map[string]any{"enabled": true, "provider_id": p.ID, "grants": []string{"org_x"}}, "grants"},
	} {
		rep := put(token, `"1"`, c.body)
		var pb problemBody
		rep.decode(t, &pb)
		if rep.Status != http.StatusBadRequest || pb.Error != "invalid_request" || (c.field != "" && !strings.Contains(string(rep.Body), c.field)) {
			t.Errorf("%s: %d %s; want 400 invalid_request naming %s", name, rep.Status, rep.Body, c.field)
		}
	}
	valid := map[string]any{"enabled": true, "provider_id": p.ID, "allowed_emails": []string{"Alice@Ops.Example"}, "allowed_email_domain": "support.example"}
	if rep := put(token, "", valid); rep.Status != http.StatusPreconditionRequired {
		t.Errorf("without If-Match: %d %s", rep.Status, rep.Body)
	}
	if rep := put(reader, `"1"`, valid); rep.Status != http.StatusForbidden || !strings.Contains(string(rep.Body), "support:write") {
		t.Errorf("with support:read only: %d %s", rep.Status, rep.Body)
	}
	rep := put(token, `"1"`, valid)
	rep.decode(t, &s)
	if rep.Status != http.StatusOK || !s.Enabled || *s.ProviderID != p.ID || len(s.AllowedEmails) != 1 || s.AllowedEmails[0] != "alice@ops.example" ||
		*s.AllowedEmailDomain != "support.example" || s.Version != 2 || rep.Header.Get("ETag") != `"2"` {
		t.Fatalf("PUT: %d %s", rep.Status, rep.Body)
	}
	if rep := put(token, `"1"`, valid); rep.Status != http.StatusPreconditionFailed || !strings.Contains(string(rep.Body), `"current_version":2`) {
		t.Errorf("stale If-Match: %d %s", rep.Status, rep.Body)
	}
	// Left out is the default: disabled, nobody.
	rep = put(token, `"2"`, map[string]any{})
	rep.decode(t, &s)
	if rep.Status != http.StatusOK || s.Enabled || s.ProviderID != nil || len(s.AllowedEmails) != 0 || s.AllowedEmailDomain != nil {
		t.Errorf("PUT of an empty document: %d %s", rep.Status, rep.Body)
	}

	var events struct {
		Items []activationEvent `json:"items"`
	}
	send(t, env, req{Method: http.MethodGet, Path: "/api/v1/operator/audit-events?operation=putSupportSource", Token: token}).decode(t, &events)
	var succeeded, failed int
	for _, e := range events.Items {
		switch e.Outcome {
		case "succeeded":
			succeeded++
		default:
			failed++
		}
	}
	if succeeded != 2 || failed < 8 {
		t.Errorf("audit of putSupportSource: %d succeeded, %d failed or denied; want 2 and every refusal", succeeded, failed)
	}
	last := events.Items[0]
	if last.Outcome != "succeeded" || strings.Join(last.Changed, ",") != "enabled,provider_id,allowed_emails,allowed_email_domain" {
		t.Errorf("last event: %+v", last)
	}
}

// TestSupportSourceDecidesWhoSignsIn: deployment sign-in makes a session only for people the
// support source names (its provider, a listed email or the domain); a change to the source
// ends the sessions of people it no longer names, on their next request.
func TestSupportSourceDecidesWhoSignsIn(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	op := startOP(t, env)
	p := signInProvider(t, env, op, "corp")
	token := env.Token(t, "support:write")
	op.AddUser(oidctest.User{Username: "carol", Email: "carol@example.com", EmailVerified: true})

	// Only alice, by email.
	putSupportSource(t, env, token, map[string]any{"enabled": true, "provider_id": p.ID, "allowed_emails": []string{"alice@example.com"}})
	if pg := newBrowser(t, env).through(t, op, "/signin?provider=corp", "carol"); pg.Status != http.StatusForbidden ||
		!strings.Contains(pg.Body, "support people only") {
		t.Errorf("carol, not named: %d %s", pg.Status, pg.Body)
	}
	b := newBrowser(t, env)
	if pg := b.through(t, op, "/signin?provider=corp", "alice"); pg.Status != http.StatusSeeOther {
		t.Fatalf("alice, named: %d %s", pg.Status, pg.Body)
	}
	for _, c := range b.c.Jar.Cookies(mustURL(t, env.URL)) {
		env.Track(c.Value)
	}
	if pg := b.get(t, "/signin"); !strings.Contains(pg.Body, "alice@example.com") {
		t.Fatalf("alice signed in: %s", pg.Body)
	}
	// Carol instead of alice: alice's session ends on her next request.
	putSupportSource(t, env, token, map[string]any{"enabled": true, "provider_id": p.ID, "allowed_emails": []string{"carol@example.com"}})
	if pg := b.get(t, "/signin"); strings.Contains(pg.Body, "alice@example.com") {
		t.Errorf("alice's session outlived the support source naming her: %s", pg.Body)
	}
	var live int
	if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM deployment_sessions WHERE revoked_at IS NULL`).Scan(&live); err != nil || live != 0 {
		t.Errorf("live sessions: %d %v", live, err)
	}
	// Disabled: nobody.
	putSupportSource(t, env, token, map[string]any{"enabled": false, "provider_id": p.ID, "allowed_email_domain": "example.com"})
	if pg := newBrowser(t, env).through(t, op, "/signin?provider=corp", "alice"); pg.Status != http.StatusForbidden {
		t.Errorf("alice while the support source is disabled: %d %s", pg.Status, pg.Body)
	}
}
