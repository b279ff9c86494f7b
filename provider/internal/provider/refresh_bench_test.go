package provider_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"renga.dev/renga/provider/internal/provider"
)

// BenchmarkRefresh is the provider's share of a refresh: for each resource of examples/scale,
// the two calls Terraform makes per resource in `terraform plan -refresh-only` (upgrade the
// stored state, then read), in process and against canned API answers, so that what is
// measured is the provider and the framework (go test -bench Refresh -benchmem ./provider/...).
func BenchmarkRefresh(b *testing.B) {
	const orgID = "org_01m8sm1vwervnh62a9mvsp28nt"
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/api/v1/operator/tokens/self":
			_, _ = w.Write([]byte(`{"id":"tok_01m8sm1vwervnh62a9mvsp28nt","name":"bench","scopes":[],"allowed_sources":[],"created_at":"2026-01-01T00:00:00Z","expires_at":null}`))
		case strings.HasSuffix(r.URL.Path, "/policy"):
			_, _ = w.Write([]byte(`{"organization_id":"` + orgID + `","version":2,"limits":{"max_agents":142,"max_users":10},"locked_settings":{},"entitlements":{"jobs":true}}`))
		default:
			_, _ = w.Write([]byte(`{"id":"` + orgID + `","slug":"scale-042","display_name":"Scale test 042","state":"active","version":1,"created_at":"2026-01-01T00:00:00Z","purge_after":null}`))
		}
	}))
	defer api.Close()

	ctx := context.Background()
	s := providerserver.NewProtocol6(provider.New("bench")())()
	schemas, err := s.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil || len(schemas.Diagnostics) > 0 {
		b.Fatal(err, schemas.Diagnostics)
	}
	pt := schemas.Provider.ValueType()
	cfg, err := tfprotov6.NewDynamicValue(pt, tftypes.NewValue(pt, map[string]tftypes.Value{
		"url":   tftypes.NewValue(tftypes.String, api.URL),
		"token": tftypes.NewValue(tftypes.String, "renga_operator_bench"),
	}))
	if err != nil {
		b.Fatal(err)
	}
	if resp, err := s.ConfigureProvider(ctx, &tfprotov6.ConfigureProviderRequest{Config: &cfg}); err != nil || len(resp.Diagnostics) > 0 {
		b.Fatal(err, resp.Diagnostics)
	}
	for _, c := range []struct{ typeName, state string }{
		{"renga_organization", `{"id":"` + orgID + `","slug":"scale-042","display_name":"Scale test 042","state":"active","version":1}`},
		{"renga_organization_policy", `{"id":"` + orgID + `","organization_id":"` + orgID + `","overwrite_existing":false,"version":2,` +
			`"limits":{"max_agents":142,"max_users":10,"intake_bytes_per_day":null,"observation_retention_days":null,"max_jobs_per_day":null},` +
			`"locked_settings":null,"entitlements":{"jobs":true,"organization_identity_providers":null,"owner_export":null}}`},
	} {
		b.Run(c.typeName, func(b *testing.B) {
			for b.Loop() {
				up, err := s.UpgradeResourceState(ctx, &tfprotov6.UpgradeResourceStateRequest{
					TypeName: c.typeName, RawState: &tfprotov6.RawState{JSON: []byte(c.state)},
				})
				if err != nil || len(up.Diagnostics) > 0 {
					b.Fatal(err, up.Diagnostics)
				}
				read, err := s.ReadResource(ctx, &tfprotov6.ReadResourceRequest{TypeName: c.typeName, CurrentState: up.UpgradedState})
				if err != nil || len(read.Diagnostics) > 0 {
					b.Fatal(err, read.Diagnostics)
				}
			}
		})
	}
}
