package tfstate_test

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"renga.dev/renga/provider/internal/tfstate"
)

var testSchema = schema.Schema{Attributes: map[string]schema.Attribute{
	"id":    schema.StringAttribute{Computed: true},
	"flag":  schema.BoolAttribute{Optional: true},
	"count": schema.Int64Attribute{Computed: true},
}}

func nullState(ctx context.Context) tfsdk.State {
	return tfsdk.State{Schema: testSchema, Raw: tftypes.NewValue(testSchema.Type().TerraformType(ctx), nil)}
}

// Set writes the same state as the framework's Set with a struct, and the readers read it back.
func TestSetAndRead(t *testing.T) {
	ctx := context.Background()
	got := nullState(ctx)
	if diags := tfstate.Set(ctx, &got, map[string]attr.Value{
		"id": types.StringValue("org_1"), "flag": types.BoolValue(true), "count": types.Int64Value(3),
	}); diags.HasError() {
		t.Fatal(diags)
	}
	want := nullState(ctx)
	if diags := want.Set(ctx, struct {
		ID    types.String `tfsdk:"id"`
		Flag  types.Bool   `tfsdk:"flag"`
		Count types.Int64  `tfsdk:"count"`
	}{types.StringValue("org_1"), types.BoolValue(true), types.Int64Value(3)}); diags.HasError() {
		t.Fatal(diags)
	}
	if !got.Raw.Equal(want.Raw) {
		t.Fatalf("Set wrote %s, the framework %s", got.Raw, want.Raw)
	}

	attrs, diags := tfstate.Attributes(got)
	if diags.HasError() {
		t.Fatal(diags)
	}
	id, diags := tfstate.String(attrs, "id")
	flag, d2 := tfstate.Bool(attrs, "flag")
	diags.Append(d2...)
	if diags.HasError() || id != "org_1" || !flag || !tfstate.Known(attrs, "count") {
		t.Errorf("read id=%q flag=%v count known=%v: %v", id, flag, tfstate.Known(attrs, "count"), diags)
	}
	if _, diags := tfstate.String(attrs, "nope"); !diags.HasError() {
		t.Error("an attribute the schema does not have was read")
	}
}

// Null and unknown attributes (a state just imported holds only its ID) read as zero values.
func TestReadNullAndUnknown(t *testing.T) {
	ctx := context.Background()
	st := nullState(ctx)
	st.Raw = tftypes.NewValue(st.Raw.Type(), map[string]tftypes.Value{
		"id":    tftypes.NewValue(tftypes.String, tftypes.UnknownValue),
		"flag":  tftypes.NewValue(tftypes.Bool, nil),
		"count": tftypes.NewValue(tftypes.Number, nil),
	})
	attrs, diags := tfstate.Attributes(st)
	if diags.HasError() {
		t.Fatal(diags)
	}
	id, d1 := tfstate.String(attrs, "id")
	flag, d2 := tfstate.Bool(attrs, "flag")
	if d1.HasError() || d2.HasError() || id != "" || flag || tfstate.Known(attrs, "count") || tfstate.Known(attrs, "id") {
		t.Errorf("id=%q flag=%v: %v %v", id, flag, d1, d2)
	}
	if _, diags := tfstate.Attributes(nullState(ctx)); !diags.HasError() {
		t.Error("a null state has attributes")
	}
}

// A value for each attribute of the schema, no more and of the right types, or an error.
func TestSetRefusesAStateThatDoesNotFit(t *testing.T) {
	ctx := context.Background()
	for name, attrs := range map[string]map[string]attr.Value{
		"missing": {"id": types.StringValue("x"), "flag": types.BoolNull()},
		"extra":   {"id": types.StringValue("x"), "flag": types.BoolNull(), "count": types.Int64Null(), "more": types.StringNull()},
		"type":    {"id": types.Int64Value(1), "flag": types.BoolNull(), "count": types.Int64Null()},
	} {
		st := nullState(ctx)
		if diags := tfstate.Set(ctx, &st, attrs); !diags.HasError() {
			t.Errorf("%s: Set accepted %v", name, attrs)
		}
		if !st.Raw.IsNull() {
			t.Errorf("%s: the state changed", name)
		}
	}
}
