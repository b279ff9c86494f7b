package pipeline

import (
	"regexp"
	"strings"
	"unicode/utf16"

	"github.com/getkin/kin-openapi/openapi3"
)

// plainObject is a request body's schema that validate can judge without the validator: a JSON
// object with no other properties than those named, each a string constrained by at most a
// pattern, a minLength and a maxLength, some required. A body that decodes (decodeFor, as the
// validator's decoder decodes it) to such an object, each value a string within its
// constraints, counted and matched as the validator counts and matches, is valid; any other
// body goes to the validator, which says what is wrong with it or passes it.
// FuzzPlainBodyIsTheValidators holds the two to the same answer on every body plainObject
// passes, for every such operation of the spec. Half a create's validation time was the
// validator's walk of a two-field schema.
type plainObject struct {
	schema     *openapi3.SchemaRef // the body's, for decodeFor
	properties map[string]plainString
	required   []string
}

// plainString is one property's constraints.
type plainString struct {
	minLength uint64
	maxLength *uint64
	pattern   *regexp.Regexp // nil: none
}

// newPlainObject returns rb's schema as a plainObject, or nil if it is not one: a body
// described by anything else (another media type besides JSON, an encoding, composition, a
// nullable or read-only property, a format, an enum...) is the validator's to judge.
func newPlainObject(rb *openapi3.RequestBodyRef) *plainObject {
	if rb == nil || rb.Value == nil || len(rb.Value.Content) != 1 {
		return nil
	}
	mt := rb.Value.Content["application/json"]
	if mt == nil || len(mt.Encoding) > 0 || mt.Schema == nil || mt.Schema.Value == nil {
		return nil
	}
	s := *mt.Schema.Value
	if s.Type == nil || !s.Type.Is(openapi3.TypeObject) || !closed(s.AdditionalProperties) || !uncomposed(&s) {
		return nil
	}
	p := &plainObject{schema: mt.Schema, properties: map[string]plainString{}, required: s.Required}
	for name, ref := range s.Properties {
		if ref == nil || ref.Value == nil {
			return nil
		}
		ps, ok := newPlainString(*ref.Value)
		if !ok {
			return nil
		}
		p.properties[name] = ps
	}
	// What is left once the constraints judged here are set aside must be nothing.
	s.Type, s.Properties, s.Required, s.AdditionalProperties = nil, nil, nil, openapi3.AdditionalProperties{}
	s.Title, s.Description, s.Example, s.Extensions = "", "", nil, nil
	if !s.IsEmpty() {
		return nil
	}
	return p
}

// closed reports whether additionalProperties is false.
func closed(ap openapi3.AdditionalProperties) bool {
	return ap.Has != nil && !*ap.Has && ap.Schema == nil
}

// uncomposed reports whether s has none of the keywords that combine schemas (IsEmpty counts
// such a keyword of empty schemas as nothing, which oneOf of two is not).
func uncomposed(s *openapi3.Schema) bool {
	return len(s.OneOf) == 0 && len(s.AnyOf) == 0 && len(s.AllOf) == 0 && s.Not == nil &&
		s.If == nil && s.Then == nil && s.Else == nil && s.Discriminator == nil
}

func newPlainString(s openapi3.Schema) (plainString, bool) {
	if s.Type == nil || !s.Type.Is(openapi3.TypeString) || !uncomposed(&s) {
		return plainString{}, false
	}
	ps := plainString{minLength: s.MinLength, maxLength: s.MaxLength}
	if s.Pattern != "" {
		// The validator rewrites \uXXXX before it compiles a pattern: such a pattern is its alone.
		if strings.Contains(s.Pattern, `\u`) {
			return plainString{}, false
		}
		re, err := regexp.Compile(s.Pattern)
		if err != nil {
			return plainString{}, false
		}
		ps.pattern = re
	}
	s.Type, s.Pattern, s.MinLength, s.MaxLength = nil, "", 0, nil
	s.Title, s.Description, s.Example, s.Extensions = "", "", nil, nil
	return ps, s.IsEmpty()
}

// passes reports whether body is plainly valid, with the value the validator would pass.
func (p *plainObject) passes(body []byte) (map[string]any, bool) {
	v, ok := decodeFor(body, p.schema)
	if !ok {
		return nil, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	for name, value := range m {
		ps, known := p.properties[name]
		s, isString := value.(string)
		if !known || !isString || !ps.passes(s) {
			return nil, false
		}
	}
	for _, name := range p.required {
		if _, ok := m[name]; !ok {
			return nil, false
		}
	}
	return m, true
}

func (ps plainString) passes(s string) bool {
	if ps.minLength != 0 || ps.maxLength != nil {
		// Counted with the validator's own loop (which means UTF-16 code units; a rune ranged
		// from a Go string is never a surrogate, so it counts code points).
		n := uint64(0)
		for _, r := range s {
			if utf16.IsSurrogate(r) {
				n += 2
			} else {
				n++
			}
		}
		if n < ps.minLength || (ps.maxLength != nil && n > *ps.maxLength) {
			return false
		}
	}
	return ps.pattern == nil || ps.pattern.MatchString(s)
}
