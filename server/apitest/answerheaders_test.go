package apitest

import (
	"net/http"
	"sort"
	"testing"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/servertest"
)

// answerHeaders are what every API answer carries, so that no cache keeps it and no browser
// reads it as another type than it is.
var answerHeaders = map[string]string{
	"Cache-Control":          "no-store",
	"X-Content-Type-Options": "nosniff",
}

// checkAnswerHeaders reports each of answerHeaders missing from or different in h.
func checkAnswerHeaders(t testing.TB, what string, h http.Header) {
	t.Helper()
	for name, want := range answerHeaders {
		if got := h.Values(name); len(got) != 1 || got[0] != want {
			t.Errorf("%s: %s = %q, want %q", what, name, got, want)
		}
	}
}

// TestAnswersAreNotCachedOrSniffed: every kind of API answer (a JSON document, a list, 201, 204,
// the agents' home, and problems from each stage that can refuse: routing, authentication,
// scope, validation, the handler) carries Cache-Control: no-store and
// X-Content-Type-Options: nosniff. problem() checks the same on every problem of every test.
// Fails when: the pipeline stops setting them ("Cache-Control = [], want no-store").
func TestAnswersAreNotCachedOrSniffed(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	tok := env.Token(t, "organizations:write")
	readOnly := env.Token(t, "organizations:read")
	created := send(t, env, req{Method: http.MethodPost, Path: "/api/v1/operator/organizations", Token: tok,
		Header: headers("Idempotency-Key", "answer-headers"),
		Body:   []byte(`{"slug": "answer-headers", "display_name": "Answer headers"}`)})
	cases := []struct {
		name   string
		r      req
		status int
	}{
		{"a document", req{Method: http.MethodGet, Path: "/api/v1/operator/deployment", Token: env.Token(t, "deployment:read")}, http.StatusOK},
		{"a list", req{Method: http.MethodGet, Path: "/api/v1/operator/organizations", Token: tok}, http.StatusOK},
		{"the agents' home", req{Method: http.MethodGet, Path: "/api/v1/agent/home?deployment="}, http.StatusOK},
		{"an unknown route", req{Method: http.MethodGet, Path: "/api/v1/nothing-here", Token: tok}, http.StatusNotFound},
		{"no credential", req{Method: http.MethodGet, Path: "/api/v1/operator/organizations"}, http.StatusUnauthorized},
		{"a missing scope", req{Method: http.MethodPost, Path: "/api/v1/operator/organizations", Token: readOnly,
			Header: headers("Idempotency-Key", "k"), Body: []byte(`{}`)}, http.StatusForbidden},
		{"an invalid body", req{Method: http.MethodPost, Path: "/api/v1/operator/organizations", Token: tok,
			Header: headers("Idempotency-Key", "k2"), Body: []byte(`{"slug": 1}`)}, http.StatusBadRequest},
		{"an unknown organization", req{Method: http.MethodGet, Path: "/api/v1/operator/organizations/org_00000000000000000000000000", Token: tok}, http.StatusNotFound},
	}
	checkAnswerHeaders(t, "201 created", created.Header)
	if created.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	for _, c := range cases {
		r := send(t, env, c.r)
		if r.Status != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, r.Status, c.status, r.Body)
		}
		checkAnswerHeaders(t, c.name, r.Header)
	}
	revoke := send(t, env, req{Method: http.MethodPost, Path: "/api/v1/operator/tokens/self/revoke", Token: env.Token(t, "usage:read")})
	if revoke.Status != http.StatusNoContent {
		t.Errorf("self-revocation: %d %s", revoke.Status, revoke.Body)
	}
	checkAnswerHeaders(t, "204 no content", revoke.Header)
}

// TestSpecDeclaresAnswerHeaders: openapi.yaml declares both headers on every response of every
// operation, as it does X-Request-Id, so a generated client knows of them.
// Fails when: a response is added without them (the response is named).
func TestSpecDeclaresAnswerHeaders(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			for status, resp := range op.Responses.Map() {
				for name := range answerHeaders {
					if resp.Value == nil || resp.Value.Headers[name] == nil {
						missing = append(missing, method+" "+path+" "+status+": "+name)
					}
				}
			}
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("not declared: %s", m)
	}
}
