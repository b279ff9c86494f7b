package apiclient

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"renga.dev/renga/gen/client"
)

var fast = RetryPolicy{MaxAttempts: 4, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}

// server answers with the statuses in order (then 201), recording each request's key; a status
// of -1 closes the connection without an answer.
func server(t *testing.T, statuses ...int) (*Client, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var keys []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n := len(keys)
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		status := http.StatusCreated
		if n < len(statuses) {
			status = statuses[n]
		}
		switch status {
		case -1:
			conn, _, _ := http.NewResponseController(w).Hijack()
			_ = conn.Close()
			return
		case http.StatusCreated, http.StatusOK:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"id":"org_01m8pbkpq053028qsv5y6h3q6q","slug":"acme","display_name":"Acme","state":"active","version":1,"suspended_reason":null,"purge_after":null,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}`))
		default:
			if status == http.StatusTooManyRequests {
				w.Header().Set("Retry-After", "0")
			}
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(status)
			_, _ = fmt.Fprintf(w, `{"type":"about:blank","title":"x","status":%d,"error":"version_mismatch","current_version":9}`, status)
		}
	}))
	t.Cleanup(ts.Close)
	c, err := New(Config{URL: ts.URL, Token: TokenPrefix + "x", Retry: fast})
	if err != nil {
		t.Fatal(err)
	}
	return c, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), keys...) }
}

func create(t *testing.T, c *Client) (*client.CreateOrganizationResponse, error) {
	body := client.OrganizationCreate{Slug: "acme", DisplayName: "Acme"}
	key, err := CreateKey("renga_organization", "/api/v1/operator/organizations", body, 0)
	if err != nil {
		t.Fatal(err)
	}
	return c.API.CreateOrganizationWithResponse(context.Background(), &client.CreateOrganizationParams{IdempotencyKey: key}, body)
}

// Transient failures of a keyed create are retried with the same key until it gets through.
func TestRetriesTransientFailuresWithTheSameKey(t *testing.T) {
	c, keys := server(t, -1, http.StatusServiceUnavailable, http.StatusTooManyRequests)
	res, err := create(t, c)
	if err != nil || res.JSON201 == nil {
		t.Fatalf("create: %v %v", err, res)
	}
	k := keys()
	if len(k) != 4 {
		t.Fatalf("%d attempts, want 4", len(k))
	}
	for _, key := range k {
		if key != k[0] || key == "" {
			t.Fatalf("keys %q: want one key, repeated", k)
		}
	}
}

// A 412 (or any answer that is not transient) is returned at once: never retried.
func TestDoesNotRetryAnswers(t *testing.T) {
	for _, status := range []int{http.StatusPreconditionFailed, http.StatusConflict, http.StatusBadRequest, http.StatusInternalServerError} {
		c, keys := server(t, status)
		res, err := create(t, c)
		if err != nil || res.StatusCode() != status {
			t.Fatalf("%d: got %v %v", status, err, res)
		}
		if n := len(keys()); n != 1 {
			t.Errorf("%d: %d attempts, want 1", status, n)
		}
	}
}

// A write without a key is not repeated after a network error: had it committed, a repeat
// could not tell.
func TestDoesNotRetryUnkeyedWrites(t *testing.T) {
	c, keys := server(t, -1)
	_, err := c.API.PutPolicyWithResponse(context.Background(), "org_01m8pbkpq053028qsv5y6h3q6q", &client.PutPolicyParams{IfMatch: IfMatch(3)}, client.PolicyWrite{})
	if err == nil {
		t.Fatal("want the network error")
	}
	if n := len(keys()); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
	// Marked safe (target-state operations), it is retried.
	c, keys = server(t, -1)
	res, err := c.API.ScheduleOrganizationDeletionWithResponse(RetrySafe(context.Background()), "org_01m8pbkpq053028qsv5y6h3q6q", &client.ScheduleOrganizationDeletionParams{})
	if err != nil || len(keys()) != 2 {
		t.Fatalf("got %v %v after %d attempts, want success after 2", err, res, len(keys()))
	}
}

// Attempts stop at MaxAttempts and the error says how many there were.
func TestGivesUp(t *testing.T) {
	c, keys := server(t, -1, -1, -1, -1, -1)
	_, err := create(t, c)
	if err == nil || !strings.Contains(err.Error(), "after 4 attempts") {
		t.Fatalf("err = %v", err)
	}
	if n := len(keys()); n < 4 {
		t.Errorf("%d attempts, want 4", n)
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	d := &retryingDoer{policy: RetryPolicy{}.withDefaults()}
	resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"7"}}}
	if wait, ok := d.next(resp, nil, 1); !ok || wait != 7*time.Second {
		t.Errorf("429 Retry-After 7: wait %v, retry %v", wait, ok)
	}
	resp.Header.Set("Retry-After", "3600")
	if _, ok := d.next(resp, nil, 1); ok {
		t.Error("a Retry-After beyond MaxRetryAfter is retried")
	}
	for _, status := range []int{http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout} {
		if _, ok := d.next(&http.Response{StatusCode: status, Header: http.Header{}}, nil, 1); !ok {
			t.Errorf("%d is not retried", status)
		}
	}
}

func TestCreateKey(t *testing.T) {
	a, _ := CreateKey("renga_organization", "/p", map[string]any{"slug": "acme", "display_name": "Acme"}, 0)
	b, _ := CreateKey("renga_organization", "/p", client.OrganizationCreate{DisplayName: "Acme", Slug: "acme"}, 0)
	if a != b {
		t.Errorf("the same request gives two keys: %s, %s", a, b)
	}
	for _, other := range []string{
		must(CreateKey("renga_organization", "/p", client.OrganizationCreate{DisplayName: "Acme", Slug: "acme2"}, 0)),
		must(CreateKey("renga_organization", "/p", client.OrganizationCreate{DisplayName: "Acme", Slug: "acme"}, 1)),
		must(CreateKey("renga_owner_invitation", "/p", client.OrganizationCreate{DisplayName: "Acme", Slug: "acme"}, 0)),
		must(CreateKey("renga_organization", "/q", client.OrganizationCreate{DisplayName: "Acme", Slug: "acme"}, 0)),
	} {
		if other == a {
			t.Errorf("a different request gives the same key %s", a)
		}
	}
	if len(a) > 255 || strings.ContainsFunc(a, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
		t.Errorf("key %q is not 1..255 printable ASCII", a)
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

type fakeResponse struct {
	status int
	body   string
}

func (f fakeResponse) StatusCode() int { return f.status }
func (f fakeResponse) GetBody() []byte { return []byte(f.body) }

func TestDescribe(t *testing.T) {
	summary, detail := Describe("create organization \"acme\"", fakeResponse{403, `{"type":"x","title":"Forbidden","status":403,"error":"insufficient_scope","required_scope":"organizations:write"}`}, nil)
	if !strings.Contains(summary, "organizations:write") || !strings.Contains(detail, "--scope organizations:write") {
		t.Errorf("403: %q / %q", summary, detail)
	}
	summary, _ = Describe("x", fakeResponse{401, `{"type":"x","title":"t","status":401,"error":"unauthenticated"}`}, nil)
	if summary != "Renga rejected the operator token" {
		t.Errorf("401: %q", summary)
	}
	summary, detail = Describe("x", fakeResponse{502, `<html>bad gateway</html>`}, nil)
	if summary != "Unexpected response from the Renga API" || !strings.Contains(detail, "bad gateway") {
		t.Errorf("502: %q / %q", summary, detail)
	}
	_, detail = Describe("create organization", fakeResponse{400, `{"type":"x","title":"t","status":400,"error":"invalid_request","errors":[{"field":"slug","message":"bad"}]}`}, nil)
	if !strings.Contains(detail, "slug: bad") {
		t.Errorf("400: %q", detail)
	}
	if v := CurrentVersion(fakeResponse{412, `{"type":"x","title":"t","status":412,"error":"version_mismatch","current_version":9}`}); v != 9 {
		t.Errorf("current version %d", v)
	}
}

func TestParseURL(t *testing.T) {
	for _, bad := range []string{"", "renga.example.com", "ftp://renga.example.com", "https://", "https://u:p@renga.example.com", "https://renga.example.com/?x=1"} {
		if _, err := ParseURL(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, good := range []string{"https://renga.example.com", "http://127.0.0.1:8080/", "https://example.com/renga"} {
		if _, err := ParseURL(good); err != nil {
			t.Errorf("%q refused: %v", good, err)
		}
	}
}
