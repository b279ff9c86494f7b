package cli

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// fakeResponse is shaped like a generated *Response: a status code and the raw Body.
type fakeResponse struct {
	Body   []byte
	status int
}

func (r *fakeResponse) StatusCode() int { return r.status }

func TestCheckMapsProblemsToExitCodes(t *testing.T) {
	t.Parallel()
	problem := `{"title": "Precondition Failed", "detail": "version 3 is not current", "error": "version_mismatch", "request_id": "req_1"}`
	for _, c := range []struct {
		status   int
		body     string
		wantCode int
		wantMsg  string
	}{
		{http.StatusUnauthorized, `{}`, ExitAuth, "Unauthorized (401 )"},
		{http.StatusForbidden, `{"detail": "needs audit:read", "error": "insufficient_scope"}`, ExitAuth, "needs audit:read (403 insufficient_scope)"},
		{http.StatusPreconditionFailed, problem, ExitPrecondition, "version 3 is not current (412 version_mismatch, request req_1)"},
		{http.StatusPreconditionRequired, `{"title": "If-Match required"}`, ExitPrecondition, "If-Match required (428 )"},
		{http.StatusConflict, `{"detail": "slug taken", "error": "conflict"}`, ExitConflict, "slug taken (409 conflict)"},
		{http.StatusBadRequest, `{"title": "Invalid", "errors": [{"field": "slug", "message": "lower case"}]}`, ExitUsage,
			"Invalid\n  slug: lower case (400 )"},
		{http.StatusUnprocessableEntity, `not json`, ExitUsage, "Unprocessable Entity (422 )"},
		{http.StatusNotFound, `{"detail": "no organization org_1", "error": "not_found"}`, ExitFailure, "no organization org_1 (404 not_found)"},
	} {
		err := check(&fakeResponse{Body: []byte(c.body), status: c.status}, nil)
		if exitCode(err) != c.wantCode || err.Error() != c.wantMsg {
			t.Errorf("%d: exit %d %q, want %d %q", c.status, exitCode(err), err, c.wantCode, c.wantMsg)
		}
	}
	if err := check(&fakeResponse{Body: []byte(`{}`), status: http.StatusOK}, nil); err != nil {
		t.Errorf("200: %v", err)
	}
	transport := errors.New("connection refused")
	if err := check(nil, transport); !errors.Is(err, transport) || exitCode(err) != ExitFailure || !strings.HasPrefix(err.Error(), "request failed: ") {
		t.Errorf("transport error: %v", err)
	}
}

func TestPrintFormats(t *testing.T) {
	t.Parallel()
	created := time.Now().Add(-3 * time.Hour)
	body := []byte(`{"id":"org_1","slug":"acme"}`)
	rows := func() [][]string { return [][]string{{"org_1", "acme"}} }
	for _, c := range []struct {
		output, want string
	}{
		{"json", "{\n  \"id\": \"org_1\",\n  \"slug\": \"acme\"\n}\n"},
		{"tsv", "org_1\tacme\n"},
		{"table", "ID     SLUG\norg_1  acme\n"},
	} {
		var out bytes.Buffer
		f := &Factory{Stdout: &out, output: c.output}
		if err := f.print(body, []string{"ID", "SLUG"}, rows); err != nil || out.String() != c.want {
			t.Errorf("%s: %q (%v), want %q", c.output, out.String(), err, c.want)
		}
	}
	// Times are relative on a terminal and RFC 3339 when piped.
	if got := (&Factory{output: "table"}).timeCell(created); got != "3h ago" {
		t.Errorf("table time: %q", got)
	}
	if got := (&Factory{output: "tsv"}).timeCell(created); got != created.UTC().Format(time.RFC3339) {
		t.Errorf("tsv time: %q", got)
	}
}

func TestIdempotencyKeyIsReported(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	f := &Factory{Stderr: &stderr}
	if key := f.idempotencyKey("k1"); key != "k1" || !strings.Contains(stderr.String(), "--idempotency-key k1") {
		t.Errorf("given key: %q, stderr %q", key, stderr.String())
	}
	stderr.Reset()
	if key := f.idempotencyKey(""); len(key) != 32 || !strings.Contains(stderr.String(), "Idempotency-Key: "+key) {
		t.Errorf("generated key: %q, stderr %q", key, stderr.String())
	}
	stderr.Reset()
	if key := f.optionalIdempotencyKey(""); key != nil || stderr.Len() != 0 {
		t.Errorf("no key: %v, stderr %q", key, stderr.String())
	}
}

func TestIfMatch(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	f := &Factory{Stderr: &stderr}
	noServer := func() (string, error) { return "", errors.New("the stored version was read") }
	for flag, want := range map[string]string{"3": `"3"`, `"3"`: `"3"`, `W/"3"`: `W/"3"`} {
		if got, err := f.ifMatch(flag, noServer); err != nil || got != want {
			t.Errorf("--if-match %s: %q (%v), want %q", flag, got, err, want)
		}
	}
	got, err := f.ifMatch("current", func() (string, error) { return `"7"`, nil })
	if err != nil || got != `"7"` || !strings.Contains(stderr.String(), `If-Match: "7" (the current version)`) {
		t.Errorf("--if-match current: %q (%v), stderr %q", got, err, stderr.String())
	}
}
