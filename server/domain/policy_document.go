package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"renga.dev/renga/server/domain/policyfield"
)

// PolicyDocument is an organization's policy, or the deployment's defaults (same shape): the
// value of each field it sets, by the field's path in policyfield.Fields. The value is an int64,
// a bool or a []string, by the field's kind. A field not in the map is not set here: a limit or
// entitlement inherits the deployment default, a setting is not locked.
//
// Its JSON is the API's: {"limits": {...}, "locked_settings": {...}, "entitlements": {...}}.
type PolicyDocument map[policyfield.Path]any

// BuiltinDefaults apply where neither the organization's policy nor RENGA_POLICY_DEFAULTS say:
// the table's built-in defaults.
var BuiltinDefaults = func() PolicyDocument {
	d := PolicyDocument{}
	for _, f := range policyfield.Fields {
		if f.Default != nil {
			d[f.Path] = f.Default
		}
	}
	return d
}()

// ParsePolicyDefaults reads RENGA_POLICY_DEFAULTS: a policy document whose limits and
// entitlements override the built-in defaults and whose locked settings lock for every
// organization that does not lock them itself. Unknown fields and bad values are refused.
func ParsePolicyDefaults(s string) (PolicyDocument, error) {
	d := maps.Clone(BuiltinDefaults)
	if s == "" {
		return d, nil
	}
	var raw json.RawMessage
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	if err := dec.Decode(&raw); err != nil {
		return d, fmt.Errorf("not a policy document: %w", err)
	}
	if dec.More() {
		return d, errors.New("not a policy document: trailing data")
	}
	doc, err := decodePolicy(raw, true)
	if err != nil {
		return d, fmt.Errorf("not a policy document: %w", err)
	}
	if err := doc.Validate(); err != nil {
		return d, err
	}
	// The built-in defaults lock nothing, so the document's locked settings are the
	// deployment's locks.
	maps.Copy(d, doc)
	return d, nil
}

// Validate checks what the API's schema checks of integers, for documents that do not come
// through it, and that each value is of its field's kind.
func (p PolicyDocument) Validate() error {
	for _, f := range policyfield.Fields {
		v, ok := p[f.Path]
		if !ok {
			continue
		}
		if !ofKind(f.Kind, v) {
			return &ValidationError{Field: string(f.Path), Message: "must be a " + f.Kind.String()}
		}
		if n, ok := v.(int64); ok && (n < f.Min || n > f.Max) {
			return &ValidationError{Field: string(f.Path), Message: fmt.Sprintf("must be between %d and %d", f.Min, f.Max)}
		}
	}
	for path := range p {
		if _, ok := policyfield.Lookup(path); !ok {
			return &ValidationError{Field: string(path), Message: "is not a field of a policy document"}
		}
	}
	return nil
}

func ofKind(k policyfield.Kind, v any) bool {
	switch v.(type) {
	case int64:
		return k == policyfield.Integer
	case bool:
		return k == policyfield.Boolean
	case []string:
		return k == policyfield.StringSet
	}
	return false
}

// Section is the part of the document in one section, by field name (for JSON).
func (p PolicyDocument) Section(s policyfield.Section) map[string]any {
	out := map[string]any{}
	for _, f := range policyfield.In(s) {
		if v, ok := p[f.Path]; ok {
			out[f.Path.Name()] = v
		}
	}
	return out
}

// MarshalJSON writes the three sections, each with the fields set.
func (p PolicyDocument) MarshalJSON() ([]byte, error) {
	out := map[string]map[string]any{}
	for _, s := range policyfield.Sections {
		out[string(s.Name)] = p.Section(s.Name)
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads a document, ignoring what is not a field of the table (the API's schema
// refuses unknown fields before; ParsePolicyDefaults refuses them itself). A null is not set.
func (p *PolicyDocument) UnmarshalJSON(raw []byte) error {
	doc, err := decodePolicy(raw, false)
	if err != nil {
		return err
	}
	*p = doc
	return nil
}

// decodePolicy reads a document; strict refuses sections and fields that are not in the table.
func decodePolicy(raw []byte, strict bool) (PolicyDocument, error) {
	var sections map[string]json.RawMessage
	if err := json.Unmarshal(raw, &sections); err != nil {
		return nil, err
	}
	if strict {
		for _, name := range slices.Sorted(maps.Keys(sections)) {
			if !policyfield.IsSection(name) {
				return nil, fmt.Errorf("unknown section %q", name)
			}
		}
	}
	doc := PolicyDocument{}
	for _, sec := range policyfield.Sections {
		body, ok := sections[string(sec.Name)]
		if !ok {
			continue
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(body, &fields); err != nil {
			return nil, fmt.Errorf("%s: %w", sec.Name, err)
		}
		known := policyfield.In(sec.Name)
		if strict {
			for _, name := range slices.Sorted(maps.Keys(fields)) {
				if !slices.ContainsFunc(known, func(f policyfield.Field) bool { return f.Path.Name() == name }) {
					return nil, fmt.Errorf("unknown field %q", string(sec.Name)+"."+name)
				}
			}
		}
		for _, f := range known {
			v, err := decodeValue(f.Kind, fields[f.Path.Name()])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.Path, err)
			}
			if v != nil {
				doc[f.Path] = v
			}
		}
	}
	return doc, nil
}

// decodeValue reads a value of kind k; nil for a JSON null or no value.
func decodeValue(k policyfield.Kind, raw json.RawMessage) (any, error) {
	if raw == nil || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	switch k {
	case policyfield.Integer:
		var n int64
		err := json.Unmarshal(raw, &n)
		return n, err
	case policyfield.Boolean:
		var b bool
		err := json.Unmarshal(raw, &b)
		return b, err
	case policyfield.StringSet:
		s := []string{}
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	return nil, fmt.Errorf("unknown kind %v", k)
}

// normalized is the document as stored: sets sorted and without duplicates.
func (p PolicyDocument) normalized() PolicyDocument {
	out := maps.Clone(p)
	for path, v := range out {
		if s, ok := v.([]string); ok {
			out[path] = sortedCopy(s)
		}
	}
	return out
}

// changedPolicyFields names the fields that differ, e.g. "limits.max_agents", sorted.
func changedPolicyFields(a, b PolicyDocument) []string {
	var changed []string
	for _, f := range policyfield.Fields {
		va, inA := a[f.Path]
		vb, inB := b[f.Path]
		if inA != inB || (inA && !sameValue(va, vb)) {
			changed = append(changed, string(f.Path))
		}
	}
	slices.Sort(changed)
	return changed
}

// sameValue compares two values of a field; sets compare as sets.
func sameValue(a, b any) bool {
	sa, okA := a.([]string)
	sb, okB := b.([]string)
	if okA || okB {
		return okA && okB && slices.Equal(sortedCopy(sa), sortedCopy(sb))
	}
	return a == b
}
