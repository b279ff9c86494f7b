package provider_test

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"renga.dev/renga/provider/internal/provider"
)

// BenchmarkValidate is the provider's share of validating a resource of examples/scale
// (ValidateResourceConfig, which Terraform calls for every resource in validate, plan and
// apply), in process and not configured (validation makes no API call): go test -run '^$'
// -bench Validate -benchmem ./provider/internal/provider.
func BenchmarkValidate(b *testing.B) {
	ctx := context.Background()
	s := providerserver.NewProtocol6(provider.New("bench")())()
	schemas, err := s.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil || len(schemas.Diagnostics) > 0 {
		b.Fatal(err, schemas.Diagnostics)
	}
	str := func(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }
	num := func(n int64) tftypes.Value { return tftypes.NewValue(tftypes.Number, n) }
	// value is an object of typ with attrs, every other attribute null.
	value := func(typ tftypes.Object, attrs map[string]tftypes.Value) tftypes.Value {
		vals := map[string]tftypes.Value{}
		for name, at := range typ.AttributeTypes {
			vals[name] = tftypes.NewValue(at, nil)
			if v, ok := attrs[name]; ok {
				vals[name] = v
			}
		}
		return tftypes.NewValue(typ, vals)
	}
	objectType := func(t tftypes.Type) tftypes.Object {
		o, ok := t.(tftypes.Object)
		if !ok {
			b.Fatalf("%s: not an object", t)
		}
		return o
	}
	orgType := objectType(schemas.ResourceSchemas["renga_organization"].ValueType())
	polType := objectType(schemas.ResourceSchemas["renga_organization_policy"].ValueType())
	configs := []struct {
		typeName string
		typ      tftypes.Object
		config   tftypes.Value
	}{
		{"renga_organization", orgType, value(orgType, map[string]tftypes.Value{"slug": str("scale-042"), "display_name": str("Scale test 042")})},
		{"renga_organization_policy", polType, value(polType, map[string]tftypes.Value{
			"organization_id": str("org_01m8sm1vwervnh62a9mvsp28nt"),
			"limits":          value(objectType(polType.AttributeTypes["limits"]), map[string]tftypes.Value{"max_agents": num(142), "max_users": num(10)}),
			"entitlements":    value(objectType(polType.AttributeTypes["entitlements"]), map[string]tftypes.Value{"jobs": tftypes.NewValue(tftypes.Bool, true)}),
		})},
	}
	for _, c := range configs {
		dv, err := tfprotov6.NewDynamicValue(c.typ, c.config)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.typeName, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := s.ValidateResourceConfig(ctx, &tfprotov6.ValidateResourceConfigRequest{TypeName: c.typeName, Config: &dv})
				if err != nil || len(resp.Diagnostics) > 0 {
					b.Fatal(err, resp.Diagnostics)
				}
			}
		})
	}
}
