package apitest

import (
	"context"
	"net/http"
	"net/netip"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pipeline"
	"renga.dev/renga/server/servertest"
)

// specOp is one operation of the embedded spec as the pipeline reads it.
type specOp struct {
	ID          string // lowerCamelCase, as openapi.yaml spells it
	Method      string
	Route       string
	Scope       string
	Auth        string // operator, user or public
	Mutation    bool
	KeyRequired bool
	IfMatch     bool
	HasBody     bool
}

// specOps lists the operations of the embedded spec through pipeline.Operations, the same reading
// the pipeline enforces, sorted for stable subtest names.
func specOps(t testing.TB) []specOp {
	t.Helper()
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	ops, err := pipeline.Operations(spec)
	if err != nil {
		t.Fatalf("pipeline.Operations refuses the embedded spec: %v", err)
	}
	var out []specOp
	for _, op := range ops {
		o := op.Spec()
		id := op.ID
		if id != "" {
			id = strings.ToLower(id[:1]) + id[1:]
		}
		// The scope the pipeline enforces is the one the spec declares, read here directly.
		declared, _ := o.Extensions["x-renga-scope"].(string)
		if declared != op.Scope {
			t.Errorf("%s %s: the pipeline enforces scope %q, the spec declares %q", op.Method, op.Route, op.Scope, declared)
		}
		out = append(out, specOp{ID: id, Method: op.Method, Route: op.Route, Scope: declared, Auth: op.Auth, Mutation: op.Mutation,
			KeyRequired: op.KeyRequired, IfMatch: op.IfMatch, HasBody: o.RequestBody != nil})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Route != out[j].Route {
			return out[i].Route < out[j].Route
		}
		return out[i].Method < out[j].Method
	})
	return out
}

// designScopes pins the scopes DESIGN.md §3.4 and §4 give the operations that exist, so that the
// spec cannot drift from the contract unnoticed. An operation not listed only needs a known scope.
var designScopes = map[string]string{
	"getDeployment":                "deployment:read",
	"getTokenSelf":                 domain.ScopeAuthenticated,
	"revokeTokenSelf":              domain.ScopeAuthenticated,
	"listOrganizations":            "organizations:read",
	"createOrganization":           "organizations:write",
	"getOrganization":              "organizations:read",
	"updateOrganization":           "organizations:write",
	"listAuditEvents":              "audit:read",
	"suspendOrganization":          "organizations:write",
	"resumeOrganization":           "organizations:write",
	"scheduleOrganizationDeletion": "organizations:write",
	"cancelOrganizationDeletion":   "organizations:write",
	"listOrganizationOwners":       "organizations:read",
	"listInvitations":              "organizations:read",
	"createInvitation":             "organizations:write",
	"getInvitation":                "organizations:read",
	"revokeInvitation":             "organizations:write",
	"getPolicy":                    "policies:read",
	"putPolicy":                    "policies:write",
	"getEffectivePolicy":           "policies:read",
	"getOrganizationUsage":         "usage:read",
	"listUsage":                    "usage:read",
	"acceptInvitation":             "public",
	"getMe":                        "owner",
	"listActivity":                 "owner",
	"getSettings":                  "owner",
	"putSettings":                  "owner",
	"listIntakeKeys":               "owner",
	"createIntakeKey":              "owner",
	"revokeIntakeKey":              "owner",
	"rotateIntakeKey":              "owner",
	"listAgents":                   "owner",
	"listObservations":             "owner",
	"listJobs":                     "owner",
	"createJob":                    "owner",
	"getHome":                      "public",
	"registerInstallation":         "agent",
	"submitObservations":           "agent",
	"listAgentJobs":                "agent",
	"submitJobResult":              "agent",
}

// nonexistentIDs fill path parameters: syntactically valid, never stored. A new path parameter
// needs an entry here.
var nonexistentIDs = map[string]string{
	"organization_id": "org_" + strings.Repeat("0", 26),
	"invitation_id":   "inv_" + strings.Repeat("0", 26),
	"key_id":          "key_" + strings.Repeat("0", 26),
	"installation_id": "ins_" + strings.Repeat("0", 26),
	"job_id":          "job_" + strings.Repeat("0", 26),
	"provider_id":     "idp_" + strings.Repeat("0", 26),
	"org_provider_id": "oip_" + strings.Repeat("0", 26),
	"transfer_id":     "xfr_" + strings.Repeat("0", 26),
	"grant_id":        "grt_" + strings.Repeat("0", 26),
}

// minimalQueries are the required query parameters per operationId.
var minimalQueries = map[string]string{
	"getOrganizationUsage": "from=2026-01-01&to=2026-01-31",
	"listUsage":            "from=2026-01-01&to=2026-01-31",
	"getTransferArchive":   "capability=" + domain.CapabilityPrefix + "x",
}

// minimalContentTypes are the bodies that are not JSON, per operationId.
var minimalContentTypes = map[string]string{
	"importOrganization": "application/octet-stream",
}

// minimalBodies are valid request bodies per operationId. A new operation with a body needs an
// entry here; the scope matrix fails until it has one.
var minimalBodies = map[string]func() []byte{
	"createOrganization": func() []byte {
		return jsonBody(map[string]string{"slug": newSlug(), "display_name": "x"})
	},
	"updateOrganization":  func() []byte { return jsonBody(map[string]string{"display_name": "x"}) },
	"suspendOrganization": func() []byte { return jsonBody(map[string]string{"reason": "x"}) },
	"createInvitation":    func() []byte { return jsonBody(map[string]string{"email": newSlug() + "@example.com"}) },
	"putPolicy":           func() []byte { return []byte(`{}`) },
	"putSupportSource":    func() []byte { return []byte(`{}`) },
	"createSupportGrant": func() []byte {
		return jsonBody(map[string]string{"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	},
	"putSettings":     func() []byte { return []byte(`{}`) },
	"createIntakeKey": func() []byte { return []byte(`{"name": "k"}`) },
	"createJob": func() []byte {
		return []byte(`{"installation_id": "ins_` + strings.Repeat("0", 26) + `", "command": "uptime"}`)
	},
	"registerInstallation": func() []byte {
		return []byte(`{"installation_id": "ins_` + strings.Repeat("0", 26) + `", "public_key": "` + strings.Repeat("A", 43) + `=", "hostname": "h", "os": "linux"}`)
	},
	"submitObservations": func() []byte {
		return []byte(`{"batch_id": "b1", "observations": [{"observed_at": "2026-11-30T00:00:00Z", "kind": "host.facts", "data": {}}]}`)
	},
	"submitJobResult": func() []byte { return []byte(`{"status": "succeeded"}`) },
	"createIdentityProvider": func() []byte {
		return jsonBody(map[string]string{"slug": newSlug(), "protocol": "oidc", "issuer": "https://id.example.com",
			"display_name": "x", "client_id": "c"})
	},
	"putIdentityProvider": func() []byte { return []byte(`{"display_name": "x", "client_id": "c"}`) },
	"createOrganizationIdentityProvider": func() []byte {
		return jsonBody(map[string]string{"slug": newSlug(), "protocol": "oidc", "issuer": "https://id.example.com",
			"display_name": "x", "client_id": "c"})
	},
	"importOrganization": func() []byte { return []byte("not an archive") },
	"completeTransfer":   func() []byte { return []byte(`{}`) },
	"createExport":       func() []byte { return []byte(`{}`) },
	"acceptInvitation": func() []byte {
		return jsonBody(map[string]string{"token": domain.InvitationPrefix + domain.NewSecret(), "display_name": "x"})
	},
}

var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

// minimalRequest builds a request for op that passes validation: path parameters filled, a
// minimal body, a fresh Idempotency-Key where required and If-Match "1" where declared. (An
// optional key is left out: what a key does is idempotency_test.go's concern.)
func minimalRequest(t testing.TB, op specOp, token string) (req, bool) {
	t.Helper()
	ok := true
	path := pathParam.ReplaceAllStringFunc(op.Route, func(m string) string {
		name := m[1 : len(m)-1]
		v, known := nonexistentIDs[name]
		if !known {
			t.Errorf("%s %s: no nonexistent value known for path parameter %q; add one to nonexistentIDs", op.Method, op.Route, name)
			ok = false
		}
		return v
	})
	if q := minimalQueries[op.ID]; q != "" {
		path += "?" + q
	}
	r := req{Method: op.Method, Path: path, Token: token, Header: http.Header{}}
	if op.HasBody {
		body, known := minimalBodies[op.ID]
		if !known {
			t.Errorf("%s (%s %s) takes a body but minimalBodies has none for it; add one", op.ID, op.Method, op.Route)
			ok = false
		} else {
			r.Body = body()
		}
		if ct := minimalContentTypes[op.ID]; ct != "" {
			r.Header.Set("Content-Type", ct)
		}
	}
	if op.KeyRequired {
		r.Header.Set("Idempotency-Key", newKey())
	}
	if op.IfMatch {
		r.Header.Set("If-Match", `"1"`)
	}
	return r, ok
}

// sufficient is the scope rule of DESIGN §3.4, written out independently of the server: a write
// scope includes its read scope; no other scope implies another; `authenticated` needs none.
func sufficient(granted []string, required string) bool {
	if required == domain.ScopeAuthenticated {
		return true
	}
	for _, g := range granted {
		if g == required {
			return true
		}
		if base, ok := strings.CutSuffix(required, ":read"); ok && g == base+":write" {
			return true
		}
	}
	return false
}

func TestScopeMatrix(t *testing.T) {
	t.Parallel()
	ops := specOps(t)
	if len(ops) == 0 {
		t.Fatal("the embedded spec has no operations")
	}
	for _, op := range ops {
		if want, ok := designScopes[op.ID]; ok && op.Scope != want {
			t.Errorf("%s: x-renga-scope %q, DESIGN.md says %q", op.ID, op.Scope, want)
		}
		if op.Scope == "" {
			t.Errorf("%s %s (%s) has no x-renga-scope", op.Method, op.Route, op.ID)
		} else if op.Auth == "operator" && op.Scope != domain.ScopeAuthenticated && !contains(domain.Scopes, op.Scope) {
			t.Errorf("%s %s (%s): x-renga-scope %q is not a known scope", op.Method, op.Route, op.ID, op.Scope)
		}
	}

	env := servertest.Start(t)
	ctx := context.Background()

	// One token per scope, each holding exactly that scope.
	single := map[string]string{}
	for _, sc := range domain.Scopes {
		_, single[sc] = scopedToken(t, env, sc)
	}

	// Tokens that must not authenticate, however many scopes they hold.
	all := servertest.AllScopes()
	past := time.Now().Add(-time.Hour)
	_, expired := mintToken(t, env, domain.NewToken{Name: "expired", Scopes: all, ExpiresAt: &past})
	revokedTok, revoked := mintToken(t, env, domain.NewToken{Name: "revoked", Scopes: all})
	if _, err := domain.RevokeToken(ctx, env.Pool, revokedTok.ID); err != nil {
		t.Fatal(err)
	}
	_, wrongSource := mintToken(t, env, domain.NewToken{Name: "wrong-source", Scopes: all,
		AllowedSources: []netip.Prefix{mustPrefix("10.0.0.0/8")}})
	unauthenticated := []struct{ name, token string }{
		{"no token", ""},
		{"malformed token", "renga_operator_not-a-token"},
		{"unknown token", domain.TokenPrefix + domain.NewSecret()},
		{"expired token", expired},
		{"revoked token", revoked},
		{"wrong-source token", wrongSource},
	}

	for _, op := range ops {
		if op.Auth != "operator" {
			continue // TestCredentialPaths
		}
		t.Run(op.ID, func(t *testing.T) {
			// A fresh token for every call of an operation that revokes its caller.
			tokenFor := func(scopes ...string) string {
				if op.ID == "revokeTokenSelf" {
					_, s := scopedToken(t, env, scopes...)
					return s
				}
				if len(scopes) == 1 {
					return single[scopes[0]]
				}
				_, s := scopedToken(t, env, scopes...)
				return s
			}

			// One code and no hint which check failed: the bodies differ only in request_id.
			var firstDetail string
			for i, u := range unauthenticated {
				r, ok := minimalRequest(t, op, u.token)
				if !ok {
					return
				}
				rep := send(t, env, r)
				rep.expectProblem(t, http.StatusUnauthorized, "unauthenticated")
				var detail map[string]any
				rep.decode(t, &detail)
				delete(detail, "request_id")
				d := string(jsonBody(detail))
				if i == 0 {
					firstDetail = d
				} else if d != firstDetail {
					t.Errorf("%s: the 401 for %s differs from the one for %s: %s vs %s", op.ID, u.name, unauthenticated[0].name, d, firstDetail)
				}
			}

			for _, sc := range domain.Scopes {
				token := tokenFor(sc)
				r, ok := minimalRequest(t, op, token)
				if !ok {
					return
				}
				rep := send(t, env, r)
				if sufficient([]string{sc}, op.Scope) {
					expectAllowed(t, op, sc, rep)
					if op.ID == "revokeTokenSelf" && rep.Status < 300 {
						// The token stops working at once.
						send(t, env, req{Method: http.MethodGet, Path: selfPath, Token: token}).
							expectProblem(t, http.StatusUnauthorized, "unauthenticated")
					}
					continue
				}
				p := rep.expectProblem(t, http.StatusForbidden, "insufficient_scope")
				if p.RequiredScope != op.Scope {
					t.Errorf("%s with %s: required_scope = %q, want %q", op.ID, sc, p.RequiredScope, op.Scope)
				}
			}

			// Every scope that is not sufficient, held together, is still not sufficient.
			var others []string
			for _, sc := range domain.Scopes {
				if !sufficient([]string{sc}, op.Scope) {
					others = append(others, sc)
				}
			}
			if len(others) > 0 && op.Scope != domain.ScopeAuthenticated {
				r, ok := minimalRequest(t, op, tokenFor(others...))
				if !ok {
					return
				}
				p := send(t, env, r).expectProblem(t, http.StatusForbidden, "insufficient_scope")
				if p.RequiredScope != op.Scope {
					t.Errorf("%s with every other scope: required_scope = %q, want %q", op.ID, p.RequiredScope, op.Scope)
				}
			}
		})
	}

	// A request that never authenticated is no one's attempt: nothing is audited for it.
	if n := countRows(t, env, `SELECT count(*) FROM audit_events WHERE status = 401`); n != 0 {
		t.Errorf("%d audit events record unauthenticated requests", n)
	}
}

// expectAllowed asserts that a caller with sufficient scope got past authentication and the scope
// check, and that the test's minimal request was valid (else the matrix proves nothing).
func expectAllowed(t testing.TB, op specOp, scope string, rep reply) {
	t.Helper()
	switch {
	case rep.Status == http.StatusUnauthorized || rep.Status == http.StatusForbidden:
		t.Errorf("%s with sufficient scope %s: %d %s", op.ID, scope, rep.Status, rep.Body)
	case rep.Status >= 500:
		t.Errorf("%s with %s: server error %d %s", op.ID, scope, rep.Status, rep.Body)
	case rep.Status == http.StatusBadRequest || rep.Status == http.StatusUnsupportedMediaType ||
		rep.Status == http.StatusPreconditionRequired:
		t.Errorf("%s with %s: the test's minimal request was refused (%d %s); fix minimalRequest", op.ID, scope, rep.Status, rep.Body)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestCredentialPaths: owner operations take only personal API keys, operator operations only
// operator tokens, and unauthenticated operations need nothing.
func TestCredentialPaths(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, operator := scopedToken(t, env, servertest.AllScopes()...)
	owner := ownerKey(t, env)
	for _, op := range specOps(t) {
		t.Run(op.ID, func(t *testing.T) {
			switch op.Auth {
			case "user":
				for _, bad := range []string{"", operator, "renga_user_nope", domain.UserKeyPrefix + domain.NewSecret()} {
					r, ok := minimalRequest(t, op, bad)
					if !ok {
						return
					}
					send(t, env, r).expectProblem(t, http.StatusUnauthorized, "unauthenticated")
				}
				r, _ := minimalRequest(t, op, owner)
				expectAllowed(t, op, "owner", send(t, env, r))
			case "operator":
				r, ok := minimalRequest(t, op, owner)
				if !ok {
					return
				}
				send(t, env, r).expectProblem(t, http.StatusUnauthorized, "unauthenticated")
			case "public":
				r, ok := minimalRequest(t, op, "")
				if !ok {
					return
				}
				if rep := send(t, env, r); rep.Status == http.StatusUnauthorized || rep.Status >= 500 {
					t.Errorf("%s without credentials: %d %s", op.ID, rep.Status, rep.Body)
				}
			case "intake", "installation":
				// Agent operations take neither operator tokens nor personal API keys (their own
				// credentials are agent_test.go's concern).
				for _, bad := range []string{"", operator, owner} {
					r, ok := minimalRequest(t, op, bad)
					if !ok {
						return
					}
					send(t, env, r).expectProblem(t, http.StatusUnauthorized, "unauthenticated")
				}
			default:
				t.Errorf("%s: unknown credential path %q", op.ID, op.Auth)
			}
		})
	}
}

// ownerKey makes an organization with an owner and returns the owner's personal API key.
func ownerKey(t testing.TB, env *servertest.Env) string {
	t.Helper()
	ctx := context.Background()
	o, err := domain.CreateOrganization(ctx, env.Pool, newSlug(), "Owned")
	if err != nil {
		t.Fatal(err)
	}
	return ownerKeyOf(t, env, o.ID)
}

// ownerKeyOf makes an owner of the organization orgID and returns the owner's personal API key.
func ownerKeyOf(t testing.TB, env *servertest.Env, orgID string) string {
	t.Helper()
	ctx := context.Background()
	_, secret, err := domain.CreateInvitation(ctx, env.Pool, orgID, newSlug()+"@example.com")
	if err != nil {
		t.Fatal(err)
	}
	a, err := domain.AcceptInvitation(ctx, env.Pool, secret, "Owner", domain.BuiltinDefaults)
	if err != nil {
		t.Fatal(err)
	}
	env.Track(secret, a.APIKey)
	return a.APIKey
}
