package apitest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/oidctest"
	"renga.dev/renga/server/pipeline"
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
		"a malformed email":     {map[string]any{"enabled": true, "provider_id": p.ID, "allowed_emails": []string{"not-an-email"}}, "allowed_emails.0"},
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
	// Both writes that succeeded changed every field (to the source, then back to the default).
	// (Not "the newest event": two events of one millisecond list in either order.)
	for _, e := range events.Items {
		if e.Outcome == "succeeded" && strings.Join(e.Changed, ",") != "enabled,provider_id,allowed_emails,allowed_email_domain" {
			t.Errorf("succeeded event: %+v", e)
		}
	}
}

// TestSupportSourceProviderCannotBeDeleted: the provider the enabled support source names is
// not deleted (409 provider_in_use, the provider and the source unchanged, the refusal
// audited); once the source names another, or is disabled, it is (a disabled source only
// remembers its provider_id: enabling it again naming a deleted provider is refused). A source
// write naming a provider and the provider's delete, sent at once, never both succeed: an
// enabled source never names a provider that is gone.
func TestSupportSourceProviderCannotBeDeleted(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	token := env.Token(t, "support:write", "providers:write", "audit:read")
	a, _ := createProvider(t, env, token, newProviderBody("named", ""))
	b, _ := createProvider(t, env, token, newProviderBody("other", ""))
	del := func(id string) reply {
		return send(t, env, req{Method: http.MethodDelete, Path: providersPath + "/" + id, Token: token,
			Header: headers("Idempotency-Key", newKey())})
	}

	putSupportSource(t, env, token, map[string]any{"enabled": true, "provider_id": a.ID, "allowed_emails": []string{"alice@ops.example"}})
	rep := del(a.ID)
	if p := rep.problem(t); rep.Status != http.StatusConflict || p.Error != "provider_in_use" || p.Title != "Provider in use" ||
		!strings.Contains(string(rep.Body), "the enabled support source names it") {
		t.Fatalf("delete the provider the support source names: %d %s; want 409 provider_in_use", rep.Status, rep.Body)
	}
	getProvider(t, env, token, a.ID) // still there (it fails the test otherwise)
	// Another provider goes.
	if rep := del(b.ID); rep.Status != http.StatusNoContent {
		t.Fatalf("delete a provider the source does not name: %d %s", rep.Status, rep.Body)
	}
	// So does this one once the source names another.
	c, _ := createProvider(t, env, token, newProviderBody("next", ""))
	putSupportSource(t, env, token, map[string]any{"enabled": true, "provider_id": c.ID, "allowed_email_domain": "ops.example"})
	if rep := del(a.ID); rep.Status != http.StatusNoContent {
		t.Fatalf("delete the provider the source named before: %d %s", rep.Status, rep.Body)
	}
	// And once the source is disabled (as renga support disable leaves it: names kept).
	s := putSupportSource(t, env, token, map[string]any{"enabled": false, "provider_id": c.ID, "allowed_email_domain": "ops.example"})
	if rep := del(c.ID); rep.Status != http.StatusNoContent {
		t.Fatalf("delete the provider a disabled source names: %d %s", rep.Status, rep.Body)
	}
	var kept supportSource
	send(t, env, req{Method: http.MethodGet, Path: supportSourcePath, Token: token}).decode(t, &kept)
	if kept.ProviderID == nil || *kept.ProviderID != c.ID || kept.Enabled || kept.Version != s.Version {
		t.Fatalf("the disabled source after its provider's delete: %+v, want it untouched (version %d)", kept, s.Version)
	}
	rep = send(t, env, req{Method: http.MethodPut, Path: supportSourcePath, Token: token, Header: headers("If-Match", fmt.Sprintf(`"%d"`, kept.Version)),
		Body: jsonBody(map[string]any{"enabled": true, "provider_id": c.ID, "allowed_email_domain": "ops.example"})})
	if rep.Status != http.StatusBadRequest || !strings.Contains(string(rep.Body), "provider_id") {
		t.Fatalf("enable the source naming its deleted provider: %d %s; want 400 naming provider_id", rep.Status, rep.Body)
	}

	var events struct {
		Items []struct {
			Outcome string `json:"outcome"`
			Error   string `json:"error"`
		} `json:"items"`
	}
	send(t, env, req{Method: http.MethodGet, Path: "/api/v1/operator/audit-events?operation=deleteIdentityProvider", Token: token}).decode(t, &events)
	inUse := 0
	for _, e := range events.Items {
		if e.Outcome == "failed" && e.Error == "provider_in_use" {
			inUse++
		}
	}
	if inUse != 1 {
		t.Errorf("audit: %d failed deletes with provider_in_use, want 1: %+v", inUse, events.Items)
	}

	// The race: a source write enabling it naming a fresh provider and that provider's delete,
	// at once. Either the write wins (the delete is refused) or the delete does (the write is
	// refused: the provider is unknown); never both.
	putSupportSource(t, env, token, map[string]any{})
	for trial := range 8 {
		p, _ := createProvider(t, env, token, newProviderBody(fmt.Sprintf("race%d", trial), ""))
		got := send(t, env, req{Method: http.MethodGet, Path: supportSourcePath, Token: token})
		body := jsonBody(map[string]any{"enabled": true, "provider_id": p.ID, "allowed_emails": []string{"alice@ops.example"}})
		var put, gone reply
		var putErr, delErr error
		var wg sync.WaitGroup
		wg.Go(func() {
			put, putErr = sendE(env, req{Method: http.MethodPut, Path: supportSourcePath, Token: token, Body: body,
				Header: headers("If-Match", got.Header.Get("ETag"))})
		})
		wg.Go(func() {
			gone, delErr = sendE(env, req{Method: http.MethodDelete, Path: providersPath + "/" + p.ID, Token: token,
				Header: headers("Idempotency-Key", newKey())})
		})
		wg.Wait()
		if putErr != nil || delErr != nil {
			t.Fatal(putErr, delErr)
		}
		switch {
		case put.Status == http.StatusOK && gone.Status == http.StatusConflict && gone.problem(t).Error == "provider_in_use":
			putSupportSource(t, env, token, map[string]any{}) // frees it for the next trial
		case put.Status == http.StatusBadRequest && strings.Contains(string(put.Body), "provider_id") && gone.Status == http.StatusNoContent:
		default:
			t.Fatalf("trial %d: source write %d %s, delete %d %s; want one of them refused", trial, put.Status, put.Body, gone.Status, gone.Body)
		}
		var now supportSource
		send(t, env, req{Method: http.MethodGet, Path: supportSourcePath, Token: token}).decode(t, &now)
		if now.Enabled {
			getProvider(t, env, token, *now.ProviderID) // the provider an enabled source names exists
		}
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

	// Every sign-in is audited, refused ones too: by the session it made (support_person, the
	// session's ID, the email), or by anonymous with the email the provider verified.
	// Fails when: finishSignIn records no audit event, or a refusal is not recorded.
	rows, err := env.Pool.Query(context.Background(), `SELECT actor_type, actor_id, actor_name, provider_id, outcome, status,
		coalesce(error, ''), changed_fields FROM audit_events WHERE operation = 'signIn' ORDER BY time, id`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var typ, actor, name, provider, outcome, code string
		var status int
		var changed []string
		if err := rows.Scan(&typ, &actor, &name, &provider, &outcome, &status, &code, &changed); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(actor, "ses_") {
			actor = "ses"
		}
		if provider != p.ID {
			t.Errorf("a sign-in audited with provider %s, want %s", provider, p.ID)
		}
		got = append(got, fmt.Sprintf("%s %s %s %s %d %s %v", typ, actor, name, outcome, status, code, changed))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"support_person anonymous carol@example.com denied 403 unauthenticated []",
		"support_person ses alice@example.com succeeded 303  [session]",
		"support_person anonymous alice@example.com denied 403 unauthenticated []",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("sign-ins audited:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

const supportGrantsPath = "/api/v1/org/support-grants"

type supportGrant struct {
	ID           string  `json:"id"`
	State        string  `json:"state"`
	SupportEmail *string `json:"support_email"`
	GrantedBy    struct {
		UserID string `json:"user_id"`
		Email  string `json:"email"`
	} `json:"granted_by"`
	ExpiresAt time.Time  `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at"`
}

// secondOwner adds an owner to an organization and returns their personal API key.
func secondOwner(t testing.TB, env *servertest.Env, orgID string) string {
	t.Helper()
	ctx := context.Background()
	_, secret, err := domain.CreateInvitation(ctx, env.Pool, orgID, newSlug()+"@example.com")
	if err != nil {
		t.Fatal(err)
	}
	agentTrack(env, secret)
	a, err := domain.AcceptInvitation(ctx, env.Pool, secret, "Second owner", domain.BuiltinDefaults)
	if err != nil {
		t.Fatal(err)
	}
	agentTrack(env, a.APIKey)
	return a.APIKey
}

// grantSupport makes a grant as the owner, until expires (for email, or any support person).
func grantSupport(t testing.TB, env *servertest.Env, owner string, expires time.Time, email string) supportGrant {
	t.Helper()
	body := map[string]any{"expires_at": expires.UTC().Format(time.RFC3339)}
	if email != "" {
		body["support_email"] = email
	}
	rep := send(t, env, req{Method: http.MethodPost, Path: supportGrantsPath, Token: owner, Body: jsonBody(body),
		Header: headers("Idempotency-Key", newKey())})
	if rep.Status != http.StatusCreated {
		t.Fatalf("grant: %d %s", rep.Status, rep.Body)
	}
	var g supportGrant
	rep.decode(t, &g)
	return g
}

// TestSupportGrants: owners make time-boxed grants (expires_at required, in the future, at most
// 30 days ahead), every owner sees them, any owner revokes them (target-state idempotent), each
// change is in the Activity; the operator reads their metadata with support:read only.
func TestSupportGrants(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	orgID, owner := agentOwner(t, env)
	other := secondOwner(t, env, orgID)

	for name, body := range map[string]map[string]any{
		"no expires_at":   {},
		"in the past":     {"expires_at": time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)},
		"over 30 days":    {"expires_at": time.Now().Add(31 * 24 * time.Hour).UTC().Format(time.RFC3339)},
		"a bad email":     {"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "support_email": "nobody"},
		"an extra member": {"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "scope": "write"},
	} {
		rep := send(t, env, req{Method: http.MethodPost, Path: supportGrantsPath, Token: owner, Body: jsonBody(body),
			Header: headers("Idempotency-Key", newKey())})
		var pb problemBody
		rep.decode(t, &pb)
		if rep.Status != http.StatusBadRequest || pb.Error != "invalid_request" {
			t.Errorf("grant with %s: %d %s; want 400 invalid_request", name, rep.Status, rep.Body)
		}
	}
	if rep := send(t, env, req{Method: http.MethodPost, Path: supportGrantsPath, Token: owner,
		Body: jsonBody(map[string]any{"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})}); rep.Status != http.StatusBadRequest ||
		!strings.Contains(string(rep.Body), "idempotency_key_required") {
		t.Errorf("grant without an Idempotency-Key: %d %s", rep.Status, rep.Body)
	}

	expires := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	g := grantSupport(t, env, owner, expires, "Alice@Example.com")
	if g.State != "active" || !g.ExpiresAt.Equal(expires) || g.SupportEmail == nil || *g.SupportEmail != "alice@example.com" ||
		!strings.HasPrefix(g.ID, "grt_") || !strings.HasPrefix(g.GrantedBy.UserID, "usr_") || g.RevokedAt != nil {
		t.Fatalf("grant: %+v", g)
	}
	anyone := grantSupport(t, env, other, time.Now().Add(29*24*time.Hour), "")

	// Every owner sees every grant.
	for _, key := range []string{owner, other} {
		var list struct {
			Items []supportGrant `json:"items"`
		}
		send(t, env, req{Method: http.MethodGet, Path: supportGrantsPath, Token: key}).decode(t, &list)
		if len(list.Items) != 2 || list.Items[0].ID != anyone.ID || list.Items[1].ID != g.ID {
			t.Errorf("grants an owner sees: %+v", list.Items)
		}
	}
	// Another owner revokes the first owner's grant; again is success, unchanged.
	rep := send(t, env, req{Method: http.MethodDelete, Path: supportGrantsPath + "/" + g.ID, Token: other})
	var revoked supportGrant
	rep.decode(t, &revoked)
	if rep.Status != http.StatusOK || revoked.State != "revoked" || revoked.RevokedAt == nil {
		t.Fatalf("revoke: %d %s", rep.Status, rep.Body)
	}
	rep = send(t, env, req{Method: http.MethodDelete, Path: supportGrantsPath + "/" + g.ID, Token: owner})
	var again supportGrant
	rep.decode(t, &again)
	if rep.Status != http.StatusOK || again.State != "revoked" || !again.RevokedAt.Equal(*revoked.RevokedAt) {
		t.Errorf("revoke again: %d %s", rep.Status, rep.Body)
	}
	if rep := send(t, env, req{Method: http.MethodDelete, Path: supportGrantsPath + "/grt_" + strings.Repeat("0", 26), Token: owner}); rep.Status != http.StatusNotFound {
		t.Errorf("revoke an unknown grant: %d %s", rep.Status, rep.Body)
	}
	// Another organization's owner cannot see or revoke it.
	_, stranger := agentOwner(t, env)
	if rep := send(t, env, req{Method: http.MethodDelete, Path: supportGrantsPath + "/" + anyone.ID, Token: stranger}); rep.Status != http.StatusNotFound {
		t.Errorf("another organization's owner revoking: %d %s", rep.Status, rep.Body)
	}

	var activity struct {
		Items []struct {
			Operation string   `json:"operation"`
			Changed   []string `json:"changed_fields"`
		} `json:"items"`
	}
	send(t, env, req{Method: http.MethodGet, Path: "/api/v1/org/activity", Token: owner}).decode(t, &activity)
	var ops []string
	for _, a := range activity.Items {
		ops = append(ops, a.Operation)
	}
	if got := strings.Join(ops, ","); !strings.HasPrefix(got, "revokeSupportGrant,createSupportGrant,createSupportGrant") {
		t.Errorf("Activity: %s", got)
	}

	// The operator reads the grants' metadata with support:read, and nothing without it.
	reader := env.Token(t, "support:read")
	var access struct {
		Items []map[string]any `json:"items"`
	}
	rep = send(t, env, req{Method: http.MethodGet, Path: "/api/v1/operator/organizations/" + orgID + "/support-access", Token: reader})
	rep.decode(t, &access)
	if rep.Status != http.StatusOK || len(access.Items) != 2 || access.Items[1]["state"] != "revoked" || access.Items[0]["state"] != "active" {
		t.Errorf("support access: %d %s", rep.Status, rep.Body)
	}
	for _, item := range access.Items {
		for k := range item {
			switch k {
			case "id", "organization_id", "state", "support_email", "granted_by", "granted_at", "expires_at", "revoked_at":
			default:
				t.Errorf("support access shows %q", k)
			}
		}
	}
	if rep := send(t, env, req{Method: http.MethodGet, Path: "/api/v1/operator/organizations/" + orgID + "/support-access",
		Token: env.Token(t, "organizations:read")}); rep.Status != http.StatusForbidden {
		t.Errorf("support access with organizations:read: %d", rep.Status)
	}
	if rep := send(t, env, req{Method: http.MethodGet, Path: "/api/v1/operator/organizations/org_" + strings.Repeat("0", 26) + "/support-access",
		Token: reader}); rep.Status != http.StatusNotFound {
		t.Errorf("support access of an unknown organization: %d", rep.Status)
	}
}

// TestOperatorCannotGrantSupport: no operation of the operator API writes a grant (the spec
// has none, every other method on the support paths is refused), an operator token is no
// owner credential, and after every attempt no grant exists.
func TestOperatorCannotGrantSupport(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	token := env.Token(t, servertest.AllScopes()...)
	orgID, _ := agentOwner(t, env)

	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	ops, err := pipeline.Operations(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if op.Auth == pipeline.AuthOperator && op.Mutation && (strings.Contains(op.Route, "support-access") || strings.Contains(op.Route, "grant")) {
			t.Errorf("operator operation %s (%s %s) writes support access", op.ID, op.Method, op.Route)
		}
		if strings.Contains(op.Route, "support-grants") && op.Auth != pipeline.AuthUser {
			t.Errorf("%s (%s %s) is not an owner operation", op.ID, op.Method, op.Route)
		}
	}
	body := jsonBody(map[string]any{"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	access := "/api/v1/operator/organizations/" + orgID + "/support-access"
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		for _, path := range []string{access, access + "/grt_" + strings.Repeat("0", 26), "/api/v1/operator/support-grants",
			"/api/v1/operator/organizations/" + orgID + "/support-grants"} {
			rep := send(t, env, req{Method: m, Path: path, Token: token, Body: body, Header: headers("Idempotency-Key", newKey())})
			if rep.Status != http.StatusMethodNotAllowed && rep.Status != http.StatusNotFound {
				t.Errorf("%s %s with an operator token: %d %s", m, path, rep.Status, rep.Body)
			}
		}
	}
	for _, m := range []string{http.MethodPost, http.MethodGet} {
		if rep := send(t, env, req{Method: m, Path: supportGrantsPath, Token: token, Body: body, Header: headers("Idempotency-Key", newKey())}); rep.Status != http.StatusUnauthorized {
			t.Errorf("%s %s with an operator token: %d %s", m, supportGrantsPath, rep.Status, rep.Body)
		}
	}
	// The support source names people; writing it grants nothing.
	p, _ := createProvider(t, env, token, newProviderBody("support", "s3cret-support"))
	env.Track("s3cret-support")
	putSupportSource(t, env, token, map[string]any{"enabled": true, "provider_id": p.ID, "allowed_email_domain": "example.com"})
	var n int
	if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM support_grants`).Scan(&n); err != nil || n != 0 {
		t.Errorf("grants after the operator's attempts: %d %v", n, err)
	}
}
