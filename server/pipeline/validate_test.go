package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/problem"
)

// schemaError is the error kin-openapi's schema validation makes of value (with its JSON pointer).
func schemaError(t *testing.T, schema *openapi3.Schema, value any) *openapi3.SchemaError {
	t.Helper()
	err := schema.VisitJSON(value)
	var se *openapi3.SchemaError
	if !errors.As(err, &se) {
		t.Fatalf("VisitJSON(%v) = %v, want a *openapi3.SchemaError", value, err)
	}
	return se
}

func TestFieldErrors(t *testing.T) {
	obj := openapi3.NewObjectSchema().
		WithProperty("a", openapi3.NewIntegerSchema()).
		WithProperty("nested", openapi3.NewObjectSchema().WithProperty("b", openapi3.NewStringSchema()))
	atA := schemaError(t, obj, map[string]any{"a": "x"})
	atNestedB := schemaError(t, obj, map[string]any{"nested": map[string]any{"b": 1}})
	atRoot := schemaError(t, openapi3.NewIntegerSchema().WithMax(100), 500)
	if got := atNestedB.JSONPointer(); !reflect.DeepEqual(got, []string{"nested", "b"}) {
		t.Fatalf("JSON pointer = %v", got)
	}
	param := func(name string) *openapi3.Parameter { return &openapi3.Parameter{Name: name, In: "query"} }
	body := &openapi3.RequestBody{}

	tests := []struct {
		name  string
		err   error
		field string
		want  []problem.FieldError
	}{
		{name: "parameter with a reason", err: &openapi3filter.RequestError{Parameter: param("limit"), Reason: "too big"},
			want: []problem.FieldError{{Field: "limit", Message: "too big"}}},
		{name: "parameter's schema error at its root", err: &openapi3filter.RequestError{Parameter: param("limit"), Reason: "bad", Err: atRoot},
			want: []problem.FieldError{{Field: "limit", Message: "number must be at most 100"}}},
		{name: "parameter's schema error inside it", err: &openapi3filter.RequestError{Parameter: param("filter"), Err: atNestedB},
			want: []problem.FieldError{{Field: "filter.nested.b", Message: "value must be a string"}}},
		{name: "body's schema error", err: &openapi3filter.RequestError{RequestBody: body, Err: atA},
			want: []problem.FieldError{{Field: "a", Message: "value must be an integer"}}},
		{name: "body's nested schema error", err: &openapi3filter.RequestError{RequestBody: body, Err: atNestedB},
			want: []problem.FieldError{{Field: "nested.b", Message: "value must be a string"}}},
		{name: "body's schema error at its root", err: &openapi3filter.RequestError{RequestBody: body, Err: atRoot},
			want: []problem.FieldError{{Field: "body", Message: "number must be at most 100"}}},
		{name: "body's several schema errors", err: &openapi3filter.RequestError{RequestBody: body, Err: openapi3.MultiError{atA, atNestedB}},
			want: []problem.FieldError{{Field: "a", Message: "value must be an integer"}, {Field: "nested.b", Message: "value must be a string"}}},
		{name: "body with a reason", err: &openapi3filter.RequestError{RequestBody: body, Reason: "failed to decode request body"},
			want: []problem.FieldError{{Field: "body", Message: "failed to decode request body"}}},
		{name: "body parse error", err: &openapi3filter.RequestError{RequestBody: body, Err: &openapi3filter.ParseError{Kind: openapi3filter.KindInvalidFormat, Reason: "x"}},
			want: []problem.FieldError{{Field: "body", Message: "malformed value"}}},
		{name: "parameter parse error", err: &openapi3filter.RequestError{Parameter: param("limit"), Err: &openapi3filter.ParseError{Kind: openapi3filter.KindInvalidFormat}},
			want: []problem.FieldError{{Field: "limit", Message: "malformed value"}}},
		{name: "request error naming nothing keeps the field", err: &openapi3filter.RequestError{Reason: "r"}, field: "outer",
			want: []problem.FieldError{{Field: "outer", Message: "r"}}},
		{name: "several request errors", err: openapi3.MultiError{
			&openapi3filter.RequestError{Parameter: param("limit"), Err: atRoot},
			&openapi3filter.RequestError{Parameter: param("cursor"), Reason: "bad cursor"},
			&openapi3filter.RequestError{RequestBody: body, Err: atA},
		}, want: []problem.FieldError{{Field: "limit", Message: "number must be at most 100"}, {Field: "cursor", Message: "bad cursor"},
			{Field: "a", Message: "value must be an integer"}}},
		{name: "empty multi error", err: openapi3.MultiError{}, want: nil},
		{name: "bare schema error, no field", err: atNestedB, want: []problem.FieldError{{Field: "nested.b", Message: "value must be a string"}}},
		{name: "bare schema error at its root", err: atRoot, field: "x", want: []problem.FieldError{{Field: "x", Message: "number must be at most 100"}}},
		{name: "wrapped schema error", err: fmt.Errorf("context: %w", atA), field: "q",
			want: []problem.FieldError{{Field: "q.a", Message: "value must be an integer"}}},
		{name: "unknown error", err: errors.New("boom"), field: "f", want: []problem.FieldError{{Field: "f", Message: "invalid value"}}},
		{name: "security error", err: &openapi3filter.SecurityRequirementsError{}, want: []problem.FieldError{{Field: "", Message: "invalid value"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fieldErrors(tt.err, tt.field); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("fieldErrors = %#v, want %#v", got, tt.want)
			}
		})
	}
}

// A parameter or body that is required and missing: kin-openapi says so in the RequestError's
// Reason, with the sentinel ErrInvalidRequired as its Err.
func TestFieldErrorsRequiredButMissing(t *testing.T) {
	err := &openapi3filter.RequestError{Parameter: &openapi3.Parameter{Name: "X-Trace", In: "header"},
		Reason: openapi3filter.ErrInvalidRequired.Error(), Err: openapi3filter.ErrInvalidRequired}
	want := []problem.FieldError{{Field: "X-Trace", Message: "value is required but missing"}}
	if got := fieldErrors(err, ""); !reflect.DeepEqual(got, want) {
		t.Errorf("fieldErrors = %#v, want %#v", got, want)
	}
}

const validateSpec = `
  /api/v1/operator/things/{thing_id}:
    post:
      operationId: createThing
      security: [{operatorToken: []}]
      x-renga-scope: organizations:write
      parameters:
        - {name: thing_id, in: path, required: true, schema: {type: string, pattern: "^t_[0-9]+$"}}
        - {name: limit, in: query, schema: {type: integer, minimum: 1, maximum: 100}}
        - {name: X-Trace, in: header, schema: {type: string, maxLength: 3}}
        - {name: If-Match, in: header, required: true, schema: {type: string, pattern: '^"[0-9]+"$'}}
        - ` + idempotencyKeyParam + `
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              additionalProperties: false
              required: [name]
              properties:
                name: {type: string, maxLength: 5}
                settings:
                  type: object
                  properties:
                    count: {type: integer}
                items: {type: array, items: {type: string}}
      responses: {"201": {description: ok}}`

func TestValidate(t *testing.T) {
	op := oneOperation(t, validateSpec)
	tests := []struct {
		name    string
		id      string
		query   string
		header  map[string]string
		body    string
		want    []problem.FieldError // nil: valid; compared sorted by field
		wantMsg bool                 // compare messages too
		early   bool                 // refused before the validator runs
	}{
		{name: "valid", id: "t_1", query: "limit=5", header: map[string]string{"X-Trace": "abc"}, body: `{"name":"abc","items":["x"]}`},
		// If-Match and Idempotency-Key are the pipeline's, with their own codes: never validated here.
		{name: "valid without If-Match or Idempotency-Key", id: "t_1", body: `{"name":"abc"}`},
		{name: "malformed If-Match and Idempotency-Key not validated", id: "t_1", header: map[string]string{"If-Match": "W/x", "Idempotency-Key": ""}, body: `{"name":"abc"}`},
		{name: "bad path parameter", id: "x_1", body: `{"name":"abc"}`, wantMsg: true,
			want: []problem.FieldError{{Field: "thing_id", Message: `string doesn't match the regular expression "^t_[0-9]+$"`}}},
		{name: "query out of range", id: "t_1", query: "limit=500", body: `{"name":"abc"}`, wantMsg: true,
			want: []problem.FieldError{{Field: "limit", Message: "number must be at most 100"}}},
		{name: "malformed query", id: "t_1", query: "limit=abc", body: `{"name":"abc"}`, wantMsg: true,
			want: []problem.FieldError{{Field: "limit", Message: "malformed value"}}},
		{name: "header too long", id: "t_1", header: map[string]string{"X-Trace": "abcd"}, body: `{"name":"abc"}`, wantMsg: true,
			want: []problem.FieldError{{Field: "X-Trace", Message: "maximum string length is 3"}}},
		{name: "missing property", id: "t_1", body: `{}`, wantMsg: true,
			want: []problem.FieldError{{Field: "name", Message: `property "name" is missing`}}},
		{name: "body fields", id: "t_1", body: `{"name":"abcdefg","settings":{"count":"x"},"items":["a",1],"extra":1}`, wantMsg: true,
			want: []problem.FieldError{
				{Field: "body", Message: `property "extra" is unsupported`},
				{Field: "items.1", Message: "value must be a string"},
				{Field: "name", Message: "maximum string length is 5"},
				{Field: "settings.count", Message: "value must be an integer"},
			}},
		{name: "body of the wrong type", id: "t_1", body: `[1]`, wantMsg: true,
			want: []problem.FieldError{{Field: "body", Message: "value must be an object"}}},
		{name: "missing body", id: "t_1", body: ``,
			want: []problem.FieldError{{Field: "body"}}},
		{name: "everything wrong at once", id: "bad", query: "limit=0", header: map[string]string{"X-Trace": "abcd"}, body: `{"name":1}`,
			want: []problem.FieldError{{Field: "X-Trace"}, {Field: "limit"}, {Field: "name"}, {Field: "thing_id"}}},
		{name: "NUL in the body, before the schema", id: "t_1", body: `{"name":"\u0000"}`, wantMsg: true, early: true,
			want: []problem.FieldError{{Field: "body", Message: "must be valid UTF-8 without NUL characters"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := "/api/v1/operator/things/" + tt.id
			if tt.query != "" {
				target += "?" + tt.query
			}
			r := httptest.NewRequest(http.MethodPost, target, strings.NewReader("not read: the stage reads st.Body"))
			r.Header.Set("Content-Type", "application/json")
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			st := &State{Op: op, Body: []byte(tt.body), bodyRead: true}
			st.setPathParams(map[string]string{"thing_id": tt.id})
			pe := validate(context.Background(), r, st)
			// The handler reads the body after validation (a request refused before the
			// validator runs is never handled).
			if b, err := io.ReadAll(r.Body); !tt.early && (err != nil || string(b) != tt.body) {
				t.Errorf("body after validate = %q, %v; want %q", b, err, tt.body)
			}
			// What the validator passed goes to the handler with the body: its value, decoded
			// once (runtime.BindJSONBody binds it); nothing when it did not pass.
			vv, kept := r.Body.(validatedValue)
			if kept != (tt.want == nil && tt.body != "") {
				t.Errorf("validated value kept = %v", kept)
			}
			if kept {
				var want any
				dec := json.NewDecoder(strings.NewReader(tt.body))
				dec.UseNumber()
				if err := dec.Decode(&want); err != nil || !reflect.DeepEqual(vv.ValidatedValue(), want) {
					t.Errorf("validated value = %#v, want %#v (%v)", vv.ValidatedValue(), want, err)
				}
			}
			if tt.want == nil {
				if pe != nil {
					t.Fatalf("problem = %v %+v, want none", pe, pe.Errors)
				}
				return
			}
			if pe == nil {
				t.Fatalf("no problem, want %+v", tt.want)
			}
			if pe.Status != http.StatusBadRequest || pe.Code != api.ErrorCodeInvalidRequest {
				t.Errorf("problem = %d %s, want 400 invalid_request", pe.Status, pe.Code)
			}
			got := append([]problem.FieldError(nil), pe.Errors...)
			sort.Slice(got, func(i, j int) bool { return got[i].Field < got[j].Field })
			if !tt.wantMsg {
				for i := range got {
					if got[i].Message == "" {
						t.Errorf("field %q has no message", got[i].Field)
					}
					got[i].Message = ""
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestStorable(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"", true},
		{"abc", true},
		{"héllo ✓ 😀", true},
		{"\uFFFD", true},
		{"\x00", false},
		{"a\x00b", false},
		{"\xff", false},
		{"a\xc3", false},        // truncated sequence
		{"\xed\xa0\x80", false}, // a surrogate encoded in UTF-8 (CESU): not valid UTF-8
		{"\xc0\x80", false},     // overlong NUL (modified UTF-8)
		{"\x01\x1f\x7f", true},  // other control characters are storable
	}
	for _, tt := range tests {
		if got := storable(tt.in); got != tt.want {
			t.Errorf("storable(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestUnstorable(t *testing.T) {
	tests := []struct {
		name   string
		target string
		params map[string]string
		body   string
		field  string // "": storable
	}{
		{name: "all fine", target: "/x/t_1?q=héllo", params: map[string]string{"thing_id": "t_1"}, body: `{"a":"é\u00e9"}`},
		{name: "NUL in a path parameter", target: "/x", params: map[string]string{"thing_id": "t\x001"}, field: "thing_id"},
		{name: "invalid UTF-8 in a path parameter", target: "/x", params: map[string]string{"thing_id": "t\xff"}, field: "thing_id"},
		{name: "NUL in a query value", target: "/x?q=a%00b", field: "q"},
		{name: "NUL in one of a query's values", target: "/x?q=a&q=%00", field: "q"},
		{name: "NUL in a query name", target: "/x?a%00b=1", field: "a\x00b"},
		{name: "invalid UTF-8 in a query value", target: "/x?q=%ff", field: "q"},
		{name: "raw invalid UTF-8 in the body", target: "/x", body: "{\"a\":\"\xff\"}", field: "body"},
		{name: "escaped NUL in a body string", target: "/x", body: `{"a":"x\u0000"}`, field: "body"},
		{name: "escaped NUL in a body key", target: "/x", body: `{"\u0000":1}`, field: "body"},
		{name: "escaped NUL deep in the body", target: "/x", body: `{"a":[{"b":["ok","\u0000"]}]}`, field: "body"},
		{name: "escaped NUL as the whole body", target: "/x", body: `"\u0000"`, field: "body"},
		// A lone surrogate decodes to U+FFFD: storable.
		{name: "lone high surrogate", target: "/x", body: `{"a":"\ud800"}`},
		{name: "lone low surrogate", target: "/x", body: `{"a":"\udc00x"}`},
		{name: "surrogate pair", target: "/x", body: `{"a":"\ud83d\ude00"}`},
		{name: "escaped backslash before u0000", target: "/x", body: `{"a":"\\u0000"}`},
		{name: "other escaped control characters", target: "/x", body: `{"a":"\u0001\u001f"}`},
		// What is not JSON is for the validator to refuse.
		{name: "malformed JSON with an escape", target: "/x", body: `{"a":"\u0000"`},
		{name: "numbers and literals", target: "/x", body: `{"a":1e400,"b":null,"c":true,"d":"\u0041"}`},
		{name: "empty body", target: "/x", body: ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, tt.target, nil)
			pe := unstorable(r.URL.Query(), tt.params, []byte(tt.body))
			if tt.field == "" {
				if pe != nil {
					t.Fatalf("problem = %v %+v, want none", pe, pe.Errors)
				}
				return
			}
			want := []problem.FieldError{{Field: tt.field, Message: "must be valid UTF-8 without NUL characters"}}
			if pe == nil || pe.Status != http.StatusBadRequest || pe.Code != api.ErrorCodeInvalidRequest || !reflect.DeepEqual(pe.Errors, want) {
				t.Fatalf("problem = %v, want 400 invalid_request with %+v", pe, want)
			}
		})
	}
}

func TestDuplicateKey(t *testing.T) {
	tests := []struct {
		body  string
		field string
		dup   bool
	}{
		{`{"slug":"a","slug":"b"}`, "slug", true},
		{`{"slug":"a","display_name":"b"}`, "", false},
		{`{"limits":{"max_agents":1,"max_agents":2}}`, "limits.max_agents", true},
		{`{"limits":{"max_agents":1},"entitlements":{"max_agents":true}}`, "", false}, // one key per object
		{`{"observations":[{"kind":"a","kind":"b"}]}`, "observations.0.kind", true},
		{`{"observations":[{"kind":"a"},{"kind":"b","data":{"x":1,"x":2}}]}`, "observations.1.data.x", true},
		{`{"a":[1,2,{"b":1}],"c":{"b":1}}`, "", false},
		{`{"a":{"b":{}},"a2":1,"a":2}`, "a", true},
		{`{"\u0061":1,"a":2}`, "a", true}, // the same key, escaped
		{`[{"a":1},{"a":1}]`, "", false},
		{`"just a string"`, "", false},
		{`{}`, "", false},
	}
	for _, tt := range tests {
		field, dup := duplicateKey([]byte(tt.body))
		if dup != tt.dup || field != tt.field {
			t.Errorf("duplicateKey(%s) = %q, %v; want %q, %v", tt.body, field, dup, tt.field, tt.dup)
		}
	}
}

// TestReadAll: the body as sent whatever Content-Length announced (exactly, too little, or
// nothing: chunked) and however the reader hands over its last bytes, a short one refused as unreadable, and one over MaxBodyBytes as too large,
// announced or not.
func TestReadAll(t *testing.T) {
	big := strings.Repeat("x", MaxBodyBytes+1)
	for _, tc := range []struct {
		name      string
		body      string
		announced int64
		status    int // 0: read
		reader    func(string) io.Reader
	}{
		// Readers may return their last bytes together with io.EOF, or nothing and no error
		// before more: the bytes past the announced length are read either way.
		{"longer, the rest with io.EOF", `{"a":12345}`, 3, 0, func(s string) io.Reader { return iotest.DataErrReader(strings.NewReader(s)) }},
		{"longer, after a read of nothing", `{"a":12345}`, 3, 0, func(s string) io.Reader { return &pausingReader{rest: s, pauseAt: 3} }},
		{"exact", `{"a":1}`, 7, 0, nil},
		{"longer than announced", `{"a":12345}`, 3, 0, nil},
		{"chunked", `{"a":1}`, -1, 0, nil},
		{"shorter than announced", `{"a":1}`, 20, http.StatusBadRequest, nil},
		{"over the limit, announced", big, int64(len(big)), http.StatusRequestEntityTooLarge, nil},
		{"over the limit, chunked", big, -1, http.StatusRequestEntityTooLarge, nil},
		{"at the limit", big[1:], int64(len(big) - 1), 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.reader == nil {
				tc.reader = func(s string) io.Reader { return strings.NewReader(s) }
			}
			r := httptest.NewRequest(http.MethodPost, "/", io.NopCloser(tc.reader(tc.body)))
			r.ContentLength = tc.announced
			got, pe := readAll(r)
			switch {
			case tc.status == 0 && pe != nil:
				t.Fatalf("refused: %d %s", pe.Status, pe.Detail)
			case tc.status == 0 && string(got) != tc.body:
				t.Fatalf("read %d bytes %.20q, want %d", len(got), got, len(tc.body))
			case tc.status != 0 && (pe == nil || pe.Status != tc.status):
				t.Fatalf("got %v, want status %d", pe, tc.status)
			}
		})
	}
}

// pausingReader reads rest, answering one read with nothing and no error once pauseAt bytes
// have been read (as io.Reader allows).
type pausingReader struct {
	rest    string
	read    int
	pauseAt int
	paused  bool
}

func (p *pausingReader) Read(b []byte) (int, error) {
	if p.rest == "" {
		return 0, io.EOF
	}
	if p.read == p.pauseAt && !p.paused {
		p.paused = true
		return 0, nil
	}
	n := min(len(b), len(p.rest))
	if p.read < p.pauseAt {
		n = min(n, p.pauseAt-p.read)
	}
	n = copy(b, p.rest[:n])
	p.rest, p.read = p.rest[n:], p.read+n
	return n, nil
}
