package shortpath

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"

	"renga.dev/renga/provider/internal/organization"
	"renga.dev/renga/provider/internal/organizationpolicy"
)

// TestPlanSchema: the shorter path plans the Renga resources it serves, and leaves to the
// framework schemas whose plan it does not work out (see newPlanSchema): plan modifiers it does
// not know (RequiresReplaceIf, which runs any function, even with RequiresReplace's type),
// plan modifiers on other kinds than strings, floating-point numbers, and single nested
// attributes with anything computed, defaulted or modified inside.
//
// Fails when: a Renga resource stops being planned here, or one of the others is.
func TestPlanSchema(t *testing.T) {
	ctx := context.Background()
	for _, f := range []func() resource.Resource{organization.NewResource, organizationpolicy.NewResource} {
		var resp resource.SchemaResponse
		f().Schema(ctx, resource.SchemaRequest{}, &resp)
		if newPlanSchema(resp.Schema, slices.Sorted(maps.Keys(resp.Schema.Attributes))) == nil {
			t.Errorf("%T: planned by the framework", f())
		}
	}
	custom := stringplanmodifier.RequiresReplaceIf(func(context.Context, planmodifier.StringRequest, *stringplanmodifier.RequiresReplaceIfFuncResponse) {},
		"custom", "custom")
	for name, a := range map[string]schema.Attribute{
		"RequiresReplaceIf":           schema.StringAttribute{Required: true, PlanModifiers: []planmodifier.String{custom}},
		"RequiresReplaceIfConfigured": schema.StringAttribute{Required: true, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplaceIfConfigured()}},
		"an int64 plan modifier":      schema.Int64Attribute{Computed: true, PlanModifiers: []planmodifier.Int64{int64planmodifier.UseStateForUnknown()}},
		"a float":                     schema.Float64Attribute{Optional: true},
		"a computed nested attribute": schema.SingleNestedAttribute{Computed: true, Attributes: map[string]schema.Attribute{"a": schema.BoolAttribute{Optional: true}}},
		"a default inside": schema.SingleNestedAttribute{Optional: true, Attributes: map[string]schema.Attribute{
			"a": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true)}}},
		"a computed attribute inside": schema.SingleNestedAttribute{Optional: true, Attributes: map[string]schema.Attribute{
			"a": schema.BoolAttribute{Computed: true}}},
		"a list of objects": schema.ListNestedAttribute{Optional: true, NestedObject: schema.NestedAttributeObject{
			Attributes: map[string]schema.Attribute{"a": schema.BoolAttribute{Optional: true}}}},
	} {
		s := schema.Schema{Attributes: map[string]schema.Attribute{"x": a}}
		if newPlanSchema(s, []string{"x"}) != nil {
			t.Errorf("%s: planned by the shorter path", name)
		}
	}
	for _, m := range []planmodifier.String{stringplanmodifier.RequiresReplace(), stringplanmodifier.UseStateForUnknown(), stringplanmodifier.UseNonNullStateForUnknown()} {
		if !knownStringModifier(m) {
			t.Errorf("%s: not known", m.Description(ctx))
		}
	}
}
