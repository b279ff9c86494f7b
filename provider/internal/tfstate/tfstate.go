// Package tfstate reads and writes a resource's state as Terraform values, without the
// framework's reflection. tfsdk.State.Get and Set convert between the state and a struct by
// reflection on every call (and compile a regular expression per struct field): in a
// refresh-only plan, where Read is all a resource does, that was about an eighth of the
// provider's CPU, and a quarter of the allocations of a policy's refresh (BenchmarkRefresh in
// provider/internal/provider).
package tfstate

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// Attributes are the top-level attributes of a state that is not null.
func Attributes(st tfsdk.State) (map[string]tftypes.Value, diag.Diagnostics) {
	var diags diag.Diagnostics
	if st.Raw.IsNull() || !st.Raw.IsKnown() {
		diags.AddError("Cannot read the resource's state", "The state is null or unknown. This is a bug in the provider.")
		return nil, diags
	}
	var attrs map[string]tftypes.Value
	if err := st.Raw.As(&attrs); err != nil {
		diags.AddError("Cannot read the resource's state", fmt.Sprintf("The state is not an object: %v. This is a bug in the provider.", err))
		return nil, diags
	}
	return attrs, diags
}

// String is the string attribute name of attrs: "" when it is null or unknown.
func String(attrs map[string]tftypes.Value, name string) (string, diag.Diagnostics) {
	return value[string](attrs, name)
}

// Bool is the bool attribute name of attrs: false when it is null or unknown.
func Bool(attrs map[string]tftypes.Value, name string) (bool, diag.Diagnostics) {
	return value[bool](attrs, name)
}

// value is attribute name of attrs as a T (a string or a bool): T's zero value when it is null
// or unknown.
func value[T string | bool](attrs map[string]tftypes.Value, name string) (T, diag.Diagnostics) {
	var diags diag.Diagnostics
	var out T
	v, ok := attrs[name]
	if !ok {
		diags.AddError("Cannot read the resource's state", fmt.Sprintf("The state has no attribute %q. This is a bug in the provider.", name))
		return out, diags
	}
	if !v.IsKnown() || v.IsNull() {
		return out, diags
	}
	if err := v.As(&out); err != nil {
		diags.AddError("Cannot read the resource's state", fmt.Sprintf("Attribute %q: %v. This is a bug in the provider.", name, err))
	}
	return out, diags
}

// Set makes st an object of attrs, one value for each attribute of the resource's schema. It is
// what st.Set does with a struct of those values.
func Set(ctx context.Context, st *tfsdk.State, attrs map[string]attr.Value) diag.Diagnostics {
	var diags diag.Diagnostics
	typ := st.Raw.Type()
	if typ == nil {
		typ = st.Schema.Type().TerraformType(ctx)
	}
	vals := make(map[string]tftypes.Value, len(attrs))
	for name, a := range attrs {
		v, err := a.ToTerraformValue(ctx)
		if err != nil {
			diags.AddError("Cannot write the resource's state", fmt.Sprintf("Attribute %q: %v. This is a bug in the provider.", name, err))
			return diags
		}
		vals[name] = v
	}
	if err := tftypes.ValidateValue(typ, vals); err != nil {
		diags.AddError("Cannot write the resource's state", fmt.Sprintf("%v. This is a bug in the provider.", err))
		return diags
	}
	st.Raw = tftypes.NewValue(typ, vals)
	return diags
}

// Known says whether attribute name of attrs is neither null nor unknown.
func Known(attrs map[string]tftypes.Value, name string) bool {
	v, ok := attrs[name]
	return ok && v.IsKnown() && !v.IsNull()
}
