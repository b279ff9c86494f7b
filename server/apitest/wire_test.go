package apitest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// The acceptance tests speak raw HTTP where they need control the generated client does not
// give (exact header values, malformed bodies, byte-for-byte comparison of responses).

// httpClient is shared by the tests; the timeout turns a hung server into a failure.
var httpClient = &http.Client{Timeout: 30 * time.Second}

// reply is a response read whole.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// problemBody is an RFC 9457 problem with Renga's members.
type problemBody struct {
	Type           string `json:"type"`
	Title          string `json:"title"`
	Status         int    `json:"status"`
	Detail         string `json:"detail"`
	Error          string `json:"error"`
	RequestID      string `json:"request_id"`
	RequiredScope  string `json:"required_scope"`
	CurrentVersion *int64 `json:"current_version"`
	Errors         []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
}

// req describes one request.
type req struct {
	Method string
	Path   string // absolute path and query on the test server
	Token  string // operator token; "" sends no Authorization header
	Body   []byte // nil sends no body
	Header http.Header
}

// sendE sends r; safe to call from goroutines.
func sendE(env *servertest.Env, r req) (reply, error) {
	var body io.Reader
	if r.Body != nil {
		body = bytes.NewReader(r.Body)
	}
	hr, err := http.NewRequestWithContext(context.Background(), r.Method, env.URL+r.Path, body)
	if err != nil {
		return reply{}, err
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			hr.Header.Add(k, v)
		}
	}
	if r.Body != nil && hr.Header.Get("Content-Type") == "" && r.Header["Content-Type"] == nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if r.Token != "" {
		hr.Header.Set("Authorization", "Bearer "+r.Token)
	}
	resp, err := httpClient.Do(hr)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", r.Method, r.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: read body: %w", r.Method, r.Path, err)
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// send is sendE that fails the test on a transport error.
func send(t testing.TB, env *servertest.Env, r req) reply {
	t.Helper()
	rep, err := sendE(env, r)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// headers builds an http.Header from name, value pairs.
func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// problem decodes the reply as a problem and checks the parts every problem must have: the
// media type, the status member, the `error` code and a request ID matching X-Request-Id.
func (r reply) problem(t testing.TB) problemBody {
	t.Helper()
	var p problemBody
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Errorf("status %d: Content-Type = %q, want application/problem+json (body %s)", r.Status, ct, r.Body)
	}
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Errorf("status %d: problem body is not JSON: %v: %s", r.Status, err, r.Body)
		return p
	}
	if p.Error == "" {
		t.Errorf("status %d: problem has no error code: %s", r.Status, r.Body)
	}
	if p.RequestID == "" {
		t.Errorf("status %d: problem has no request_id: %s", r.Status, r.Body)
	} else if h := r.Header.Get("X-Request-Id"); h != p.RequestID {
		t.Errorf("status %d: request_id %q differs from X-Request-Id %q", r.Status, p.RequestID, h)
	}
	if p.Status != r.Status {
		t.Errorf("problem status member %d, HTTP status %d", p.Status, r.Status)
	}
	checkAnswerHeaders(t, fmt.Sprintf("problem %d %s", r.Status, p.Error), r.Header)
	return p
}

// expectProblem asserts the status and error code of a problem reply.
func (r reply) expectProblem(t testing.TB, status int, code string) problemBody {
	t.Helper()
	if r.Status != status {
		t.Errorf("status = %d, want %d %s: %s", r.Status, status, code, r.Body)
	}
	p := r.problem(t)
	if p.Error != code {
		t.Errorf("error = %q, want %q (status %d): %s", p.Error, code, r.Status, r.Body)
	}
	return p
}

// decode unmarshals a JSON reply.
func (r reply) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("status %d: body is not the expected JSON: %v: %s", r.Status, err, r.Body)
	}
}

// organization is the JSON of an organization.
type organization struct {
	ID          string `json:"id"`
	Slug        string `json:"slug"`
	DisplayName string `json:"display_name"`
	State       string `json:"state"`
	Version     int64  `json:"version"`
}

// random returns n random bytes in hex.
func random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newKey is a fresh Idempotency-Key.
func newKey() string { return "key-" + random(12) }

// newSlug is a fresh valid slug.
func newSlug() string { return "s-" + random(6) }

// jsonBody marshals v.
func jsonBody(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

const (
	orgsPath  = "/api/v1/operator/organizations"
	auditPath = "/api/v1/operator/audit-events"
	selfPath  = "/api/v1/operator/tokens/self"
)

func orgPath(id string) string { return orgsPath + "/" + id }

// createOrg creates an organization with a fresh key and returns it.
func createOrg(t testing.TB, env *servertest.Env, token, slug, name string) organization {
	t.Helper()
	rep := send(t, env, req{Method: http.MethodPost, Path: orgsPath, Token: token,
		Body: jsonBody(map[string]string{"slug": slug, "display_name": name}), Header: headers("Idempotency-Key", newKey())})
	if rep.Status != http.StatusCreated {
		t.Fatalf("create organization %s: %d %s", slug, rep.Status, rep.Body)
	}
	var o organization
	rep.decode(t, &o)
	return o
}

// mintToken creates a token directly in the database (as a release command would).
func mintToken(t testing.TB, env *servertest.Env, n domain.NewToken) (domain.Token, string) {
	t.Helper()
	if n.Name == "" {
		n.Name = "test-" + random(4)
	}
	tok, secret, err := domain.CreateToken(context.Background(), env.Pool, n)
	if err != nil {
		t.Fatal(err)
	}
	env.Track(secret)
	return tok, secret
}

// scopedToken mints a token with scopes and returns its ID and secret.
func scopedToken(t testing.TB, env *servertest.Env, scopes ...string) (string, string) {
	t.Helper()
	tok, secret := mintToken(t, env, domain.NewToken{Scopes: scopes})
	return tok.ID, secret
}

// mustPrefix parses a CIDR.
func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// countRows runs a COUNT query.
func countRows(t testing.TB, env *servertest.Env, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := env.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// TestUncleanPathsAreProblems: a path with an empty, "." or ".." segment is answered as a path
// no operation has, in problem+json (after authentication under the operator API), never with
// the router's text/html redirect.
func TestUncleanPathsAreProblems(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, token := scopedToken(t, env, "organizations:write")
	org := createOrg(t, env, token, "unclean", "Unclean")
	for _, p := range []string{
		"/api/v1/operator/organizations/" + org.ID + "//suspend",
		"/api/v1/operator/./organizations",
		"/api/v1/operator/organizations/x/../" + org.ID,
		"/api//v1/agent/home",
		"//healthz",
	} {
		if strings.HasPrefix(p, "/api/v1/operator") {
			send(t, env, req{Method: http.MethodPost, Path: p}).expectProblem(t, http.StatusUnauthorized, "unauthenticated")
		}
		r := send(t, env, req{Method: http.MethodPost, Path: p, Token: token})
		r.expectProblem(t, http.StatusNotFound, "not_found")
		if r.Header.Get("Location") != "" {
			t.Errorf("%s: redirected to %s", p, r.Header.Get("Location"))
		}
	}
	var o organization
	send(t, env, req{Method: http.MethodGet, Path: orgPath(org.ID), Token: token}).decode(t, &o)
	if o.State != "active" {
		t.Errorf("an unclean path changed the organization: %s", o.State)
	}
}
