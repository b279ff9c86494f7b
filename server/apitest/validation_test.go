package apitest

import (
	"net/http"
	"strings"
	"testing"

	"renga.dev/renga/server/servertest"
)

// TestValidation: every request that does not match the API description gets a 4xx problem,
// never a 5xx, and changes nothing.
func TestValidation(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, token := scopedToken(t, env, servertest.AllScopes()...)
	org := createOrg(t, env, token, "existing", "Existing")
	orgs := countRows(t, env, `SELECT count(*) FROM organizations`)

	create := func(body string) req {
		return req{Method: http.MethodPost, Path: orgsPath, Token: token, Body: []byte(body), Header: headers("Idempotency-Key", newKey())}
	}
	createJSON := func(slug, name string) req {
		return create(string(jsonBody(map[string]string{"slug": slug, "display_name": name})))
	}
	patch := func(body string) req {
		return req{Method: http.MethodPatch, Path: orgPath(org.ID), Token: token, Body: []byte(body), Header: headers("If-Match", `"1"`)}
	}
	get := func(path string) req { return req{Method: http.MethodGet, Path: path, Token: token} }
	with := func(r req, kv ...string) req {
		h := r.Header.Clone()
		if h == nil {
			h = http.Header{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		r.Header = h
		return r
	}
	oversized := `{"slug":"big","display_name":"` + strings.Repeat("x", 1<<20) + `"}`

	cases := []struct {
		name   string
		req    req
		status int    // 0: any 4xx
		code   string // "": any code
	}{
		// Wrong JSON types.
		{"slug is a number", create(`{"slug": 5, "display_name": "x"}`), 400, "invalid_request"},
		{"display_name is a boolean", create(`{"slug": "abc", "display_name": true}`), 400, "invalid_request"},
		{"display_name is null", create(`{"slug": "abc", "display_name": null}`), 400, "invalid_request"},
		{"body is an array", create(`[{"slug": "abc", "display_name": "x"}]`), 400, "invalid_request"},
		{"body is a string", create(`"abc"`), 400, "invalid_request"},
		{"body is null", create(`null`), 400, "invalid_request"},
		{"patch display_name is a number", patch(`{"display_name": 5}`), 400, "invalid_request"},
		// Unknown and missing fields.
		{"unknown field on create", create(`{"slug": "abc", "display_name": "x", "state": "active"}`), 400, "invalid_request"},
		{"slug on patch (immutable)", patch(`{"display_name": "x", "slug": "other"}`), 400, "invalid_request"},
		{"missing display_name", create(`{"slug": "abc"}`), 400, "invalid_request"},
		{"missing slug", create(`{"display_name": "x"}`), 400, "invalid_request"},
		{"empty object on patch", patch(`{}`), 400, "invalid_request"},
		// Malformed and missing bodies.
		{"malformed JSON", create(`{"slug":`), 400, "invalid_request"},
		{"trailing garbage", create(`{"slug": "trailing", "display_name": "x"} x`), 400, "invalid_request"},
		{"empty body on create", create(``), 400, "invalid_request"},
		{"oversized body", create(oversized), 413, "payload_too_large"},
		// Slugs.
		{"uppercase slug", createJSON("ACME", "x"), 400, "invalid_request"},
		{"slug too short", createJSON("ab", "x"), 400, "invalid_request"},
		{"slug with leading hyphen", createJSON("-abc", "x"), 400, "invalid_request"},
		{"slug with trailing hyphen", createJSON("abc-", "x"), 400, "invalid_request"},
		{"slug of 41 characters", createJSON(strings.Repeat("a", 41), "x"), 400, "invalid_request"},
		{"slug with underscore", createJSON("a_bc", "x"), 400, "invalid_request"},
		// Display names.
		{"empty display_name", createJSON("abc", ""), 400, "invalid_request"},
		{"display_name of 201 characters", createJSON("abc", strings.Repeat("x", 201)), 400, "invalid_request"},
		{"display_name with a control character", createJSON("abc", "a\x01b"), 400, "invalid_request"},
		{"empty display_name on patch", patch(`{"display_name": ""}`), 400, "invalid_request"},
		// Idempotency-Key values.
		{"Idempotency-Key of 256 characters", with(createJSON("abc", "x"), "Idempotency-Key", strings.Repeat("k", 256)), 400, "invalid_request"},
		{"Idempotency-Key with a bad escape", with(createJSON("abc", "x"), "Idempotency-Key", `"a\x"`), 400, "invalid_request"},
		{"Idempotency-Key empty quoted string", with(createJSON("abc", "x"), "Idempotency-Key", `""`), 400, "invalid_request"},
		// Query parameters.
		{"page_size 0", get(orgsPath + "?page_size=0"), 400, "invalid_request"},
		{"page_size 501", get(orgsPath + "?page_size=501"), 400, "invalid_request"},
		{"page_size abc", get(orgsPath + "?page_size=abc"), 400, "invalid_request"},
		{"page_size on audit events 0", get(auditPath + "?page_size=0"), 400, "invalid_request"},
		{"garbage page_token", get(orgsPath + "?page_token=garbage"), 400, "invalid_page_token"},
		{"page_token of 201 characters", get(orgsPath + "?page_token=" + strings.Repeat("a", 201)), 400, ""},
		{"unknown state", get(orgsPath + "?state=sleeping"), 400, "invalid_request"},
		{"bad slug filter", get(orgsPath + "?slug=ACME"), 400, "invalid_request"},
		{"unknown outcome", get(auditPath + "?outcome=maybe"), 400, "invalid_request"},
		{"since is not a time", get(auditPath + "?since=yesterday"), 400, "invalid_request"},
		{"operation with spaces", get(auditPath + "?operation=create%20org"), 400, "invalid_request"},
		{"bad organization_id filter", get(auditPath + "?organization_id=acme"), 400, "invalid_request"},
		// Path parameters.
		{"organization_id not an ID", get(orgsPath + "/acme"), 400, "invalid_request"},
		{"organization_id too short", get(orgsPath + "/org_123"), 400, "invalid_request"},
		{"organization_id wrong prefix", get(orgsPath + "/tok_" + strings.Repeat("0", 26)), 400, "invalid_request"},
		{"organization_id uppercase", get(orgsPath + "/org_" + strings.Repeat("A", 26)), 400, "invalid_request"},
		{"patch with bad organization_id", req{Method: http.MethodPatch, Path: orgsPath + "/nope", Token: token,
			Body: []byte(`{"display_name": "x"}`), Header: headers("If-Match", `"1"`)}, 400, "invalid_request"},
		// Media types.
		{"text/plain body", with(createJSON("abc", "x"), "Content-Type", "text/plain"), 415, "unsupported_media_type"},
		{"form body", with(create("slug=abc&display_name=x"), "Content-Type", "application/x-www-form-urlencoded"), 415, "unsupported_media_type"},
		{"patch as merge-patch", with(patch(`{"display_name": "x"}`), "Content-Type", "application/merge-patch+json"), 415, "unsupported_media_type"},
		// Routing.
		{"unknown path", get("/api/v1/operator/nope"), 404, "not_found"},
		{"unknown sub-resource", get(orgPath(org.ID) + "/nope"), 404, "not_found"},
		{"unknown API version", get("/api/v2/operator/organizations"), 404, "not_found"},
		{"wrong method on a collection", req{Method: http.MethodDelete, Path: orgsPath, Token: token}, 405, "method_not_allowed"},
		{"wrong method on an item", req{Method: http.MethodPut, Path: orgPath(org.ID), Token: token, Body: []byte(`{}`)}, 405, "method_not_allowed"},
		{"wrong method on deployment", req{Method: http.MethodPost, Path: "/api/v1/operator/deployment", Token: token, Body: []byte(`{}`)}, 405, "method_not_allowed"},
		// Authentication comes before anything else.
		{"anonymous, unknown path", req{Method: http.MethodGet, Path: "/api/v1/operator/nope"}, 401, "unauthenticated"},
		{"anonymous, unknown path of the owner API", req{Method: http.MethodGet, Path: "/api/v1/org/nope"}, 401, "unauthenticated"},
		// Outside the authenticated APIs there is nothing to hide.
		{"anonymous, unknown version", req{Method: http.MethodGet, Path: "/api/v2/anything"}, 404, "not_found"},
		{"anonymous, wrong method", req{Method: http.MethodDelete, Path: orgsPath}, 401, "unauthenticated"},
		{"anonymous, invalid body", req{Method: http.MethodPost, Path: orgsPath, Body: []byte(`{"slug":`)}, 401, "unauthenticated"},
		{"anonymous, oversized body", req{Method: http.MethodPost, Path: orgsPath, Body: []byte(oversized)}, 401, "unauthenticated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := send(t, env, tc.req)
			if r.Status >= 500 {
				t.Fatalf("server error %d: %s", r.Status, r.Body)
			}
			if r.Status < 400 {
				t.Fatalf("accepted (%d): %s", r.Status, r.Body)
			}
			if tc.status != 0 && r.Status != tc.status {
				t.Errorf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
			p := r.problem(t)
			if tc.code != "" && p.Error != tc.code {
				t.Errorf("error %q, want %q: %s", p.Error, tc.code, r.Body)
			}
			if p.Error == "invalid_request" && len(p.Errors) == 0 {
				t.Errorf("invalid_request lists no field: %s", r.Body)
			}
		})
	}
	if n := countRows(t, env, `SELECT count(*) FROM organizations`); n != orgs {
		t.Errorf("invalid requests changed the organizations: %d, had %d", n, orgs)
	}
	if o, _ := getOrg(t, env, token, org.ID); o.Version != 1 || o.DisplayName != "Existing" {
		t.Errorf("invalid requests changed the organization: %+v", o)
	}

	// The boundaries themselves are valid: the cases above fail for the reason they name.
	valid := []struct {
		name string
		req  req
	}{
		{"slug of 3 characters", createJSON("abc", "x")},
		{"slug of 40, display_name of 200 characters", createJSON(strings.Repeat("a", 40), strings.Repeat("x", 200))},
		{"slug with a hyphen, non-ASCII display_name", createJSON("a-1", "Ünïcödé name")},
		{"JSON with a charset parameter", with(createJSON("charset", "x"), "Content-Type", "application/json; charset=utf-8")},
		{"Idempotency-Key of 255 characters", with(createJSON("long-key", "x"), "Idempotency-Key", strings.Repeat("k", 255))},
		// A quoted structured-field string means the same as its content (DESIGN §3.5), so
		// the quotes do not count towards the 255 characters.
		{"quoted Idempotency-Key of 255 characters", with(createJSON("quoted-key", "x"), "Idempotency-Key", `"`+strings.Repeat("q", 255)+`"`)},
		{"page_size 1", get(orgsPath + "?page_size=1")},
		{"page_size 500 with filters", get(orgsPath + "?page_size=500&state=active&slug=existing")},
		{"audit filters", get(auditPath + "?page_size=500&outcome=failed&operation=createOrganization&since=2020-01-01T00:00:00Z")},
		{"organization by ID", get(orgPath(org.ID))},
	}
	for _, tc := range valid {
		t.Run("valid/"+tc.name, func(t *testing.T) {
			if rep := send(t, env, tc.req); rep.Status >= 300 {
				t.Errorf("%s %s: %d %s", tc.req.Method, tc.req.Path, rep.Status, rep.Body)
			}
		})
	}
}

// TestDuplicateKeysRefused: a body that repeats a key in one object is a 400 naming it, and
// changes nothing (a validator and a decoder could read it differently).
func TestDuplicateKeysRefused(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, token := scopedToken(t, env, "organizations:write")
	p := send(t, env, createReq(token, newKey(), []byte(`{"slug":"first","display_name":"D","slug":"second"}`))).
		expectProblem(t, http.StatusBadRequest, "invalid_request")
	if len(p.Errors) != 1 || p.Errors[0].Field != "slug" {
		t.Errorf("errors = %+v, want the repeated slug", p.Errors)
	}
	for _, slug := range []string{"first", "second"} {
		var list struct{ Items []any }
		send(t, env, req{Method: http.MethodGet, Path: orgsPath + "?slug=" + slug, Token: token}).decode(t, &list)
		if len(list.Items) != 0 {
			t.Errorf("an organization %s was created", slug)
		}
	}
}
