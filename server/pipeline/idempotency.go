package pipeline

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/problem"
)

// idempotencyKey returns the request's key (unquoted from a structured-field string), or a
// problem when the operation requires one and none was sent.
func idempotencyKey(r *http.Request, op *Operation) (string, *problem.Error) {
	values := r.Header["Idempotency-Key"] // its canonical key: see readBody
	if len(values) == 0 {
		if op.KeyRequired {
			return "", problem.New(http.StatusBadRequest, api.ErrorCodeIdempotencyKeyRequired,
				"This operation needs an Idempotency-Key header (1 to 255 printable ASCII characters), so that a retry cannot repeat it.")
		}
		return "", nil
	}
	if !op.KeyAccepted {
		return "", nil
	}
	bad := problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest,
		"Idempotency-Key must be one header of 1 to 255 printable ASCII characters.")
	bad.Errors = []problem.FieldError{{Field: "Idempotency-Key", Message: "1 to 255 printable ASCII characters"}}
	if len(values) > 1 {
		return "", bad
	}
	v := values[0]
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		unq, ok := unquoteSFString(v)
		if !ok {
			return "", bad
		}
		v = unq
	}
	if len(v) < 1 || len(v) > 255 {
		return "", bad
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "", bad
		}
	}
	return v, nil
}

// unquoteSFString decodes an RFC 8941 string: only \" and \\ are escapes.
func unquoteSFString(s string) (string, bool) {
	s = s[1 : len(s)-1]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			if i+1 >= len(s) || (s[i+1] != '"' && s[i+1] != '\\') {
				return "", false
			}
			i++
			b.WriteByte(s[i])
		case '"':
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// storedKey is the key's record identity for this request: its namespace (credential, method,
// route), the key's hash and the digest of the normalized request.
func storedKey(st *State, key string, r *http.Request, pathParams map[string]string) *domain.IdempotencyKey {
	if key == "" {
		return nil
	}
	op := st.Op
	return &domain.IdempotencyKey{ActorID: st.Actor.CredentialID, Method: op.Method, Route: op.Route,
		KeyHash: domain.HashSecret(key),
		Digest:  requestDigest(op, pathParams, r.URL.Query(), r.Header.Get("If-Match"), canonicalBody(st.Body, st.validated))}
}

// requestDigest is SHA-256 over the normalized request: method, route, path parameters (sorted
// by name), query (sorted), If-Match, each length-prefixed so that no two requests read alike,
// then the body, canonical (canonicalBody).
func requestDigest(op *Operation, pathParams map[string]string, query url.Values, ifMatch string, canonical []byte) []byte {
	h := sha256.New()
	var buf []byte
	part := func(s string) {
		buf = append(strconv.AppendInt(buf[:0], int64(len(s)), 10), ':')
		buf = append(append(buf, s...), '\n')
		h.Write(buf)
	}
	part(op.Method)
	part(op.Route)
	names := make([]string, 0, len(pathParams))
	for k := range pathParams {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		part(k)
		part(pathParams[k])
	}
	part(query.Encode())
	part(strings.TrimSpace(ifMatch))
	h.Write(canonical)
	return h.Sum(nil)
}

// canonicalBody is a request body re-serialized canonically: keys sorted, insignificant space
// dropped, numbers as written. It is written from the value the validator passed (validated)
// when there is one: the bytes canonicalJSON makes of the body's text, but for a number where
// the schema wants an integer written otherwise (1e2), which is the integer it is (integerText).
func canonicalBody(body []byte, validated any) []byte {
	if validated != nil {
		if out, err := json.Marshal(validated); err == nil {
			return out
		}
	}
	return canonicalJSON(body)
}

// canonicalJSON re-serializes a JSON body with sorted keys and no insignificant space (numbers
// keep their digits); a body that is not JSON is returned as it is.
func canonicalJSON(body []byte) []byte {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return body
	}
	out, err := json.Marshal(v)
	if err != nil {
		return body
	}
	return out
}

// withoutSecrets removes the fields shown once from a JSON body before it is stored.
func withoutSecrets(body []byte, fields []string) ([]byte, error) {
	if len(fields) == 0 {
		return body, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	for _, f := range fields {
		delete(m, f)
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// storedHeaders are the response headers a replay repeats.
var storedHeaders = []string{"Content-Type", "Location", "ETag", "Idempotency-Expires"}

// storedResult is what is stored of a response under its key: the shown-once secrets left out.
func storedResult(status int, h http.Header, body []byte, secretFields []string) (*domain.StoredResult, error) {
	body, err := withoutSecrets(body, secretFields)
	if err != nil {
		return nil, err
	}
	headers := map[string]string{}
	for _, name := range storedHeaders {
		if v := h.Get(name); v != "" {
			headers[name] = v
		}
	}
	return &domain.StoredResult{Status: status, Headers: headers, Body: body}, nil
}

// replay writes a stored response, byte for byte, marked as a replay.
func replay(w http.ResponseWriter, s *domain.StoredResult) {
	h := w.Header()
	for k, v := range s.Headers {
		h.Set(k, v)
	}
	h.Set("Idempotent-Replayed", "true")
	w.WriteHeader(s.Status)
	_, _ = w.Write(s.Body)
}
