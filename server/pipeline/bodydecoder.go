package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/oapi-codegen/runtime"
)

// The validator's JSON body decoder. kin-openapi's own decodes the whole body into maps and
// slices before it checks them against the schema; most of an observation batch is the
// observations' data, a free-form object (any object is valid) that the schema never looks
// into. This decoder follows the schema while it decodes, and where the schema accepts any
// object it hands the validator, in place of the value, an object holding only the value's JSON
// text (freeFormText): the verdict is the same (nothing inside a free-form object can fail it),
// without a map, a string and a number per field of data. The value the validator passed is
// then the handler's (validate, boundValue): the body is decoded once. Keys appearing twice and
// text PostgreSQL cannot store are checked on the raw body before (duplicateKey, unstorable), so
// nothing the validator never saw goes unchecked. Whenever the fast path cannot decode a value
// (malformed JSON, trailing data), the body is decoded by kin-openapi's decoder, so errors read
// as they did. The generated code's JSON codec is bindingCodec, so that a free-form object's
// text reaches its handler without being scanned again (validatedJSON).
func init() {
	openapi3filter.RegisterBodyDecoder("application/json", decodeJSONBody)
	runtime.SetJSONCodec(bindingCodec{})
}

func decodeJSONBody(body io.Reader, h http.Header, schema *openapi3.SchemaRef, enc openapi3filter.EncodingFn) (any, error) {
	raw, err := readAllOf(body)
	if err != nil {
		return nil, &openapi3filter.ParseError{Kind: openapi3filter.KindInvalidFormat, Cause: err}
	}
	if v, ok := decodeFor(raw, schema); ok {
		return v, nil
	}
	return openapi3filter.JSONBodyDecoder(bytes.NewReader(raw), h, schema, enc)
}

// readAllOf is io.ReadAll, in one allocation of the right size when r is a bytes.Reader (the
// validator hands its decoder the body that way) instead of a buffer grown and copied.
func readAllOf(r io.Reader) ([]byte, error) {
	br, ok := r.(*bytes.Reader)
	if !ok {
		return io.ReadAll(r)
	}
	raw := make([]byte, br.Len())
	_, err := io.ReadFull(br, raw)
	return raw, err
}

// decodeFor decodes the JSON value raw as kin-openapi's decoder does (numbers as json.Number),
// except that a value its schema accepts whatever object it is comes back as an object holding
// its JSON text only (freeFormText), and a number where it wants an integer is written as one
// when it is one (integerText).
// It reads raw once, token by token (jsontext); a name twice is taken as encoding/json takes it
// (the last wins; the pipeline refused such a body before, duplicateKey). ok is false when raw is
// not one JSON value, or holds what jsontext refuses and encoding/json takes (invalid UTF-8, a
// lone surrogate escape): the caller then decodes it the validator's own way.
func decodeFor(raw []byte, ref *openapi3.SchemaRef) (any, bool) {
	// A bytes.Buffer is parsed in place (jsontext copies any other reader into a buffer of its
	// own); the decoder only reads it.
	dec := decoders.Get().(*jsontext.Decoder) //nolint:forcetypeassert // decoders holds nothing else
	defer releaseDecoder(dec)
	dec.Reset(bytes.NewBuffer(raw), jsontext.AllowDuplicateNames(true))
	v, err := decodeValue(dec, raw, ref)
	if err != nil {
		return nil, false
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return nil, false // more than one value
	}
	return v, true
}

// decoders are decodeFor's, reused (Reset) from one body to the next.
var decoders = sync.Pool{New: func() any { return jsontext.NewDecoder(noBody) }}

// noBody is what a decoder waiting in decoders reads: nothing (it is never read), so that it
// does not hold on to the last body it decoded.
var noBody = bytes.NewBuffer(nil)

func releaseDecoder(dec *jsontext.Decoder) {
	dec.Reset(noBody)
	decoders.Put(dec)
}

func decodeValue(dec *jsontext.Decoder, raw []byte, ref *openapi3.SchemaRef) (any, error) {
	var s *openapi3.Schema
	if ref != nil {
		s = ref.Value
	}
	switch dec.PeekKind() {
	case '{':
		if s == nil || composed(s) {
			return decodeAll(dec)
		}
		if freeForm(s) {
			v, err := dec.ReadValue()
			if err != nil {
				return nil, err
			}
			// The value's own bytes in the body (v is the decoder's, valid until its next read).
			end := dec.InputOffset()
			return map[string]any{"": freeFormText(raw[end-int64(len(v)) : end : end])}, nil
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		out := map[string]any{}
		for dec.PeekKind() != '}' {
			name, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			k := name.String()
			child := s.Properties[k]
			if child == nil {
				child = s.AdditionalProperties.Schema // nil: decoded whole
			}
			if out[k], err = decodeValue(dec, raw, child); err != nil {
				return nil, err
			}
		}
		_, err := dec.ReadToken()
		return out, err
	case '[':
		if s == nil || composed(s) || s.Items == nil {
			return decodeAll(dec)
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		out := []any{}
		for dec.PeekKind() != ']' {
			v, err := decodeValue(dec, raw, s.Items)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		_, err := dec.ReadToken()
		return out, err
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case '"':
		return tok.String(), nil
	case 't', 'f':
		return tok.Bool(), nil
	case 'n':
		return nil, nil
	case '0':
		n := json.Number(tok.String())
		if s != nil && s.Type.Is(openapi3.TypeInteger) {
			n = integerText(n)
		}
		return n, nil
	}
	return nil, fmt.Errorf("unexpected %v", tok.Kind())
}

// integerText is n, a number where the schema wants an integer, written as an integer when it
// is one written otherwise (1e2, 100.0, 10000e-2): the validator takes such a number for the
// integer it is (as JSON Schema does), and the handler's integer field binds the same value,
// where encoding/json would refuse the text. Anything else is left as written: a number with a
// fraction, beyond int64, longer than 64 characters or with an exponent beyond ±40 (the
// validator or the binding refuses it, as they did).
func integerText(n json.Number) json.Number {
	text := string(n)
	if len(text) > 64 || !strings.ContainsAny(text, ".eE") {
		return n
	}
	if _, exp, ok := strings.Cut(strings.ToLower(text), "e"); ok {
		if e, err := strconv.Atoi(exp); err != nil || e < -40 || e > 40 {
			return n
		}
	}
	r, ok := new(big.Rat).SetString(text)
	if !ok || !r.IsInt() || !r.Num().IsInt64() {
		return n
	}
	return json.Number(strconv.FormatInt(r.Num().Int64(), 10))
}

// freeFormText is a free-form object's JSON text, as it is in the body. The decoder hands the
// validator the object {"": freeFormText} in the value's place, which every free-form schema
// accepts; boundValue then puts the text back where the object was. No JSON decodes to this
// type, so the object cannot be mistaken for one a client sent.
type freeFormText []byte

// boundValue is v, a value the validator passed, as the generated handlers bind it
// (runtime.BindJSONBody): each free-form object the decoder left as {"": freeFormText} becomes its
// JSON text (validatedJSON), which binds to a json.RawMessage field as the text itself. v is
// changed in place.
func boundValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if t, ok := v[""].(freeFormText); ok && len(v) == 1 {
			return validatedJSON(t)
		}
		for k, member := range v {
			v[k] = boundValue(member)
		}
	case []any:
		for i, item := range v {
			v[i] = boundValue(item)
		}
	}
	return v
}

// validatedJSON is a free-form object's JSON text in the value a handler binds (boundValue): the
// body's own bytes, which the decoder read whole as one JSON value. The binder gives a
// json.RawMessage field its value by encoding it (runtime.JSONMarshal) and handing the result to
// the field's UnmarshalJSON; encoding/json would scan the text again and compact it, which for an
// observation batch cost more than the rest of its binding. bindingCodec hands the text over as it
// is, and anything else encodes it as a json.RawMessage (MarshalJSON): the same JSON, compacted.
type validatedJSON []byte

// MarshalJSON implements json.Marshaler: the text (encoding/json checks and compacts it).
func (v validatedJSON) MarshalJSON() ([]byte, error) { return v, nil }

// bindingCodec is encoding/json, as the runtime's default codec, except that a validatedJSON
// value (only boundValue makes them) encodes as its text, unscanned. It is the process's JSON
// codec for the generated code (runtime.SetJSONCodec, in init): the server's handlers and the
// generated client alike, which never see a validatedJSON.
type bindingCodec struct{}

func (bindingCodec) Marshal(v any) ([]byte, error) {
	if t, ok := v.(validatedJSON); ok {
		return t, nil
	}
	return json.Marshal(v)
}
func (bindingCodec) Unmarshal(data []byte, v any) error     { return json.Unmarshal(data, v) }
func (bindingCodec) MarshalWrite(w io.Writer, v any) error  { return json.NewEncoder(w).Encode(v) }
func (bindingCodec) UnmarshalRead(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

var _ runtime.StreamingJSONCodec = bindingCodec{}

// decodeAll decodes the next value whole, as kin-openapi's decoder does.
func decodeAll(dec *jsontext.Decoder) (any, error) {
	raw, err := dec.ReadValue()
	if err != nil {
		return nil, err
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	return v, d.Decode(&v)
}

// composed reports whether s combines other schemas, or compares or matches whole values
// (uniqueItems, enum, const, and OpenAPI 3.1's keywords over properties and items), which an
// emptied free-form part inside could change: the fast path leaves such a value to the
// validator whole.
func composed(s *openapi3.Schema) bool {
	return len(s.OneOf) > 0 || len(s.AnyOf) > 0 || len(s.AllOf) > 0 || s.Not != nil || s.If != nil ||
		s.Discriminator != nil || s.UniqueItems || len(s.Enum) > 0 || s.Const != nil ||
		len(s.PatternProperties) > 0 || len(s.DependentSchemas) > 0 || len(s.PrefixItems) > 0 ||
		s.Contains != nil || s.PropertyNames != nil || s.UnevaluatedItems != (openapi3.BoolSchema{}) ||
		s.UnevaluatedProperties != (openapi3.BoolSchema{})
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
	if len(c.Properties) == 0 {
		c.Properties = nil // no properties, however written
	}
	free := reflect.DeepEqual(c, openapi3.Schema{Type: &openapi3.Types{openapi3.TypeObject}})
	freeForms.Store(s, free)
	return free
}
