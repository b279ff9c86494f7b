package apitest

import (
	"net/http"
	"testing"

	"renga.dev/renga/server/servertest"
)

// Organization identity providers (DESIGN §5, issue 12 item 8): the owners' own providers,
// gated by the organization_identity_providers entitlement, whose withdrawal disables them in
// the policy change's transaction.

const orgProvidersPath = "/api/v1/org/identity-providers"

type orgProviderJSON struct {
	ID              string  `json:"id"`
	OrganizationID  string  `json:"organization_id"`
	Slug            string  `json:"slug"`
	State           string  `json:"state"`
	DisabledReason  *string `json:"disabled_reason"`
	DisabledAt      *string `json:"disabled_at"`
	HasClientSecret bool    `json:"has_client_secret"`
}

func createOrgProvider(owner, slug, secret string) req {
	body := map[string]any{"slug": slug, "protocol": "oidc", "issuer": "https://login.acme.example",
		"display_name": "Acme " + slug, "client_id": "renga"}
	if secret != "" {
		body["client_secret"] = map[string]string{"value": secret}
	}
	return req{Method: http.MethodPost, Path: orgProvidersPath, Token: owner, Header: headers("Idempotency-Key", newKey()), Body: jsonBody(body)}
}

func listOrgProviders(t testing.TB, env *servertest.Env, owner string) map[string]orgProviderJSON {
	t.Helper()
	rep := send(t, env, req{Method: http.MethodGet, Path: orgProvidersPath, Token: owner})
	if rep.Status != http.StatusOK {
		t.Fatalf("list: %d %s", rep.Status, rep.Body)
	}
	var l struct {
		Items []orgProviderJSON `json:"items"`
	}
	rep.decode(t, &l)
	out := map[string]orgProviderJSON{}
	for _, p := range l.Items {
		out[p.ID] = p
	}
	return out
}

// TestOrganizationIdentityProviders: owners add providers (the secret stored sealed, never
// returned, in no audit or Activity), a slug is unique among enabled ones, disabling is
// target-state idempotent and frees the slug.
func TestOrganizationIdentityProviders(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	orgID, owner := agentOwner(t, env)
	secret := "org-provider-secret-" + random(12)
	env.Track(secret)

	rep := send(t, env, createOrgProvider(owner, "acme", secret))
	if rep.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", rep.Status, rep.Body)
	}
	var p orgProviderJSON
	rep.decode(t, &p)
	if p.OrganizationID != orgID || p.State != "enabled" || !p.HasClientSecret || p.DisabledReason != nil || p.DisabledAt != nil {
		t.Errorf("created: %+v", p)
	}
	if n := countRows(t, env, `SELECT count(*) FROM organization_identity_providers WHERE id = $1 AND client_secret IS NOT NULL
		AND position(convert_to($2, 'UTF8') IN client_secret) = 0`, p.ID, secret); n != 1 {
		t.Error("the client secret is not stored sealed")
	}
	send(t, env, createOrgProvider(owner, "acme", "")).expectProblem(t, http.StatusConflict, "slug_taken")
	send(t, env, req{Method: http.MethodPost, Path: orgProvidersPath, Token: owner, Header: headers("Idempotency-Key", newKey()),
		Body: jsonBody(map[string]any{"slug": "bad", "protocol": "oidc", "issuer": "http://login.example.com", "display_name": "x", "client_id": "c"})}).
		expectProblem(t, http.StatusBadRequest, "invalid_request")

	for i, want := range []bool{true, false} { // the second disable changes nothing
		rep := send(t, env, req{Method: http.MethodPost, Path: orgProvidersPath + "/" + p.ID + "/disable", Token: owner})
		var d orgProviderJSON
		rep.decode(t, &d)
		if rep.Status != http.StatusOK || d.State != "disabled" || d.DisabledReason == nil || *d.DisabledReason != "owner" || d.DisabledAt == nil {
			t.Fatalf("disable %d: %d %s", i, rep.Status, rep.Body)
		}
		if events := countRows(t, env, `SELECT count(*) FROM organization_activity WHERE organization_id = $1 AND 'identity_providers' = ANY(changed_fields)`, orgID); want && events < 2 {
			t.Errorf("after disable %d: %d Activity entries name identity_providers", i, events)
		}
	}
	// The slug is free again; another organization's provider is out of reach.
	send(t, env, createOrgProvider(owner, "acme", "")).expectProblemOrOK(t, http.StatusCreated)
	_, other := agentOwner(t, env)
	send(t, env, req{Method: http.MethodPost, Path: orgProvidersPath + "/" + p.ID + "/disable", Token: other}).
		expectProblem(t, http.StatusNotFound, "not_found")
	if got := listOrgProviders(t, env, other); len(got) != 0 {
		t.Errorf("another organization lists %d providers", len(got))
	}
	if got := listOrgProviders(t, env, owner); len(got) != 2 {
		t.Errorf("the organization lists %d providers, want 2", len(got))
	}
}

// TestOrganizationProvidersEntitlement: without organization_identity_providers an owner cannot
// add a provider (403 not_entitled); withdrawing it disables every enabled provider in the
// policy change's transaction (visible before the PUT's 200, with the reason
// entitlement_withdrawn); a refused policy change (412) disables nothing. Fails when the
// withdrawal hook does nothing or runs outside the policy change.
func TestOrganizationProvidersEntitlement(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, operator := scopedToken(t, env, "policies:write")
	orgID, owner := agentOwner(t, env)
	var ids []string
	for _, slug := range []string{"one", "two"} {
		rep := send(t, env, createOrgProvider(owner, slug, ""))
		var p orgProviderJSON
		rep.decode(t, &p)
		if rep.Status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", slug, rep.Status, rep.Body)
		}
		ids = append(ids, p.ID)
	}
	send(t, env, req{Method: http.MethodPost, Path: orgProvidersPath + "/" + ids[1] + "/disable", Token: owner}).expectProblemOrOK(t, http.StatusOK)

	withdraw := map[string]any{"entitlements": map[string]any{"organization_identity_providers": false}}
	_, etag := getPolicy(t, env, operator, orgID)
	rep := send(t, env, putPolicyReq(operator, orgID, `"999"`, withdraw))
	rep.expectProblem(t, http.StatusPreconditionFailed, "version_mismatch")
	if got := listOrgProviders(t, env, owner)[ids[0]]; got.State != "enabled" {
		t.Fatalf("a refused policy change disabled a provider: %+v", got)
	}
	putPolicy(t, env, operator, orgID, etag, withdraw)
	got := listOrgProviders(t, env, owner)
	if p := got[ids[0]]; p.State != "disabled" || p.DisabledReason == nil || *p.DisabledReason != "entitlement_withdrawn" {
		t.Errorf("after the withdrawal: %+v, want disabled (entitlement_withdrawn)", p)
	}
	if p := got[ids[1]]; p.DisabledReason == nil || *p.DisabledReason != "owner" {
		t.Errorf("a provider the owner disabled before: %+v, want its reason kept (owner)", p)
	}
	send(t, env, createOrgProvider(owner, "three", "")).expectProblem(t, http.StatusForbidden, "not_entitled")
	if n := countRows(t, env, `SELECT count(*) FROM organization_identity_providers WHERE organization_id = $1`, orgID); n != 2 {
		t.Errorf("%d providers stored, want 2 (nothing added without the entitlement)", n)
	}
	// Granted again: disabled providers stay disabled; new ones may be added.
	_, etag = getPolicy(t, env, operator, orgID)
	putPolicy(t, env, operator, orgID, etag, map[string]any{})
	if p := listOrgProviders(t, env, owner)[ids[0]]; p.State != "disabled" {
		t.Errorf("granting the entitlement again re-enabled %+v", p)
	}
	send(t, env, createOrgProvider(owner, "one", "")).expectProblemOrOK(t, http.StatusCreated)
}
