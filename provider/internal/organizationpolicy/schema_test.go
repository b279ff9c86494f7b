package organizationpolicy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"

	"renga.dev/renga/provider/internal/organizationpolicy"
	"renga.dev/renga/server/domain/policyfield"
)

// TestSchemaFromTable: each section's attributes are the table's fields, with the table's
// description and kind, and integers validated to the table's range.
func TestSchemaFromTable(t *testing.T) {
	ctx := context.Background()
	var resp resource.SchemaResponse
	organizationpolicy.NewResource().Schema(ctx, resource.SchemaRequest{}, &resp)
	for _, sec := range policyfield.Sections {
		nested, ok := resp.Schema.Attributes[string(sec.Name)].(schema.SingleNestedAttribute)
		if !ok || nested.MarkdownDescription != sec.Description || !nested.Optional {
			t.Errorf("%s: %#v", sec.Name, resp.Schema.Attributes[string(sec.Name)])
			continue
		}
		fields := policyfield.In(sec.Name)
		if len(nested.Attributes) != len(fields) {
			t.Errorf("%s has %d attributes, the table %d fields", sec.Name, len(nested.Attributes), len(fields))
		}
		for _, f := range fields {
			a := nested.Attributes[f.Path.Name()]
			if a == nil || a.GetMarkdownDescription() != f.Description || !a.IsOptional() {
				t.Errorf("%s: attribute %#v", f.Path, a)
				continue
			}
			var validators []string
			switch x := a.(type) {
			case schema.Int64Attribute:
				for _, v := range x.Validators {
					validators = append(validators, v.Description(ctx))
				}
				if want := fmt.Sprintf("value must be between %d and %d", f.Min, f.Max); f.Kind != policyfield.Integer || !strings.Contains(strings.Join(validators, ";"), want) {
					t.Errorf("%s: validators %v, want %q", f.Path, validators, want)
				}
			case schema.BoolAttribute:
				if f.Kind != policyfield.Boolean {
					t.Errorf("%s is a %v, the schema has a bool", f.Path, f.Kind)
				}
			case schema.SetAttribute:
				for _, v := range x.Validators {
					validators = append(validators, v.Description(ctx))
				}
				if want := fmt.Sprintf("at most %d elements", f.MaxItems); f.Kind != policyfield.StringSet || !strings.Contains(strings.Join(validators, ";"), want) {
					t.Errorf("%s: validators %v, want %q", f.Path, validators, want)
				}
			default:
				t.Errorf("%s: attribute of type %T", f.Path, a)
			}
		}
	}
}
