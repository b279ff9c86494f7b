package pipeline

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/problem"
)

func TestIdempotencyKey(t *testing.T) {
	var (
		required = &Operation{KeyRequired: true, KeyAccepted: true}
		optional = &Operation{KeyAccepted: true}
		none     = &Operation{}
	)
	const (
		missing  = "required"
		invalid  = "invalid"
		accepted = ""
	)
	tests := []struct {
		name   string
		op     *Operation
		values []string // nil: no header
		want   string
		fail   string // "", missing or invalid
	}{
		{name: "required and missing", op: required, values: nil, fail: missing},
		{name: "optional and missing", op: optional, values: nil, want: ""},
		{name: "not accepted and missing", op: none, values: nil, want: ""},
		{name: "not accepted and sent", op: none, values: []string{"abc"}, want: ""},
		{name: "not accepted, two values, ignored", op: none, values: []string{"a", "b"}, want: ""},
		{name: "not accepted, malformed, ignored", op: none, values: []string{`"a\x"`}, want: ""},
		{name: "required and sent", op: required, values: []string{"key-1"}, want: "key-1"},
		{name: "optional and sent", op: optional, values: []string{"key-1"}, want: "key-1"},
		{name: "two values", op: required, values: []string{"a", "b"}, fail: invalid},
		{name: "two equal values", op: required, values: []string{"a", "a"}, fail: invalid},
		{name: "sf string", op: required, values: []string{`"abc"`}, want: "abc"},
		{name: "sf string with escaped quote", op: required, values: []string{`"a\"b"`}, want: `a"b`},
		{name: "sf string with escaped backslash", op: required, values: []string{`"a\\b"`}, want: `a\b`},
		{name: "sf string with bad escape", op: required, values: []string{`"a\nb"`}, fail: invalid},
		{name: "sf string ending in a backslash", op: required, values: []string{`"abc\"`}, fail: invalid},
		{name: "sf string with embedded quote", op: required, values: []string{`"a"b"`}, fail: invalid},
		{name: "empty sf string", op: required, values: []string{`""`}, fail: invalid},
		{name: "empty value", op: required, values: []string{""}, fail: invalid},
		{name: "empty value, optional", op: optional, values: []string{""}, fail: invalid},
		// A value that is not a whole sf-string is taken as the key itself.
		{name: "lone quote", op: required, values: []string{`"`}, want: `"`},
		{name: "opening quote only", op: required, values: []string{`"abc`}, want: `"abc`},
		{name: "backslash unquoted", op: required, values: []string{`a\b`}, want: `a\b`},
		{name: "space inside", op: required, values: []string{"a b"}, want: "a b"},
		{name: "printable ASCII range", op: required, values: []string{" ~"}, want: " ~"},
		{name: "255 characters", op: required, values: []string{strings.Repeat("k", 255)}, want: strings.Repeat("k", 255)},
		{name: "256 characters", op: required, values: []string{strings.Repeat("k", 256)}, fail: invalid},
		{name: "255 characters quoted", op: required, values: []string{`"` + strings.Repeat("k", 255) + `"`}, want: strings.Repeat("k", 255)},
		{name: "256 characters quoted", op: required, values: []string{`"` + strings.Repeat("k", 256) + `"`}, fail: invalid},
		{name: "255 characters after unescaping", op: required, values: []string{`"` + strings.Repeat(`\\`, 255) + `"`}, want: strings.Repeat(`\`, 255)},
		{name: "tab", op: required, values: []string{"a\tb"}, fail: invalid},
		{name: "NUL", op: required, values: []string{"a\x00b"}, fail: invalid},
		{name: "unit separator", op: required, values: []string{"a\x1fb"}, fail: invalid},
		{name: "DEL", op: required, values: []string{"a\x7fb"}, fail: invalid},
		{name: "non-ASCII", op: required, values: []string{"clé"}, fail: invalid},
		{name: "non-ASCII in sf string", op: required, values: []string{`"clé"`}, fail: invalid},
		{name: "control character in sf string", op: required, values: []string{"\"a\x01\""}, fail: invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/api/v1/operator/x", nil)
			for _, v := range tt.values {
				r.Header.Add("Idempotency-Key", v)
			}
			got, pe := idempotencyKey(r, tt.op)
			if got != tt.want {
				t.Errorf("key = %q, want %q", got, tt.want)
			}
			switch tt.fail {
			case accepted:
				if pe != nil {
					t.Fatalf("problem = %v, want none", pe)
				}
			case missing:
				if pe == nil || pe.Status != http.StatusBadRequest || pe.Code != api.ErrorCodeIdempotencyKeyRequired || pe.Errors != nil {
					t.Fatalf("problem = %+v, want 400 idempotency_key_required without field errors", pe)
				}
			case invalid:
				want := []problem.FieldError{{Field: "Idempotency-Key", Message: "1 to 255 printable ASCII characters"}}
				if pe == nil || pe.Status != http.StatusBadRequest || pe.Code != api.ErrorCodeInvalidRequest || !reflect.DeepEqual(pe.Errors, want) {
					t.Fatalf("problem = %+v, want 400 invalid_request naming Idempotency-Key", pe)
				}
			}
		})
	}
}

func TestUnquoteSFString(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{`""`, "", true},
		{`"a"`, "a", true},
		{`"abc def"`, "abc def", true},
		{`"\""`, `"`, true},
		{`"\\"`, `\`, true},
		{`"\\\""`, `\"`, true},
		{`"a\"b\\c"`, `a"b\c`, true},
		{`"\"\""`, `""`, true},
		{`"\"`, "", false},   // the escape has nothing to escape
		{`"a\"`, "", false},  // idem
		{`"\a"`, "", false},  // only \" and \\ are escapes
		{`"\n"`, "", false},  // idem
		{`"\/"`, "", false},  // idem
		{`"a"b"`, "", false}, // a bare quote ends the string early
		{`"""`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := unquoteSFString(tt.in)
			if got != tt.want || ok != tt.ok {
				t.Errorf("unquoteSFString(%s) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestCanonicalJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // "<nil>" for a nil result
	}{
		{name: "empty", in: "", want: "<nil>"},
		{name: "only space", in: " \n\t ", want: "<nil>"},
		{name: "keys sorted", in: `{"b":1,"a":2}`, want: `{"a":2,"b":1}`},
		{name: "nested keys sorted", in: `{"z":{"y":1,"x":[{"b":1,"a":2}]}}`, want: `{"z":{"x":[{"a":2,"b":1}],"y":1}}`},
		{name: "space dropped", in: " { \"a\" : [ 1 , 2 ] ,\n\"b\" : null } \n", want: `{"a":[1,2],"b":null}`},
		{name: "array order kept", in: `[3,1,2]`, want: `[3,1,2]`},
		{name: "1.0 keeps its digits", in: `{"n":1.0}`, want: `{"n":1.0}`},
		{name: "1 keeps its digits", in: `{"n":1}`, want: `{"n":1}`},
		{name: "exponent kept", in: `{"n":1e3}`, want: `{"n":1e3}`},
		{name: "trailing zeros kept", in: `{"n":1.50}`, want: `{"n":1.50}`},
		{name: "big integer exact", in: `{"n":12345678901234567890123}`, want: `{"n":12345678901234567890123}`},
		{name: "negative zero kept", in: `-0`, want: `-0`},
		{name: "string escapes normalized", in: `{"s":"\u0041\/"}`, want: `{"s":"A/"}`},
		{name: "scalars", in: ` "x" `, want: `"x"`},
		{name: "true", in: `true`, want: `true`},
		// The last of duplicate keys wins, as it does for the handler's decoding.
		{name: "duplicate keys", in: `{"a":1,"a":2}`, want: `{"a":2}`},
		{name: "not JSON", in: "not json", want: "not json"},
		{name: "truncated JSON", in: `{"a":`, want: `{"a":`},
		{name: "form body", in: "a=1&b=2", want: "a=1&b=2"},
		// Only the first JSON value is decoded: readBody refuses such a JSON body before this.
		{name: "trailing data dropped", in: `{"b":1} {"a":2}`, want: `{"b":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := canonicalJSON([]byte(tt.in))
			gs := string(got)
			if got == nil {
				gs = "<nil>"
			}
			if gs != tt.want {
				t.Errorf("canonicalJSON(%q) = %q, want %q", tt.in, gs, tt.want)
			}
		})
	}
}

func TestRequestDigest(t *testing.T) {
	op := &Operation{Method: http.MethodPost, Route: "/api/v1/operator/organizations/{organization_id}/things/{thing_id}"}
	type req struct {
		op      *Operation
		params  map[string]string
		query   string
		ifMatch string
		body    string
	}
	base := req{op: op, params: map[string]string{"organization_id": "org_1", "thing_id": "t_1"},
		query: "a=1&b=2", ifMatch: `"3"`, body: `{"a":1,"b":[1,2]}`}
	digest := func(r req) []byte {
		q, err := url.ParseQuery(r.query)
		if err != nil {
			t.Fatal(err)
		}
		// From the text: TestCanonicalBodyIsCanonicalJSON holds the validated value's to it.
		return requestDigest(r.op, r.params, q, r.ifMatch, canonicalBody([]byte(r.body), nil))
	}

	t.Run("exact", func(t *testing.T) {
		want := sha256.Sum256([]byte("4:POST\n66:/api/v1/operator/organizations/{organization_id}/things/{thing_id}\n" +
			"15:organization_id\n5:org_1\n8:thing_id\n3:t_1\n7:a=1&b=2\n3:\"3\"\n" + `{"a":1,"b":[1,2]}`))
		if got := digest(base); !bytes.Equal(got, want[:]) {
			t.Errorf("digest = %x, want %x", got, want)
		}
	})

	t.Run("values with newlines do not read as other parameters", func(t *testing.T) {
		a := base
		a.params = map[string]string{"organization_id": "org_1\nthing_id=t_1", "thing_id": ""}
		b := base
		b.params = map[string]string{"organization_id": "org_1", "thing_id": "t_1\nthing_id="}
		if bytes.Equal(digest(a), digest(b)) || bytes.Equal(digest(a), digest(base)) {
			t.Error("two requests with different path values have one digest")
		}
	})

	with := func(f func(*req)) req {
		r := base
		r.params = map[string]string{}
		for k, v := range base.params {
			r.params[k] = v
		}
		f(&r)
		return r
	}
	same := []struct {
		name string
		req  req
	}{
		{"key order", with(func(r *req) { r.body = `{"b":[1,2],"a":1}` })},
		{"whitespace", with(func(r *req) { r.body = "{\n  \"a\": 1,\n  \"b\": [ 1, 2 ]\n}\n" })},
		{"query order", with(func(r *req) { r.query = "b=2&a=1" })},
		{"If-Match surrounding space", with(func(r *req) { r.ifMatch = ` "3" ` })},
		{"equal escapes", with(func(r *req) { r.body = `{"\u0061":1,"b":[1,2]}` })},
	}
	for _, tt := range same {
		t.Run("same/"+tt.name, func(t *testing.T) {
			if a, b := digest(base), digest(tt.req); !bytes.Equal(a, b) {
				t.Errorf("digest changed: %x != %x", a, b)
			}
		})
	}
	differ := []struct {
		name string
		req  req
	}{
		{"a different value", with(func(r *req) { r.body = `{"a":2,"b":[1,2]}` })},
		{"array order", with(func(r *req) { r.body = `{"a":1,"b":[2,1]}` })},
		{"1.0 for 1", with(func(r *req) { r.body = `{"a":1.0,"b":[1,2]}` })},
		{"a string for a number", with(func(r *req) { r.body = `{"a":"1","b":[1,2]}` })},
		{"an added field", with(func(r *req) { r.body = `{"a":1,"b":[1,2],"c":null}` })},
		{"empty body", with(func(r *req) { r.body = "" })},
		{"a path parameter", with(func(r *req) { r.params["thing_id"] = "t_2" })},
		{"a query value", with(func(r *req) { r.query = "a=1&b=3" })},
		{"a repeated query value", with(func(r *req) { r.query = "a=1&b=2&b=2" })},
		{"no query", with(func(r *req) { r.query = "" })},
		{"If-Match", with(func(r *req) { r.ifMatch = `"4"` })},
		{"weak If-Match", with(func(r *req) { r.ifMatch = `W/"3"` })},
		{"no If-Match", with(func(r *req) { r.ifMatch = "" })},
		{"method", with(func(r *req) { r.op = &Operation{Method: http.MethodPut, Route: op.Route} })},
		{"route", with(func(r *req) { r.op = &Operation{Method: op.Method, Route: op.Route + "/x"} })},
	}
	for _, tt := range differ {
		t.Run("differ/"+tt.name, func(t *testing.T) {
			if a, b := digest(base), digest(tt.req); bytes.Equal(a, b) {
				t.Errorf("digest unchanged: %x", a)
			}
		})
	}
	t.Run("non-JSON body hashed as is", func(t *testing.T) {
		a := requestDigest(op, nil, nil, "", canonicalBody([]byte("a=1"), nil))
		b := requestDigest(op, nil, nil, "", canonicalBody([]byte("a=1 "), nil))
		if bytes.Equal(a, b) {
			t.Error("a non-JSON body was normalized")
		}
		want := sha256.Sum256([]byte("4:POST\n66:" + op.Route + "\n0:\n0:\na=1"))
		if !bytes.Equal(a, want[:]) {
			t.Errorf("digest = %x, want %x", a, want)
		}
	})
	t.Run("no body equals an empty body", func(t *testing.T) {
		a := requestDigest(op, nil, nil, "", canonicalBody(nil, nil))
		b := requestDigest(op, nil, nil, "", canonicalBody([]byte(" \n"), nil))
		want := sha256.Sum256([]byte("4:POST\n66:" + op.Route + "\n0:\n0:\n"))
		if !bytes.Equal(a, want[:]) || !bytes.Equal(b, want[:]) {
			t.Errorf("digests = %x, %x, want %x", a, b, want)
		}
	})
}

func TestWithoutSecrets(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		fields  []string
		want    string
		wantErr bool
	}{
		{name: "no secret fields: as is", body: "{ \"secret\": \"s\" }", fields: nil, want: "{ \"secret\": \"s\" }"},
		{name: "no secret fields, not JSON", body: "text", fields: []string{}, want: "text"},
		{name: "secret removed, others kept", body: `{"id":"tok_1","secret":"renga_operator_x","name":"ci"}`,
			fields: []string{"secret"}, want: `{"id":"tok_1","name":"ci"}` + "\n"},
		{name: "several secrets", body: `{"a":1,"b":2,"c":3}`, fields: []string{"a", "c"}, want: `{"b":2}` + "\n"},
		{name: "absent secret", body: `{"b":2,"a":1}`, fields: []string{"secret"}, want: `{"a":1,"b":2}` + "\n"},
		{name: "nested values kept", body: `{"obj":{"secret":"kept","z":[1, 2]},"secret":"gone"}`,
			fields: []string{"secret"}, want: `{"obj":{"secret":"kept","z":[1,2]}}` + "\n"},
		{name: "only the secret", body: `{"secret":"s"}`, fields: []string{"secret"}, want: "{}\n"},
		{name: "not an object", body: `["secret"]`, fields: []string{"secret"}, wantErr: true},
		{name: "not JSON", body: `secret`, fields: []string{"secret"}, wantErr: true},
		{name: "empty", body: ``, fields: []string{"secret"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := withoutSecrets([]byte(tt.body), tt.fields)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("withoutSecrets = %q, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("withoutSecrets = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestStoredResult(t *testing.T) {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Location", "/api/v1/operator/tokens/tok_1")
	h.Set("ETag", `"1"`)
	h.Set("Idempotency-Expires", "2026-01-02T03:04:05Z")
	h.Set("Set-Cookie", "a=b")
	h.Set("X-Request-Id", "req_1")
	h.Set("Cache-Control", "no-store")
	h.Set("Retry-After", "1")
	body := `{"id":"tok_1","secret":"renga_operator_s"}`

	got, err := storedResult(http.StatusCreated, h, []byte(body), []string{"secret"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != http.StatusCreated {
		t.Errorf("status = %d, want 201", got.Status)
	}
	wantHeaders := map[string]string{"Content-Type": "application/json", "Location": "/api/v1/operator/tokens/tok_1",
		"ETag": `"1"`, "Idempotency-Expires": "2026-01-02T03:04:05Z"}
	if !reflect.DeepEqual(got.Headers, wantHeaders) {
		t.Errorf("headers = %v, want %v", got.Headers, wantHeaders)
	}
	if want := `{"id":"tok_1"}` + "\n"; string(got.Body) != want {
		t.Errorf("body = %q, want %q", got.Body, want)
	}
	if !got.Expires.IsZero() {
		t.Errorf("expires = %v, want zero (write sets it)", got.Expires)
	}

	t.Run("no headers, no secrets", func(t *testing.T) {
		got, err := storedResult(http.StatusNoContent, http.Header{"X-Other": {"1"}}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != http.StatusNoContent || len(got.Headers) != 0 || got.Headers == nil || got.Body != nil {
			t.Errorf("stored = %+v, want 204, empty headers, no body", got)
		}
	})
	t.Run("empty header value not stored", func(t *testing.T) {
		got, err := storedResult(http.StatusOK, http.Header{"Etag": {""}, "Location": {"/x"}}, []byte("{}"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]string{"Location": "/x"}; !reflect.DeepEqual(got.Headers, want) {
			t.Errorf("headers = %v, want %v", got.Headers, want)
		}
	})
	t.Run("secret fields of a body that is not an object", func(t *testing.T) {
		if got, err := storedResult(http.StatusOK, h, []byte(`[1]`), []string{"secret"}); err == nil {
			t.Errorf("stored = %+v, want an error", got)
		}
	})
	t.Run("stored body decodes", func(t *testing.T) {
		var m map[string]any
		if err := json.Unmarshal(got.Body, &m); err != nil || len(m) != 1 || m["id"] != "tok_1" {
			t.Errorf("stored body %q decodes to %v, %v", got.Body, m, err)
		}
	})
}
