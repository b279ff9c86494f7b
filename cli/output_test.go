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

func TestIdempotencyKeys(t *testing.T) {
	t.Parallel()
	if k := newIdempotencyKey("k1"); k != "k1" {
		t.Errorf("given key: %q", k)
	}
	if a, b := newIdempotencyKey(""), newIdempotencyKey(""); len(a) != 32 || a == b {
		t.Errorf("generated keys: %q, %q", a, b)
	}
	if k := optionalIdempotencyKey(""); k != nil {
		t.Errorf("no optional key: %q", *k)
	}
	if k := optionalIdempotencyKey("k2"); k == nil || *k != "k2" {
		t.Errorf("optional key: %v", k)
	}
}

// TestIdempotencyKeyHint: the key used is told only when rerunning under it could matter: after
// a success and when the outcome is unknown (no answer, a 5xx), never after a 4xx, which
// changed nothing; the secret is mentioned only where the answer shows one.
func TestIdempotencyKeyHint(t *testing.T) {
	t.Parallel()
	const done = "Idempotency-Key: k1 (rerun with --idempotency-key k1 to get this result again without repeating the operation)\n"
	const unknown = "Idempotency-Key: k1 (the outcome is unknown: rerun with --idempotency-key k1 to finish the operation without repeating it)\n"
	refused := errors.New("connection reset")
	for _, c := range []struct {
		name      string
		resp      *fakeResponse
		err       error
		shownOnce bool
		want      string
	}{
		{"created", &fakeResponse{Body: []byte(`{}`), status: http.StatusCreated}, nil, false, done},
		{"ok", &fakeResponse{Body: []byte(`{}`), status: http.StatusOK}, nil, false, done},
		{"conflict", &fakeResponse{Body: []byte(`{}`), status: http.StatusConflict}, nil, false, ""},
		{"bad request", &fakeResponse{Body: []byte(`{}`), status: http.StatusBadRequest}, nil, true, ""},
		{"version mismatch", &fakeResponse{Body: []byte(`{}`), status: http.StatusPreconditionFailed}, nil, false, ""},
		{"unavailable", &fakeResponse{Body: []byte(`{}`), status: http.StatusServiceUnavailable}, nil, false, unknown},
		{"bad gateway", &fakeResponse{Body: []byte(`{}`), status: http.StatusBadGateway}, nil, false, unknown},
		{"no answer", nil, refused, false, unknown},
		{"created, secret shown", &fakeResponse{Body: []byte(`{}`), status: http.StatusCreated}, nil, true,
			"Idempotency-Key: k1 (rerun with --idempotency-key k1 to get this result again without repeating the operation; the rerun's answer leaves out the secret, shown only this once)\n"},
		{"no answer, secret", nil, refused, true,
			"Idempotency-Key: k1 (the outcome is unknown: rerun with --idempotency-key k1 to finish the operation without repeating it; if this attempt succeeded, the rerun's answer leaves out the secret (shown only once): rotate it then)\n"},
	} {
		var stderr bytes.Buffer
		f := &Factory{Stderr: &stderr}
		var resp apiResponse
		if c.resp != nil {
			resp = c.resp
		}
		var err error
		if c.shownOnce {
			err = f.checkKeyedShownOnce("k1", resp, c.err)
		} else {
			key := "k1"
			err = f.checkKeyed(&key, resp, c.err)
		}
		if stderr.String() != c.want {
			t.Errorf("%s: stderr %q, want %q", c.name, stderr.String(), c.want)
		}
		if (err != nil) != (c.err != nil || c.resp.status >= 400) {
			t.Errorf("%s: error %v", c.name, err)
		}
		if !c.shownOnce && strings.Contains(stderr.String(), "secret") {
			t.Errorf("%s: the hint talks of a secret the command does not show", c.name)
		}
	}
	var stderr bytes.Buffer
	if err := (&Factory{Stderr: &stderr}).checkKeyed(nil, &fakeResponse{Body: []byte(`{}`), status: http.StatusOK}, nil); err != nil || stderr.Len() != 0 {
		t.Errorf("no key sent: %v, stderr %q", err, stderr.String())
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
