// Package policydoc maps an organization policy document (DESIGN §4.1) between the API's
// shape and Terraform values. Its attributes come from the table of policy fields
// (server/domain/policyfield): a field added there needs nothing here. Every field is optional:
// null means "not set by this document" (a limit or entitlement inherits the deployment default,
// a setting is not locked).
package policydoc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/server/domain/policyfield"
)

// Document is a policy document as Terraform values: per section, an object with one attribute
// per field of that section, or a null object (the section is left out).
type Document map[policyfield.Section]types.Object

// Descriptions of each attribute, by section or field name, shared by the resource and the
// data sources: the table of policy fields' descriptions.
var Descriptions = func() map[string]string {
	d := map[string]string{}
	for _, s := range policyfield.Sections {
		d[string(s.Name)] = s.Description
	}
	for _, f := range policyfield.Fields {
		d[f.Path.Name()] = f.Description
	}
	return d
}()

// AttrTypes are the attribute types of a section's object.
func AttrTypes(s policyfield.Section) map[string]attr.Type {
	out := map[string]attr.Type{}
	for _, f := range policyfield.In(s) {
		switch f.Kind {
		case policyfield.Integer:
			out[f.Path.Name()] = types.Int64Type
		case policyfield.Boolean:
			out[f.Path.Name()] = types.BoolType
		case policyfield.StringSet:
			out[f.Path.Name()] = types.SetType{ElemType: types.StringType}
		}
	}
	return out
}

// Null is the null object of a section.
func Null(s policyfield.Section) types.Object { return types.ObjectNull(AttrTypes(s)) }

// Section is d's object for s: null when d does not have it.
func (d Document) Section(s policyfield.Section) types.Object {
	if o, ok := d[s]; ok {
		return o
	}
	return Null(s)
}

// sections reads a policy document in the API's JSON shape (client.Policy, PolicyWrite,
// PolicyDefaults, ...): per section, the fields that are set.
func sections(v any) (map[string]map[string]json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	out := map[string]map[string]json.RawMessage{}
	for _, s := range policyfield.Sections {
		fields := map[string]json.RawMessage{}
		if raw, ok := m[string(s.Name)]; ok && !bytes.Equal(raw, []byte("null")) {
			if err := json.Unmarshal(raw, &fields); err != nil {
				return nil, fmt.Errorf("%s: %w", s.Name, err)
			}
		}
		for name, raw := range fields {
			if bytes.Equal(raw, []byte("null")) {
				delete(fields, name)
			}
		}
		out[string(s.Name)] = fields
	}
	return out, nil
}

// FromAPI converts a document the server holds (a client.Policy or client.PolicyDefaults). A
// section the server holds empty is null, unless keep says to keep it as an object (the
// configuration or state it replaces had it as one, so `limits = {}` does not turn into a diff).
func FromAPI(v any, keep func(policyfield.Section) bool) (Document, diag.Diagnostics) {
	var diags diag.Diagnostics
	secs, err := sections(v)
	if err != nil {
		diags.AddError("Cannot read the policy document", err.Error())
		return nil, diags
	}
	d := Document{}
	for _, s := range policyfield.Sections {
		fields := secs[string(s.Name)]
		if len(fields) == 0 && !keep(s.Name) {
			d[s.Name] = Null(s.Name)
			continue
		}
		values := map[string]attr.Value{}
		for _, f := range policyfield.In(s.Name) {
			values[f.Path.Name()] = fieldValue(f, fields[f.Path.Name()], &diags)
		}
		o, ds := types.ObjectValue(AttrTypes(s.Name), values)
		diags.Append(ds...)
		d[s.Name] = o
	}
	return d, diags
}

// Kept says whether a prior document had a section as an object (FromAPI's keep).
func (d Document) Kept(s policyfield.Section) bool {
	o := d.Section(s)
	return !o.IsNull() && !o.IsUnknown()
}

// All keeps every section (a data source shows all three even when one is empty).
func All(policyfield.Section) bool { return true }

func fieldValue(f policyfield.Field, raw json.RawMessage, diags *diag.Diagnostics) attr.Value {
	fail := func(err error) {
		diags.AddError("Cannot read the policy document", fmt.Sprintf("%s: %v", f.Path, err))
	}
	switch f.Kind {
	case policyfield.Integer:
		if raw == nil {
			return types.Int64Null()
		}
		var n int64
		if err := json.Unmarshal(raw, &n); err != nil {
			fail(err)
		}
		return types.Int64Value(n)
	case policyfield.Boolean:
		if raw == nil {
			return types.BoolNull()
		}
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			fail(err)
		}
		return types.BoolValue(b)
	default: // policyfield.StringSet
		if raw == nil {
			return types.SetNull(types.StringType)
		}
		var ss []string
		if err := json.Unmarshal(raw, &ss); err != nil {
			fail(err)
		}
		elems := make([]attr.Value, 0, len(ss))
		for _, s := range ss {
			elems = append(elems, types.StringValue(s))
		}
		set, ds := types.SetValue(types.StringType, elems)
		diags.Append(ds...)
		return set
	}
}

// ToAPI is the body of a PUT that replaces the policy with d.
func (d Document) ToAPI(ctx context.Context) (client.PolicyWrite, diag.Diagnostics) {
	var diags diag.Diagnostics
	body := map[string]map[string]any{}
	for _, s := range policyfield.Sections {
		o := d.Section(s.Name)
		if o.IsNull() || o.IsUnknown() {
			continue
		}
		fields := map[string]any{}
		for name, v := range o.Attributes() {
			if v.IsNull() || v.IsUnknown() {
				continue
			}
			switch v := v.(type) {
			case types.Int64:
				fields[name] = v.ValueInt64()
			case types.Bool:
				fields[name] = v.ValueBool()
			case types.Set:
				ss := []string{}
				diags.Append(v.ElementsAs(ctx, &ss, false)...)
				fields[name] = ss
			}
		}
		body[string(s.Name)] = fields
	}
	var w client.PolicyWrite
	b, err := json.Marshal(body)
	if err == nil {
		err = json.Unmarshal(b, &w)
	}
	if err != nil {
		diags.AddError("Cannot build the policy document", err.Error())
	}
	return w, diags
}

// Empty reports whether a stored document sets nothing.
func Empty(p client.Policy) bool {
	secs, err := sections(p)
	if err != nil {
		return false
	}
	for _, fields := range secs {
		if len(fields) > 0 {
			return false
		}
	}
	return true
}

// Normal is a document in the API's JSON shape as the server stores it: every section present,
// fields that are not set left out, and sets sorted without duplicates. Two documents store the
// same policy when their Normal forms are equal.
func Normal(v any) (map[string]map[string]any, error) {
	secs, err := sections(v)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]any{}
	for _, s := range policyfield.Sections {
		fields := map[string]any{}
		for _, f := range policyfield.In(s.Name) {
			raw, ok := secs[string(s.Name)][f.Path.Name()]
			if !ok {
				continue
			}
			var v any
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber() // integers compare by their digits, not as float64
			if err := dec.Decode(&v); err != nil {
				return nil, fmt.Errorf("%s: %w", f.Path, err)
			}
			if list, ok := v.([]any); ok && f.Kind == policyfield.StringSet {
				ss := make([]string, 0, len(list))
				for _, e := range list {
					s, _ := e.(string)
					ss = append(ss, s)
				}
				v = slices.Compact(slices.Sorted(slices.Values(ss)))
			}
			fields[f.Path.Name()] = v
		}
		out[string(s.Name)] = fields
	}
	return out, nil
}
