package apitest

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"renga.dev/renga/server/domain/policyfield"
	"renga.dev/renga/server/servertest"
)

// TestValidationGaps: what an outsider's tools found the server letting through or answering
// outside the contract.
func TestValidationGaps(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	token := env.Token(t, servertest.AllScopes()...)
	org := createOrg(t, env, token, newSlug(), "Gaps")

	t.Run("a malformed query escape is a 400, not ignored", func(t *testing.T) {
		for _, path := range []string{"/api/v1/operator/audit-events?%zz=1", orgsPath + "?page_size=%zz", orgsPath + "?state=active&%"} {
			rep := send(t, env, req{Method: http.MethodGet, Path: path, Token: token})
			if rep.Status != http.StatusBadRequest || rep.problem(t).Errors[0].Field != "query" {
				t.Errorf("GET %s: %d %s; want 400 naming query", path, rep.Status, rep.Body)
			}
		}
	})

	t.Run("a parameter that takes one value, sent twice, is a 400 naming it", func(t *testing.T) {
		for path, field := range map[string]string{
			orgsPath + "?page_size=1&page_size=2":                               "page_size",
			orgsPath + "?state=active&state=active":                             "state",
			"/api/v1/operator/audit-events?outcome=success&outcome=failure":     "outcome",
			"/api/v1/agent/home?deployment=eu1&deployment=https%3A%2F%2Fx.test": "deployment",
			"/api/v1/agent/home?deployment=eu1&deployment=eu1":                  "deployment",
		} {
			rep := send(t, env, req{Method: http.MethodGet, Path: path, Token: token})
			if rep.Status != http.StatusBadRequest || rep.problem(t).Error != "invalid_request" || rep.problem(t).Errors[0].Field != field {
				t.Errorf("GET %s: %d %s; want 400 naming %s", path, rep.Status, rep.Body, field)
			}
		}
	})

	t.Run("a Content-Encoding is a 415 and nothing is created", func(t *testing.T) {
		slug := newSlug()
		for _, ce := range []string{"gzip", "br", "gzip, identity"} {
			rep := send(t, env, req{Method: http.MethodPost, Path: orgsPath, Token: token,
				Body: jsonBody(map[string]string{"slug": slug, "display_name": "x"}), Header: headers("Idempotency-Key", newKey(), "Content-Encoding", ce)})
			if rep.Status != http.StatusUnsupportedMediaType || rep.problem(t).Error != "unsupported_media_type" {
				t.Errorf("Content-Encoding %s: %d %s", ce, rep.Status, rep.Body)
			}
		}
		rep := send(t, env, req{Method: http.MethodPost, Path: orgsPath, Token: token,
			Body: jsonBody(map[string]string{"slug": slug, "display_name": "x"}), Header: headers("Idempotency-Key", newKey(), "Content-Encoding", "identity")})
		if rep.Status != http.StatusCreated {
			t.Errorf("Content-Encoding identity: %d %s", rep.Status, rep.Body)
		}
	})

	t.Run("limits up to the declared maximum", func(t *testing.T) {
		rep := send(t, env, putPolicyReq(token, org.ID, `"1"`, map[string]any{"limits": map[string]int64{"max_agents": policyfield.Unbounded}}))
		if rep.Status != http.StatusOK {
			t.Fatalf("max_agents = 2^62: %d %s", rep.Status, rep.Body)
		}
		rep = send(t, env, putPolicyReq(token, org.ID, `"2"`, map[string]any{"limits": map[string]int64{"max_agents": policyfield.Unbounded + 1}}))
		if rep.Status != http.StatusBadRequest || rep.problem(t).Errors[0].Field != "limits.max_agents" {
			t.Errorf("max_agents = 2^62+1: %d %s", rep.Status, rep.Body)
		}
	})

	t.Run("several bad fields are each reported", func(t *testing.T) {
		rep := send(t, env, req{Method: http.MethodPost, Path: orgsPath, Token: token, Body: []byte(`{"slug": "BAD SLUG", "display_name": 5}`),
			Header: headers("Idempotency-Key", newKey())})
		fields := map[string]bool{}
		for _, e := range rep.problem(t).Errors {
			fields[e.Field] = true
		}
		if rep.Status != http.StatusBadRequest || !fields["slug"] || !fields["display_name"] {
			t.Errorf("two bad fields: %d %s", rep.Status, rep.Body)
		}
	})

	t.Run("times have an uppercase T and Z", func(t *testing.T) {
		rep := send(t, env, req{Method: http.MethodGet, Path: "/api/v1/operator/audit-events?since=2026-01-01t00:00:00z", Token: token})
		if rep.Status != http.StatusBadRequest || rep.problem(t).Errors[0].Field != "since" {
			t.Errorf("lowercase t and z: %d %s", rep.Status, rep.Body)
		}
		rep = send(t, env, req{Method: http.MethodGet, Path: "/api/v1/operator/audit-events?since=2026-01-01T00:00:00Z", Token: token})
		if rep.Status != http.StatusOK {
			t.Errorf("uppercase T and Z: %d %s", rep.Status, rep.Body)
		}
	})

	t.Run("a malformed ID never reaches the database before validation", func(t *testing.T) {
		// Found by the fuzzer: a read by ID travels with the token's check (a Prefetch); a NUL in
		// the ID failed that round trip, and the answer was a 500.
		for _, path := range []string{orgPath("%00%E2%80%AEx"), orgPath("%00") + "/policy", orgPath("org_" + strings.Repeat("0", 25) + "%00")} {
			rep := send(t, env, req{Method: http.MethodGet, Path: path, Token: token})
			if rep.Status != http.StatusBadRequest {
				t.Errorf("GET %s: %d %s; want 400", path, rep.Status, rep.Body)
			}
		}
	})

	t.Run("a 401 names its scheme", func(t *testing.T) {
		rep := send(t, env, req{Method: http.MethodGet, Path: orgsPath})
		if rep.Status != http.StatusUnauthorized || rep.Header.Get("WWW-Authenticate") != `Bearer realm="renga"` {
			t.Errorf("operator 401: %d, WWW-Authenticate %q", rep.Status, rep.Header.Get("WWW-Authenticate"))
		}
		rep = send(t, env, req{Method: http.MethodPost, Path: "/api/v1/agent/observations",
			Body: []byte(`{"batch_id": "b", "observations": []}`)})
		if rep.Status != http.StatusUnauthorized || rep.Header.Get("WWW-Authenticate") != `Renga-Signature realm="renga"` {
			t.Errorf("installation 401: %d, WWW-Authenticate %q", rep.Status, rep.Header.Get("WWW-Authenticate"))
		}
	})

	var n int
	if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM organizations`).Scan(&n); err != nil || n != 2 {
		t.Errorf("%d organizations, %v; want 2 (the first and the identity-encoded create)", n, err)
	}
}

// TestRawRequestAnswers: what a client that speaks HTTP badly gets. Whatever reaches the
// application is problem+json with a code; what Go's HTTP server refuses while parsing (the
// docs/api.md lists it) is a plain 400 or 431, and never reaches a handler.
func TestRawRequestAnswers(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	host := strings.TrimPrefix(env.URL, "http://")
	for _, c := range []struct {
		raw     string
		status  int
		problem bool
	}{
		{"GET * HTTP/1.1\r\nHost: x\r\n\r\n", 404, true},
		{"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", 404, true},
		{"BREW /api/v1/operator/organizations HTTP/1.1\r\nHost: x\r\n\r\n", 401, true},
		{"GET /api/v1/operator//organizations HTTP/1.1\r\nHost: x\r\n\r\n", 401, true},
		{"GET /nothing/here HTTP/1.1\r\nHost: x\r\n\r\n", 404, true},
		{"GET /api/v1/operator/organizations/a\x00b HTTP/1.1\r\nHost: x\r\n\r\n", 400, false},
		{"GET /api/v1/operator/organizations/a b HTTP/1.1\r\nHost: x\r\n\r\n", 400, false},
		{"POST /api/v1/operator/organizations HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400, false},
		{"GET /api/v1/operator/organizations HTTP/1.1\r\n\r\n", 400, false},
		{"GET /api/v1/operator/organizations HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\n\r\n", 431, false},
	} {
		name := c.raw[:min(len(c.raw), 50)]
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		go func() { _, _ = io.WriteString(conn, c.raw) }()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Errorf("%q: %v", name, err)
			conn.Close()
			continue
		}
		ct := resp.Header.Get("Content-Type")
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != c.status || strings.HasPrefix(ct, "application/problem+json") != c.problem {
			t.Errorf("%q: %d %s; want %d (problem+json: %v)", name, resp.StatusCode, ct, c.status, c.problem)
		}
	}
}

// TestHeadersAreReadInAnyCase: header names are case-insensitive; the stages read the ones they
// check by their canonical keys from the header map (readBody), which holds because net/http
// stores what it reads under canonical keys. Sent as raw bytes in lower case (Go's client would
// canonicalize them): the bearer token authenticates, the Idempotency-Key makes the second
// identical create a replay of the first, and a Content-Encoding is refused.
//
// Fails when: a stage reads a header by a key the server does not store it under.
func TestHeadersAreReadInAnyCase(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	token := env.Token(t, servertest.AllScopes()...)
	host := strings.TrimPrefix(env.URL, "http://")
	raw := func(request string) (*http.Response, string) {
		t.Helper()
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, request); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	if resp, body := raw("GET " + orgsPath + " HTTP/1.1\r\nHost: x\r\nauthorization: Bearer " + token + "\r\nConnection: close\r\n\r\n"); resp.StatusCode != http.StatusOK {
		t.Errorf("authorization in lower case: %d %s", resp.StatusCode, body)
	}
	create := func(extra string) (*http.Response, string) {
		body := string(jsonBody(map[string]string{"slug": "lower-case", "display_name": "Lower case"}))
		return raw("POST " + orgsPath + " HTTP/1.1\r\nHost: x\r\nauthorization: bearer " + token +
			"\r\ncontent-type: application/json\r\n" + extra + "content-length: " + strconv.Itoa(len(body)) +
			"\r\nConnection: close\r\n\r\n" + body)
	}
	first, firstBody := create("idempotency-key: lower-case-key\r\n")
	again, againBody := create("idempotency-key: lower-case-key\r\n")
	if first.StatusCode != http.StatusCreated || again.StatusCode != http.StatusCreated || firstBody != againBody {
		t.Errorf("a create, then again with the same idempotency-key in lower case: %d %s, then %d %s; want one create replayed",
			first.StatusCode, firstBody, again.StatusCode, againBody)
	}
	if n := countRows(t, env, `SELECT count(*) FROM organizations WHERE slug = 'lower-case'`); n != 1 {
		t.Errorf("%d organizations made by the two identical keyed creates, want 1", n)
	}
	if resp, body := create("idempotency-key: another-key\r\ncontent-encoding: gzip\r\n"); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("content-encoding: gzip in lower case: %d %s, want 415", resp.StatusCode, body)
	}
}
