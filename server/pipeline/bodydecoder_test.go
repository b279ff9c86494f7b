package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/oapi-codegen/runtime"

	"renga.dev/renga/gen/api"
)

// TestBodyDecoderJudgesAsTheFullDecode: for every JSON request body of the spec, the example and
// variants of it (each property replaced by values of every JSON type, objects nested in
// free-form data, unknown properties, malformed JSON, trailing data), validating what
// decodeJSONBody makes of the body gives exactly the field errors validating kin-openapi's full
// decode gives.
func TestBodyDecoderJudgesAsTheFullDecode(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	// What the decoder is for: an observation's data is not decoded to be validated.
	if data := spec.Components.Schemas["ObservationIn"].Value.Properties["data"].Value; !freeForm(data) {
		t.Errorf("an observation's data is not a free-form object to the decoder: %+v", data)
	}
	if freeForm(spec.Components.Schemas["ObservationIn"].Value) {
		t.Error("an observation itself is taken for a free-form object")
	}
	checked, fast := 0, 0
	for _, b := range jsonBodies(spec) {
		method, path, mt := b.method, b.path, b.mt
		for _, body := range variants(t, mt) {
			want := verdict(t, mt.Schema, body, openapi3filter.JSONBodyDecoder)
			got := verdict(t, mt.Schema, body, decodeJSONBody)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s, body %s:\n got  %v\n want %v", method, path, body, got, want)
			}
			if _, ok := decodeFor([]byte(body), mt.Schema); ok {
				fast++
			}
			checked++
		}
	}
	if checked < 500 || fast < checked/2 {
		t.Errorf("checked %d bodies, %d on the fast path: too few to mean anything", checked, fast)
	}
	t.Logf("%d bodies judged alike, %d of them decoded on the fast path", checked, fast)
}

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

// verdict is what the pipeline would report of body: the sorted field errors, or the parse
// failure.
func verdict(t *testing.T, schema *openapi3.SchemaRef, body string, decode openapi3filter.BodyDecoder) []string {
	t.Helper()
	v, err := decode(bytes.NewReader([]byte(body)), http.Header{}, schema, nil)
	if err != nil {
		return []string{"parse error"}
	}
	var out []string
	for _, fe := range fieldErrors(schema.Value.VisitJSON(v, openapi3.MultiErrors()), "body") {
		out = append(out, fmt.Sprintf("%s: %s", fe.Field, fe.Message))
	}
	sort.Strings(out)
	return out
}

func sortedKeys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestBodyDecoderDecodesAsTheFullDecode: where no free-form object is involved, the fast path's
// values are exactly kin-openapi's (strings with and without escapes, numbers as written,
// literals, nested arrays and objects).
func TestBodyDecoderDecodesAsTheFullDecode(t *testing.T) {
	schema := openapi3.NewObjectSchema().
		WithProperty("s", openapi3.NewStringSchema()).
		WithProperty("n", openapi3.NewFloat64Schema()).
		WithProperty("list", openapi3.NewArraySchema().WithItems(openapi3.NewStringSchema())).
		WithProperty("inner", openapi3.NewObjectSchema().WithProperty("x", openapi3.NewStringSchema())).
		NewRef()
	for _, body := range []string{
		`{"s":"plain","n":1,"list":["a","b\"c","\u00e9"],"inner":{"x":"y","other":[1,{"z":null}]}}`,
		`{"s":"a\\b\n\t\u0041","n":-0.5e-7,"list":[],"inner":{}}`,
		`{"s":"été","n":123456789012345678901234567890,"extra":true,"more":false,"nothing":null}`,
		` { "s" : "spaced" , "list" : [ "x" , "y" ] } `,
		`"top"`, `"t\u00f6p"`, `12`, `true`, `null`, `[1,"a",{"b":[]}]`,
	} {
		got, ok := decodeFor([]byte(body), schema)
		if !ok {
			t.Errorf("%s: not decoded", body)
			continue
		}
		want, err := openapi3filter.JSONBodyDecoder(bytes.NewReader([]byte(body)), http.Header{}, schema, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got  %#v\n want %#v", body, got, want)
		}
	}
}

// BenchmarkBodyDecoder: a batch of one ~1 KB observation (as bench/ sends), decoded for the
// validator by kin-openapi's decoder and by decodeJSONBody.
func BenchmarkBodyDecoder(b *testing.B) {
	spec, err := api.GetSpec()
	if err != nil {
		b.Fatal(err)
	}
	schema := spec.Components.Schemas["ObservationBatch"]
	facts := map[string]any{"hostname": "web-1", "uptime_seconds": 86400, "kernel": "6.1.0-28-amd64",
		"cpus": 2, "memory_bytes": 25769803776, "disks": []any{map[string]any{"device": "/dev/vda1", "size_bytes": 107374182400, "used_bytes": 33285996544}},
		"interfaces": []any{map[string]any{"name": "eth0", "mtu": 1500, "addresses": []any{"10.0.0.12/24", "fe80::1/64"}}},
		"packages":   map[string]any{"openssl": "3.0.15-1", "postgresql-15": "15.20-0", "nginx": "1.22.1-9", "curl": "7.88.1-10"},
		"load":       []any{0.12, 0.33, 0.41}, "labels": map[string]any{"env": "production", "team": "platform", "region": "eu1"}}
	body, _ := json.Marshal(map[string]any{"batch_id": "b-1", "observations": []any{
		map[string]any{"observed_at": "2026-12-01T00:00:00Z", "kind": "host.facts", "data": facts}}})
	for _, d := range []struct {
		name   string
		decode openapi3filter.BodyDecoder
	}{{"kin-openapi", openapi3filter.JSONBodyDecoder}, {"schema-guided", decodeJSONBody}} {
		b.Run(d.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := d.decode(bytes.NewReader(body), http.Header{}, schema, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestBodyDecoderKeepsWholeValuesWhereTheyAreCompared: uniqueItems, enum and const compare
// whole values, free-form parts included; the fast path must not empty those parts.
func TestBodyDecoderKeepsWholeValuesWhereTheyAreCompared(t *testing.T) {
	free := openapi3.NewObjectSchema() // no properties: any object
	unique := openapi3.NewArraySchema().WithItems(free).WithUniqueItems(true)
	enum := openapi3.NewObjectSchema().WithProperty("d", free)
	enum.Enum = []any{map[string]any{"d": map[string]any{"a": json.Number("1")}}}
	withConst := openapi3.NewObjectSchema().WithProperty("d", free)
	withConst.Const = map[string]any{"d": map[string]any{"a": json.Number("1")}}
	for _, c := range []struct {
		schema *openapi3.Schema
		bodies []string
	}{
		{unique, []string{`[{"a":1},{"a":2}]`, `[{"a":1},{"a":1}]`}},
		{enum, []string{`{"d":{"a":1}}`, `{"d":{"a":2}}`}},
		{withConst, []string{`{"d":{"a":1}}`, `{"d":{"a":2}}`}},
	} {
		if !freeForm(free) {
			t.Fatal("an object schema without properties is not free-form to the decoder")
		}
		for _, body := range c.bodies {
			want := verdict(t, c.schema.NewRef(), body, openapi3filter.JSONBodyDecoder)
			if got := verdict(t, c.schema.NewRef(), body, decodeJSONBody); !reflect.DeepEqual(got, want) {
				t.Errorf("%s:\n got  %v\n want %v", body, got, want)
			}
		}
	}
}

// TestValidatedValueBindsAsTheBody: for every JSON request body of the spec, each of its
// variants (TestBodyDecoderJudgesAsTheFullDecode's) that the validator passes reaches its
// handler as decoding the body would give it: what runtime.BindJSONBody binds from the value
// validate leaves (boundValue of the decoder's, free-form objects back as their text) is the
// value encoding/json decodes from the body (with integers written plainly), and no such body
// fails to bind. Every body of an observation batch binds from the value, without a second
// decoding (the point of keeping it); a free-form object bound to a map (a settings write's
// ignored locked) falls back to decoding, which the binder does itself.
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
			v, ok := decodeFor([]byte(body), mt.Schema)
			// As the pipeline's validator judges a body (ValidateRequestBody adds VisitAsRequest).
			if !ok || mt.Schema.Value.VisitJSON(v, append([]openapi3.SchemaValidationOption{openapi3.VisitAsRequest()}, schemaOptions...)...) != nil {
				continue
			}
			checked++
			value := boundValue(v)
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
// written plainly, as decodeFor writes those the schema wants integers.
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
		WithAdditionalProperties(openapi3.NewIntegerSchema()).NewRef()
	v, ok := decodeFor([]byte(`{"i":1e2,"n":1e2,"other":3.0}`), schema)
	want := map[string]any{"i": json.Number("100"), "n": json.Number("1e2"), "other": json.Number("3")}
	if !ok || !reflect.DeepEqual(v, want) {
		t.Errorf("decodeFor = %#v, %v; want %#v", v, ok, want)
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
// always; with the schema's value, except where the decoder wrote an integer plainly
// (integerText), and then only in that number's spelling.
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
			if v, ok := decodeFor([]byte(body), nil); ok {
				whole++
				if got := canonicalBody([]byte(body), boundValue(v)); !bytes.Equal(got, want) {
					t.Errorf("%s: %s\n  from the value: %s\n  from the text:  %s", b.op.OperationID, body, got, want)
				}
			}
			v, ok := decodeFor([]byte(body), b.mt.Schema)
			if !ok {
				continue
			}
			withSchema++
			bound := boundValue(v)
			// Written from the value, not from a second reading of the text (canonicalBody's
			// fallback, which gives the same bytes and would hide a kind of value it lost).
			if _, ok := appendCanonical(nil, bound); !ok {
				t.Errorf("%s: %s: the validated value is not written canonically", b.op.OperationID, body)
			}
			got := canonicalBody([]byte(body), bound)
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

// TestBindingCodec: the generated code's JSON codec is encoding/json's, except that a free-form
// object's text from the validated value (validatedJSON) reaches a json.RawMessage field as the
// body held it, unscanned; encoded any other way, it is the same JSON as a json.RawMessage.
func TestBindingCodec(t *testing.T) {
	text := `{ "hostname" : "web-1", "n": [1, 2.50] }`
	var obs api.ObservationIn
	value := map[string]any{"kind": "host.facts", "observed_at": "2026-12-01T00:00:00Z", "data": validatedJSON(text)}
	if err := runtime.BindJSONValue(value, &obs); err != nil {
		t.Fatal(err)
	}
	if string(obs.Data) != text || obs.Kind != "host.facts" {
		t.Errorf("bound %q %q, want the text as sent", obs.Data, obs.Kind)
	}
	for _, v := range []any{validatedJSON(text), map[string]any{"data": validatedJSON(text)}} {
		got, err := json.Marshal(v)
		want, _ := json.Marshal(replaceValidated(v))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("json.Marshal(%v) = %s %v, want %s", v, got, err, want)
		}
	}
	// Everything else as encoding/json's: bytes, and streams as its Encoder and Decoder.
	for _, v := range []any{map[string]any{"a": json.RawMessage(` [ 1 ] `), "b": "<&>"}, api.Home{Home: "https://renga.test/x?a=1&b=2"}, []byte("raw"), nil} {
		got, err := runtime.JSONMarshal(v)
		want, werr := json.Marshal(v)
		if !bytes.Equal(got, want) || (err == nil) != (werr == nil) {
			t.Errorf("JSONMarshal(%v) = %s, want %s", v, got, want)
		}
		var w1, w2 bytes.Buffer
		err = runtime.JSONMarshalWrite(&w1, v)
		werr = json.NewEncoder(&w2).Encode(v)
		if !bytes.Equal(w1.Bytes(), w2.Bytes()) || (err == nil) != (werr == nil) {
			t.Errorf("JSONMarshalWrite(%v) = %q, want %q", v, w1.Bytes(), w2.Bytes())
		}
	}
	var got, want map[string]any
	if err := runtime.JSONUnmarshalRead(strings.NewReader(`{"a": 1e400}`), &got); err == nil {
		t.Errorf("a number beyond float64 decoded: %v", got)
	}
	if err := runtime.JSONUnmarshal([]byte(`{"a":[1,"x"]}`), &got); err != nil || json.Unmarshal([]byte(`{"a":[1,"x"]}`), &want) != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("JSONUnmarshal: %v %v, want %v", got, err, want)
	}
}

// replaceValidated is v with each validatedJSON as a json.RawMessage.
func replaceValidated(v any) any {
	switch v := v.(type) {
	case validatedJSON:
		return json.RawMessage(v)
	case map[string]any:
		out := map[string]any{}
		for k, m := range v {
			out[k] = replaceValidated(m)
		}
		return out
	}
	return v
}

// BenchmarkBindObservationBatch: binding a ~1 KB observation batch from the value the validator
// passed, as the generated handler does (runtime.BindJSONBody).
func BenchmarkBindObservationBatch(b *testing.B) {
	data := `{"hostname":"web-1","os":"linux","kernel":"6.1.0","uptime_seconds":86400,"load":[0.12,0.34,0.56],` +
		`"interfaces":[{"name":"eth0","addresses":["10.0.0.1","fe80::1"],"mtu":1500},{"name":"lo","addresses":["127.0.0.1","::1"],"mtu":65536}],` +
		`"packages":{"openssl":"3.0.11","nginx":"1.22.1","postgresql":"15.5","go":"1.26","kernel":"6.1.0-13-amd64"},` +
		`"disks":[{"device":"/dev/sda1","mount":"/","size_bytes":107374182400,"used_bytes":53687091200},{"device":"/dev/sdb1","mount":"/data","size_bytes":1099511627776,"used_bytes":219902325555}],` +
		`"labels":{"team":"platform","env":"production","region":"eu-west-1","rack":"r12","owner":"ops@example.com"}}`
	body := []byte(`{"batch_id":"b-1","observations":[{"observed_at":"2026-12-01T00:00:00Z","kind":"host.facts","data":` + data + `}]}`)
	spec, err := api.GetSpec()
	if err != nil {
		b.Fatal(err)
	}
	mt := spec.Paths.Find("/api/v1/agent/observations").Post.RequestBody.Value.Content["application/json"]
	b.ReportAllocs()
	for b.Loop() {
		v, ok := decodeFor(body, mt.Schema)
		if !ok {
			b.Fatal("not decoded")
		}
		r := httptest.NewRequest(http.MethodPost, "/api/v1/agent/observations", nil)
		r.Body = boundBody{ReadCloser: io.NopCloser(bytes.NewReader(body)), value: boundValue(v)}
		var batch api.ObservationBatch
		if err := runtime.BindJSONBody(r, &batch); err != nil || len(batch.Observations) != 1 {
			b.Fatal(err)
		}
	}
}

// TestReadAllOfIsReadAll: what readAllOf reads is io.ReadAll's, from a bytes.Reader partly read
// before, empty, or any other reader.
func TestReadAllOfIsReadAll(t *testing.T) {
	body := []byte(strings.Repeat(`{"a":1}`, 300))
	for _, skip := range []int{0, 1, len(body) - 1, len(body)} {
		for _, kind := range []string{"bytes.Reader", "other"} {
			var r1, r2 io.Reader = bytes.NewReader(body), bytes.NewReader(body)
			if kind == "other" {
				r1, r2 = io.LimitReader(bytes.NewReader(body), 1<<30), io.LimitReader(bytes.NewReader(body), 1<<30)
			}
			_, _ = io.CopyN(io.Discard, r1, int64(skip))
			_, _ = io.CopyN(io.Discard, r2, int64(skip))
			got, err := readAllOf(r1)
			want, werr := io.ReadAll(r2)
			if !bytes.Equal(got, want) || (err == nil) != (werr == nil) || len(got) != len(body)-skip {
				t.Errorf("%s after %d bytes: %d bytes (%v), want %d (%v)", kind, skip, len(got), err, len(want), werr)
			}
		}
	}
}

// TestDecodeForFromManyGoroutines: decoders are reused across requests (a pool); bodies decoded
// at once, valid and not, each get their own value (under make test's race detector too), and
// a body, parsed in place, is left as it was.
func TestDecodeForFromManyGoroutines(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	schema := spec.Components.Schemas["ObservationBatch"]
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				id := fmt.Sprintf("b-%d-%d", g, i)
				body := []byte(`{"batch_id":"` + id + `","observations":[{"observed_at":"2026-12-01T00:00:00Z","kind":"k","data":{"n":` + strconv.Itoa(i) + `}}]}`)
				if i%3 == 0 {
					if _, ok := decodeFor(body[:len(body)-1], schema); ok {
						t.Errorf("a truncated body decoded")
					}
					continue
				}
				sent := bytes.Clone(body)
				v, ok := decodeFor(body, schema)
				if !bytes.Equal(body, sent) {
					t.Errorf("%s: decoding changed the body: %s", id, body) // it is parsed in place
				}
				m, _ := v.(map[string]any)
				obs, _ := m["observations"].([]any)
				if !ok || m["batch_id"] != id || len(obs) != 1 {
					t.Errorf("%s: %v %v", id, v, ok)
					continue
				}
				data, _ := obs[0].(map[string]any)["data"].(map[string]any)
				if text, _ := data[""].(freeFormText); string(text) != `{"n":`+strconv.Itoa(i)+`}` {
					t.Errorf("%s: data %q", id, text)
				}
			}
		})
	}
	wg.Wait()
}
