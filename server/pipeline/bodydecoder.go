package pipeline

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"sync"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
)

// The validator's JSON body decoder. kin-openapi's own decodes the whole body into maps and
// slices before it checks them against the schema; most of an observation batch is the
// observations' data, a free-form object (any object is valid) that the schema never looks
// into. This decoder follows the schema while it decodes, and where the schema accepts any
// object it hands the validator an empty object in place of the value: the verdict is the same
// (nothing inside a free-form object can fail it), without a map, a string and a number per
// field of data. Keys appearing twice and text PostgreSQL cannot store are checked on the raw
// body before (duplicateKey, unstorable), so nothing the validator never saw goes unchecked.
// Whenever the fast path cannot decode a value (malformed JSON, trailing data), the body is
// decoded by kin-openapi's decoder, so errors read as they did.
func init() {
	openapi3filter.RegisterBodyDecoder("application/json", decodeJSONBody)
}

func decodeJSONBody(body io.Reader, h http.Header, schema *openapi3.SchemaRef, enc openapi3filter.EncodingFn) (any, error) {
	raw, err := io.ReadAll(body)
	if err != nil {
		return nil, &openapi3filter.ParseError{Kind: openapi3filter.KindInvalidFormat, Cause: err}
	}
	if v, ok := decodeFor(raw, schema); ok {
		return v, nil
	}
	return openapi3filter.JSONBodyDecoder(bytes.NewReader(raw), h, schema, enc)
}

// decodeFor decodes the JSON value raw as kin-openapi's decoder does (numbers as json.Number),
// except that a value its schema accepts whatever object it is comes back as an empty object.
// ok is false when raw is not one JSON value.
func decodeFor(raw []byte, ref *openapi3.SchemaRef) (any, bool) {
	if !json.Valid(raw) {
		return nil, false
	}
	return decodeValid(bytes.TrimSpace(raw), ref), true
}

// decodeValid is decodeFor of a valid JSON value without surrounding space.
func decodeValid(raw []byte, ref *openapi3.SchemaRef) any {
	var s *openapi3.Schema
	if ref != nil {
		s = ref.Value
	}
	switch raw[0] {
	case '{':
		if s == nil || composed(s) {
			return decodeAll(raw)
		}
		if freeForm(s) {
			return map[string]any{}
		}
		var fields map[string]json.RawMessage
		_ = json.Unmarshal(raw, &fields) // valid JSON: it decodes
		out := make(map[string]any, len(fields))
		for k, v := range fields {
			child := s.Properties[k]
			if child == nil {
				child = s.AdditionalProperties.Schema // nil: decoded whole below
			}
			out[k] = decodeValid(v, child)
		}
		return out
	case '[':
		if s == nil || composed(s) || s.Items == nil {
			return decodeAll(raw)
		}
		var items []json.RawMessage
		_ = json.Unmarshal(raw, &items)
		out := make([]any, len(items))
		for i, v := range items {
			out[i] = decodeValid(v, s.Items)
		}
		return out
	case '"':
		if in := raw[1 : len(raw)-1]; bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
			return string(in) // no escapes: the text itself
		}
		var v string
		_ = json.Unmarshal(raw, &v)
		return v
	case 't':
		return true
	case 'f':
		return false
	case 'n':
		return nil
	default:
		return json.Number(raw)
	}
}

// decodeAll decodes the valid JSON value raw whole, as kin-openapi's decoder does.
func decodeAll(raw []byte) any {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	_ = dec.Decode(&v)
	return v
}

// composed reports whether s combines other schemas, which the fast path leaves to the validator
// whole.
func composed(s *openapi3.Schema) bool {
	return len(s.OneOf) > 0 || len(s.AnyOf) > 0 || len(s.AllOf) > 0 || s.Not != nil || s.If != nil ||
		s.Discriminator != nil
}

var freeForms sync.Map // *openapi3.Schema -> bool

// freeForm reports whether s accepts every JSON object: type object and no other constraint
// (what only documents the value is ignored).
func freeForm(s *openapi3.Schema) bool {
	if v, ok := freeForms.Load(s); ok {
		free, _ := v.(bool)
		return free
	}
	c := *s
	c.Extensions, c.Origin, c.Title, c.Description, c.Example, c.Examples, c.ExternalDocs = nil, nil, "", "", nil, nil, nil
	c.Deprecated, c.Nullable = false, false
	free := reflect.DeepEqual(c, openapi3.Schema{Type: &openapi3.Types{openapi3.TypeObject}})
	freeForms.Store(s, free)
	return free
}
