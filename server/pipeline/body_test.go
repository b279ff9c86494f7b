package pipeline

import (
	"bytes"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/oapi-codegen/runtime"

	"renga.dev/renga/gen/api"
)

// jsonBody is an operation of the spec with a JSON request body.
type jsonBody struct {
	method, path string
	op           *openapi3.Operation
	mt           *openapi3.MediaType
}

// jsonBodies are the spec's operations with a JSON request body.
func jsonBodies(spec *openapi3.T) []jsonBody {
	var out []jsonBody
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody == nil || op.RequestBody.Value == nil {
				continue
			}
			if mt := op.RequestBody.Value.Content.Get("application/json"); mt != nil && mt.Schema != nil {
				out = append(out, jsonBody{method, path, op, mt})
			}
		}
	}
	return out
}

// replacements are the values variants puts in place of each property.
var replacements = []string{`{}`, `[]`, `""`, `"x"`, `1`, `1.5`, `-3`, `true`, `null`,
	`{"a":{"b":[1,{"c":null}]},"d":"e"}`, `"a\"b"`, `"\u00e9t\u00e9"`, `"été"`, `"host.facts"`, `"HOST"`, `"a\nb"`,
	`1e5`, `-0`, `12345678901234567890123`, `0.000001`, `"2026-12-01T00:00:00Z"`, `"not a time"`, `[{"kind":"k"}]`, `{"observed_at":"2026-12-01T00:00:00Z","kind":"k","data":{"x":[1]}}`}

// variants are request bodies for mt: its examples, and each with each property (and each
// property of the first element of an array of objects) replaced by each of replacements, then
// bodies of every JSON type, malformed and with trailing data.
func variants(t *testing.T, mt *openapi3.MediaType) []string {
	t.Helper()
	var bodies []string
	for _, ex := range []any{mt.Example, mt.Schema.Value.Example} {
		if ex == nil {
			continue
		}
		b, err := json.Marshal(ex)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, string(b))
		var obj map[string]json.RawMessage
		if json.Unmarshal(b, &obj) != nil {
			continue
		}
		keys := append([]string{"unknown_property"}, sortedKeys(obj)...)
		for _, k := range keys {
			for _, r := range replacements {
				v := map[string]json.RawMessage{}
				for k2, v2 := range obj {
					v[k2] = v2
				}
				v[k] = json.RawMessage(r)
				b, _ := json.Marshal(v)
				bodies = append(bodies, string(b))
				// Inside arrays of objects (a batch's observations): each field of the first element too.
				var arr []map[string]json.RawMessage
				if json.Unmarshal(obj[k], &arr) == nil && len(arr) > 0 {
					for ik := range arr[0] {
						el := map[string]json.RawMessage{}
						for k3, v3 := range arr[0] {
							el[k3] = v3
						}
						el[ik] = json.RawMessage(r)
						eb, _ := json.Marshal([]any{el})
						v[k] = eb
						b, _ := json.Marshal(v)
						bodies = append(bodies, string(b))
					}
				}
			}
		}
	}
	bodies = append(bodies, `{}`, `[]`, `null`, `"s"`, `{"a":`, `{} {}`, `{}]`, ` {"batch_id":"b"} `, `{"batch_id":"b","observations":[{"data":{"x":}}]}`)
	return bodies
}

func sortedKeys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestValidatedValueBindsAsTheBody: for every JSON request body of the spec, each of its
// variants that the validator passes reaches its handler as decoding the body would give it:
// what runtime.BindJSONBody binds from the value validate leaves (kin-openapi's, with integers
// written plainly: bindableIntegers) is the value encoding/json decodes from the body (with
// integers written plainly), and no such body fails to bind. Every body of an observation batch
// binds from the value, without a second decoding.
func TestValidatedValueBindsAsTheBody(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	strict := reflect.TypeFor[api.StrictServerInterface]()
	bodies := []string{
		`{"batch_id":"b-1","observations":[{"observed_at":"2026-12-01T00:00:00+02:00","kind":"host.facts","data":{"a":[1,2.50,{"b":null}],"c":"\u00e9<>&","d":12345678901234567890123}}]}`,
		`{"batch_id":"b-2","observations":[{"observed_at":"2026-12-01T00:00:00.123456789Z","kind":"k","data":{ "spaced" : [ 1 , 2 ] }},{"observed_at":"2026-12-01T00:00:00Z","kind":"k","data":{}}]}`,
	}
	checked, bound := 0, 0
	for _, b := range jsonBodies(spec) {
		method, path, op, mt := b.method, b.path, b.op, b.mt
		m, ok := strict.MethodByName(strings.ToUpper(op.OperationID[:1]) + op.OperationID[1:])
		if !ok {
			t.Fatalf("%s %s: no handler for %s", method, path, op.OperationID)
		}
		field, ok := m.Type.In(1).FieldByName("Body")
		if !ok || field.Type.Kind() != reflect.Pointer {
			t.Fatalf("%s: request object without a JSON body: %v", op.OperationID, m.Type.In(1))
		}
		for _, body := range append(variants(t, mt), bodies...) {
			if !json.Valid([]byte(body)) {
				continue // refused before validation (readBody)
			}
			v, err := openapi3filter.JSONBodyDecoder(strings.NewReader(body), http.Header{}, mt.Schema, nil)
			// As the pipeline's validator judges a body (ValidateRequestBody adds VisitAsRequest).
			if err != nil || mt.Schema.Value.VisitJSON(v, append([]openapi3.SchemaValidationOption{openapi3.VisitAsRequest()}, schemaOptions...)...) != nil {
				continue
			}
			checked++
			value := bindableIntegers(v, mt.Schema)
			want := reflect.New(field.Type.Elem())
			if err := json.Unmarshal([]byte(body), want.Interface()); err != nil {
				// An integer written otherwise (1e5 for an int) is bound as the integer
				// the validator took it for: what decoding it written plainly gives.
				plain := plainIntegers(t, body)
				if plain == body || json.Unmarshal([]byte(plain), want.Interface()) != nil {
					// What the validator passes, its handler must read: never "The request
					// could not be read" for a valid body (a malformed email was, once, and
					// a job result's exit_code beyond int64, before it had bounds).
					t.Errorf("%s, body %s: valid, and the handler's type refuses it: %v", op.OperationID, body, err)
					continue
				}
			}
			got := reflect.New(field.Type.Elem())
			if runtime.BindJSONValue(value, got.Interface()) == nil {
				bound++
			} else if op.OperationID == "submitObservations" {
				t.Errorf("%s, body %s: not bound from the validated value", op.OperationID, body)
			}
			r := httptest.NewRequest(method, path, nil)
			r.Body = boundBody{ReadCloser: io.NopCloser(strings.NewReader(body)), value: value}
			got = reflect.New(field.Type.Elem())
			if err := runtime.BindJSONBody(r, got.Interface()); err != nil {
				t.Errorf("%s, body %s: %v", op.OperationID, body, err)
				continue
			}
			if !reflect.DeepEqual(canonical(t, got.Interface()), canonical(t, want.Interface())) {
				t.Errorf("%s, body %s:\n got  %+v\n want %+v", op.OperationID, body, got.Elem().Interface(), want.Elem().Interface())
			}
		}
	}
	if checked < 200 || bound < checked/2 {
		t.Errorf("%d bodies checked, %d bound from the validated value: too few to mean anything", checked, bound)
	}
	t.Logf("%d bodies bound as decoded, %d from the validated value", checked, bound)
}

// plainIntegers is body with every number that is an integer written otherwise (1e5, 2.0)
// written plainly, as bindableIntegers writes those the schema wants integers.
func plainIntegers(t *testing.T, body string) string {
	t.Helper()
	var v any
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case json.Number:
			return integerText(v)
		case map[string]any:
			for k, m := range v {
				v[k] = walk(m)
			}
		case []any:
			for i, item := range v {
				v[i] = walk(item)
			}
		}
		return v
	}
	before, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	after, err := json.Marshal(walk(v))
	if err != nil {
		t.Fatal(err)
	}
	if string(after) == string(before) {
		return body
	}
	return string(after)
}

// TestIntegerText: where the schema wants an integer, a number that is one written otherwise
// is written plainly, and nothing else is touched (fractions, beyond int64, exponents beyond
// ±40, texts beyond 64 characters, numbers already plain); a number where the schema wants a
// number is left as written.
func TestIntegerText(t *testing.T) {
	for in, want := range map[string]string{
		"1e2": "100", "1E2": "100", "1e+2": "100", "100.0": "100", "-2.50e1": "-25", "25000e-1": "2500",
		"0.0": "0", "-0.0": "0", "1e40": "1e40", "9.223372036854775807e18": "9223372036854775807",
		"9.223372036854775808e18": "9.223372036854775808e18", "1.5": "1.5", "1e-2": "1e-2", "1e41": "1e41",
		"1e-41": "1e-41", "100": "100", "-0": "-0", "1" + strings.Repeat("0", 18) + ".0": "1" + strings.Repeat("0", 18),
		"1." + strings.Repeat("0", 63): "1." + strings.Repeat("0", 63), "1e99999999999999999999": "1e99999999999999999999",
	} {
		if got := integerText(json.Number(in)); string(got) != want {
			t.Errorf("integerText(%s) = %s, want %s", in, got, want)
		}
	}
	schema := openapi3.NewObjectSchema().WithProperty("i", openapi3.NewInt64Schema()).WithProperty("n", openapi3.NewFloat64Schema()).
		WithProperty("list", openapi3.NewArraySchema().WithItems(openapi3.NewIntegerSchema())).
		WithAdditionalProperties(openapi3.NewIntegerSchema()).NewRef()
	v, err := openapi3filter.JSONBodyDecoder(strings.NewReader(`{"i":1e2,"n":1e2,"list":[2.0,2.5],"other":3.0}`), http.Header{}, schema, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"i": json.Number("100"), "n": json.Number("1e2"), "list": []any{json.Number("2"), json.Number("2.5")}, "other": json.Number("3")}
	if got := bindableIntegers(v, schema); !reflect.DeepEqual(got, want) {
		t.Errorf("bindableIntegers = %#v; want %#v", got, want)
	}
}

// canonical is v as JSON decodes it again (numbers as written): the bound value's free-form text
// is the body's without its white space and with <, > and & escaped, the same JSON.
func canonical(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRequestDefaults: the validator sets no defaults (SkipSettingDefaults), which could change
// its verdict only where a required property has a default (setting it would satisfy the
// requirement): no JSON request body has one (the others are streamed, not validated).
func TestRequestDefaults(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[*openapi3.Schema]bool{}
	var walk func(where string, s *openapi3.SchemaRef)
	walk = func(where string, s *openapi3.SchemaRef) {
		if s == nil || s.Value == nil || seen[s.Value] {
			return
		}
		seen[s.Value] = true
		for _, name := range s.Value.Required {
			if p := s.Value.Properties[name]; p != nil && p.Value != nil && p.Value.Default != nil {
				t.Errorf("%s.%s is required and has a default", where, name)
			}
		}
		for name, p := range s.Value.Properties {
			walk(where+"."+name, p)
		}
		walk(where+"[]", s.Value.Items)
		walk(where+".*", s.Value.AdditionalProperties.Schema)
		for _, list := range []openapi3.SchemaRefs{s.Value.OneOf, s.Value.AnyOf, s.Value.AllOf} {
			for _, c := range list {
				walk(where, c)
			}
		}
		walk(where, s.Value.Not)
	}
	for _, b := range jsonBodies(spec) {
		walk(b.method+" "+b.path, b.mt.Schema)
	}
	if len(seen) < 10 {
		t.Errorf("walked %d schemas: too few to mean anything", len(seen))
	}
}

// TestCanonicalBodyIsCanonicalJSON: the idempotency digest's body written from the validated
// value (canonicalBody) is, byte for byte, what canonicalJSON makes of the body's text, for every
// request schema's variants and bodies of every shape: whole (a value decoded without a schema)
// always; with the schema's value, except where an integer was written plainly
// (bindableIntegers), and then only in that number's spelling.
func TestCanonicalBodyIsCanonicalJSON(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	extra := []string{
		`{"batch_id":"b","observations":[{"observed_at":"2026-12-01T00:00:00Z","kind":"k","data":{"z":1,"a":{"y":[1,{"d":2,"c":3}],"x":"<&>"}}}]}`,
		`{"s":"\u2028\u2029 \u007f \u0000 \b\f\n\r\t \" \\ / é 😀 \ud83d\ude00"}`, "\"\xff\xfe a \xed\xa0\x80\"",
		`[1,-0,1.50,1e5,-2E-3,12345678901234567890123]`, `{"":{"":[]}}`, `null`, `true`, `"x"`,
		"{\n  \"b\": [ 1, 2 ],\n  \"\\u0061\": 1\n}\n", // TestRequestDigest's bodies that read alike
	}
	whole, withSchema, respelled := 0, 0, 0
	for _, b := range jsonBodies(spec) {
		for _, body := range append(variants(t, b.mt), extra...) {
			want := canonicalJSON([]byte(body))
			v, err := openapi3filter.JSONBodyDecoder(strings.NewReader(body), http.Header{}, nil, nil)
			if err != nil || v == nil {
				continue
			}
			whole++
			if got := canonicalBody([]byte(body), v); !bytes.Equal(got, want) {
				t.Errorf("%s: %s\n  from the value: %s\n  from the text:  %s", b.op.OperationID, body, got, want)
			}
			withSchema++
			got := canonicalBody([]byte(body), bindableIntegers(v, b.mt.Schema))
			if bytes.Equal(got, want) {
				continue
			}
			respelled++
			if !sameNumbers(t, got, want) {
				t.Errorf("%s: %s\n  from the value: %s\n  from the text:  %s", b.op.OperationID, body, got, want)
			}
		}
	}
	if whole < 1000 || withSchema < 1000 || respelled == 0 {
		t.Errorf("%d bodies compared whole, %d with their schema (%d with an integer respelled): the spec's bodies were not all read", whole, withSchema, respelled)
	}
}

// sameNumbers reports whether two JSON texts hold the same value, numbers compared by value.
func sameNumbers(t *testing.T, a, b []byte) bool {
	t.Helper()
	decode := func(text []byte) any {
		var v any
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		return v
	}
	var same func(x, y any) bool
	same = func(x, y any) bool {
		switch x := x.(type) {
		case json.Number:
			y, ok := y.(json.Number)
			if !ok {
				return false
			}
			rx, okx := new(big.Rat).SetString(string(x))
			ry, oky := new(big.Rat).SetString(string(y))
			return okx && oky && rx.Cmp(ry) == 0
		case map[string]any:
			y, ok := y.(map[string]any)
			if !ok || len(x) != len(y) {
				return false
			}
			for k, v := range x {
				if w, ok := y[k]; !ok || !same(v, w) {
					return false
				}
			}
			return true
		case []any:
			y, ok := y.([]any)
			if !ok || len(x) != len(y) {
				return false
			}
			for i := range x {
				if !same(x[i], y[i]) {
					return false
				}
			}
			return true
		}
		return reflect.DeepEqual(x, y)
	}
	return same(decode(a), decode(b))
}
