package pipeline

import (
	"strings"
	"unicode/utf16"

	"github.com/getkin/kin-openapi/openapi3"
)

// plainObject is a request body's schema that validate can judge without the validator: a JSON
// object with no other properties than those named, each required or not, whose values are
// plain in turn (plainSchema): strings constrained by at most a pattern, lengths and a format
// the validator knows, arrays of plain items within a count, closed objects of plain values, and
// free-form objects. A body that decodes (decodeFor, as the validator's decoder decodes it) to a
// value plainly within its schema, checked, counted and matched as the validator does, is valid;
// any other body goes to the validator, which says what is wrong with it or passes it.
// FuzzPlainBodyIsTheValidators holds the two to the same answer on every body plainObject
// passes, for every such operation of the spec. The validator's walk of a create's two-field
// schema was half its validation time, and of an observation batch's schema a third.
type plainObject = plainSchema

// plainSchema is one value's plain schema.
type plainSchema struct {
	kind byte // plainString, plainArray, plainClosed, plainFreeForm
	// strings
	minLength uint64
	maxLength *uint64
	pattern   *pattern                       // nil: none
	format    openapi3.StringFormatValidator // nil: none
	// arrays
	minItems uint64
	maxItems *uint64
	items    *plainSchema
	// closed objects
	properties map[string]*plainSchema
	required   []string

	schema *openapi3.SchemaRef // the body's, for decodeFor (the body's schema only)
}

const (
	plainString   = 's'
	plainArray    = 'a'
	plainClosed   = 'o'
	plainFreeForm = 'f'
)

// maxPlainDepth bounds the schemas judged plain (a recursive schema is the validator's).
const maxPlainDepth = 8

// newPlainObject returns rb's schema as a plainObject, or nil if it is not one: a body
// described by anything else (another media type besides JSON, an encoding, composition, a
// nullable or read-only property, an enum, a number...) is the validator's to judge.
func newPlainObject(rb *openapi3.RequestBodyRef) *plainObject {
	if rb == nil || rb.Value == nil || len(rb.Value.Content) != 1 {
		return nil
	}
	mt := rb.Value.Content["application/json"]
	if mt == nil || len(mt.Encoding) > 0 || mt.Schema == nil || mt.Schema.Value == nil {
		return nil
	}
	p, ok := newPlainSchema(mt.Schema.Value, 0)
	if !ok || p.kind != plainClosed {
		return nil
	}
	p.schema = mt.Schema
	return p
}

func newPlainSchema(sp *openapi3.Schema, depth int) (*plainSchema, bool) {
	if sp == nil || depth > maxPlainDepth || !uncomposed(sp) {
		return nil, false
	}
	s := *sp
	p := &plainSchema{}
	switch {
	case s.Type == nil:
		return nil, false
	case s.Type.Is(openapi3.TypeString):
		p.kind, p.minLength, p.maxLength = plainString, s.MinLength, s.MaxLength
		if s.Pattern != "" {
			// The validator rewrites \uXXXX before it compiles a pattern: such a pattern is its alone.
			if strings.Contains(s.Pattern, `\u`) {
				return nil, false
			}
			re, err := compilePattern(s.Pattern)
			if err != nil {
				return nil, false
			}
			p.pattern = re
		}
		if s.Format != "" {
			// Only a format the validator checks with its own validator, the same for every
			// validation (schemaOptions add none for it).
			f, ok := openapi3.SchemaStringFormats[s.Format]
			if !ok || s.Format == "email" {
				return nil, false
			}
			p.format = f
		}
		s.Pattern, s.MinLength, s.MaxLength, s.Format = "", 0, nil, ""
	case s.Type.Is(openapi3.TypeArray):
		if s.Items == nil {
			return nil, false
		}
		items, ok := newPlainSchema(s.Items.Value, depth+1)
		if !ok {
			return nil, false
		}
		p.kind, p.minItems, p.maxItems, p.items = plainArray, s.MinItems, s.MaxItems, items
		s.MinItems, s.MaxItems, s.Items = 0, nil, nil
	case s.Type.Is(openapi3.TypeObject) && freeForm(sp):
		p.kind = plainFreeForm
		return p, true
	case s.Type.Is(openapi3.TypeObject) && closed(s.AdditionalProperties):
		p.kind, p.properties, p.required = plainClosed, map[string]*plainSchema{}, s.Required
		for name, ref := range s.Properties {
			if ref == nil {
				return nil, false
			}
			ps, ok := newPlainSchema(ref.Value, depth+1)
			if !ok {
				return nil, false
			}
			p.properties[name] = ps
		}
		s.Properties, s.Required, s.AdditionalProperties = nil, nil, openapi3.AdditionalProperties{}
	default:
		return nil, false
	}
	// What is left once the constraints judged here are set aside must be nothing.
	s.Type, s.Title, s.Description, s.Example, s.Extensions = nil, "", "", nil, nil
	return p, s.IsEmpty()
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

// passes reports whether body is plainly valid, with the value the validator would pass
// (before boundValue).
func (p *plainObject) passes(body []byte) (map[string]any, bool) {
	v, ok := decodeFor(body, p.schema)
	if !ok {
		return nil, false
	}
	m, ok := v.(map[string]any)
	if !ok || !p.holds(m) {
		return nil, false
	}
	return m, true
}

// holds reports whether v, as decodeFor decodes, is plainly within p.
func (p *plainSchema) holds(v any) bool {
	switch p.kind {
	case plainString:
		s, ok := v.(string)
		return ok && p.holdsString(s)
	case plainArray:
		a, ok := v.([]any)
		if !ok || uint64(len(a)) < p.minItems || (p.maxItems != nil && uint64(len(a)) > *p.maxItems) {
			return false
		}
		for _, item := range a {
			if !p.items.holds(item) {
				return false
			}
		}
		return true
	case plainFreeForm:
		// decodeFor leaves a free-form object as {"": freeFormText}, which the validator passes.
		m, ok := v.(map[string]any)
		if !ok || len(m) != 1 {
			return false
		}
		_, ok = m[""].(freeFormText)
		return ok
	case plainClosed:
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		for name, value := range m {
			ps, known := p.properties[name]
			if !known || !ps.holds(value) {
				return false
			}
		}
		for _, name := range p.required {
			if _, ok := m[name]; !ok {
				return false
			}
		}
		return true
	}
	return false
}

func (p *plainSchema) holdsString(s string) bool {
	if p.minLength != 0 || p.maxLength != nil {
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
		if n < p.minLength || (p.maxLength != nil && n > *p.maxLength) {
			return false
		}
	}
	if p.pattern != nil && !p.pattern.MatchString(s) {
		return false
	}
	return p.format == nil || p.format.Validate(s) == nil
}
