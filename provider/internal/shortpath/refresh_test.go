package shortpath_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/provider/internal/acctest"
	"renga.dev/renga/provider/internal/identityprovider"
	"renga.dev/renga/provider/internal/organization"
	"renga.dev/renga/provider/internal/provider"
	"renga.dev/renga/provider/internal/shortpath"
)

// TestSameAnswers: for renga_organization and renga_organization_policy, the provider's server
// (provider.Server, this package's shorter path) answers UpgradeResourceState and ReadResource
// exactly as the framework's own server does, against a real server: stored states as Terraform
// writes them and as it might (attributes added, missing or null, numbers in other notations,
// other versions, flatmap, broken JSON), objects that changed, were suspended, scheduled for
// deletion or never existed, reads after an import (private state), with deferral allowed, and
// reads the API refuses. Responses are compared whole: state bytes, private state, diagnostics
// (with the server's request IDs, which differ from request to request, taken out).
//
// Fails when: the shorter path answers anything differently, or answers nothing (the test would
// then compare the framework with itself).
func TestSameAnswers(t *testing.T) {
	env := acctest.Start(t)
	ctx := context.Background()

	renamed := env.CreateOrganization(t, acctest.Name("same"), "Before")
	if res, err := env.API.UpdateOrganizationWithResponse(ctx, renamed.Id,
		&client.UpdateOrganizationParams{IfMatch: `"1"`}, client.OrganizationUpdate{DisplayName: "After"}); err != nil || res.JSON200 == nil {
		t.Fatalf("rename: %v %v", err, res)
	}
	suspended := env.CreateOrganization(t, acctest.Name("same"), "Suspended")
	if res, err := env.API.SuspendOrganizationWithResponse(ctx, suspended.Id, &client.SuspendOrganizationParams{},
		client.SuspendRequest{Reason: "test"}); err != nil || res.StatusCode() != 200 {
		t.Fatalf("suspend: %v %v", err, res)
	}
	deleted := env.CreateOrganization(t, acctest.Name("same"), "Deleted")
	if res, err := env.API.ScheduleOrganizationDeletionWithResponse(ctx, deleted.Id, &client.ScheduleOrganizationDeletionParams{}); err != nil || res.StatusCode() != 200 {
		t.Fatalf("schedule deletion: %v %v", err, res)
	}
	const missing = "org_00000000000000000000000000"
	domains := []client.EmailDomain{"b.example", "a.example"}
	if _, err := env.PutPolicy(renamed.Id, client.PolicyWrite{
		Limits:         &client.PolicyLimits{MaxAgents: ptr(int64(7)), MaxJobsPerDay: ptr(int64(0))},
		LockedSettings: &client.LockedSettings{AllowedEmailDomains: &domains, RequireMfa: ptr(true)},
		Entitlements:   &client.Entitlements{Jobs: ptr(true)},
	}); err != nil {
		t.Fatal(err)
	}

	var states []stored
	for _, o := range []struct{ id, slug string }{{renamed.Id, renamed.Slug}, {suspended.Id, suspended.Slug}, {deleted.Id, deleted.Slug}, {missing, "missing"}} {
		states = append(states,
			stored{"renga_organization", 0, fmt.Sprintf(`{"display_name":"Before","id":%q,"slug":%q,"state":"active","version":1}`, o.id, o.slug)},
			stored{"renga_organization_policy", 0, fmt.Sprintf(`{"entitlements":{"jobs":true,"organization_identity_providers":null,"owner_export":null},"id":%q,`+
				`"limits":{"intake_bytes_per_day":null,"max_agents":100,"max_jobs_per_day":null,"max_users":10,"observation_retention_days":null},`+
				`"locked_settings":null,"organization_id":%q,"overwrite_existing":false,"version":2}`, o.id, o.id)},
		)
	}
	id := renamed.Id
	states = append(states,
		// What an older or newer Terraform, or a hand-edited state, might hold.
		stored{"renga_organization", 0, fmt.Sprintf(`{"id":%q,"slug":"x","display_name":"y","state":"active","version":1,"gone":{"a":[1]}}`, id)},
		stored{"renga_organization", 0, fmt.Sprintf(`{"id":%q}`, id)},
		stored{"renga_organization", 0, fmt.Sprintf(`{"id":%q,"slug":null,"display_name":null,"state":null,"version":null}`, id)},
		stored{"renga_organization", 0, fmt.Sprintf(`{"id":%q,"version":"1"}`, id)},
		stored{"renga_organization", 0, fmt.Sprintf(`{"id":%q,"version":1e0,"slug":7,"state":true}`, id)},
		stored{"renga_organization", 0, fmt.Sprintf(`{"id":%q,"version":1}  trailing`, id)},
		stored{"renga_organization", 0, fmt.Sprintf(`{"id":%q,"id":"org_11111111111111111111111111"}`, id)},
		stored{"renga_organization", 0, `{}`},
		stored{"renga_organization", 0, `null`},
		stored{"renga_organization", 0, `{"id":`},
		stored{"renga_organization", 0, `[]`},
		stored{"renga_organization", 0, fmt.Sprintf(`{"id":%q,"version":{}}`, id)},
		stored{"renga_organization", 1, fmt.Sprintf(`{"id":%q}`, id)},
		stored{"renga_organization", 0, ""},
		stored{"renga_organization_policy", 0, fmt.Sprintf(`{"organization_id":%q,"limits":null,"locked_settings":null,"entitlements":null}`, id)},
		stored{"renga_organization_policy", 0, fmt.Sprintf(`{"organization_id":%q,"limits":{},"locked_settings":{"allowed_email_domains":["c.example"]},"entitlements":{},"overwrite_existing":true}`, id)},
		stored{"renga_organization_policy", 0, fmt.Sprintf(`{"organization_id":%q,"locked_settings":{"allowed_email_domains":[]},"limits":{"max_agents":1.5e1}}`, id)},
		stored{"renga_organization_policy", 0, fmt.Sprintf(`{"organization_id":%q,"limits":{"max_agents":123456789012345678901234567890}}`, id)},
		stored{"renga_organization_policy", 0, fmt.Sprintf(`{"organization_id":%q,"entitlements":{"jobs":"1"},"overwrite_existing":"false"}`, id)},
		stored{"renga_organization_policy", 0, fmt.Sprintf(`{"organization_id":%q,"locked_settings":{"allowed_email_domains":"a.example"}}`, id)},
		stored{"renga_organization_policy", 3, fmt.Sprintf(`{"organization_id":%q}`, id)},
	)

	framework := configure(t, providerserver.NewProtocol6(provider.New("test")())(), env.URL, env.Token)
	wrapped := configure(t, provider.Server("test")(), env.URL, env.Token)
	// A token that may read neither organizations nor policies (usage only): every read is
	// refused (403).
	noScopes := env.Server.Token(t, "usage:read")
	frameworkRefused := configure(t, providerserver.NewProtocol6(provider.New("test")())(), env.URL, noScopes)
	wrappedRefused := configure(t, provider.Server("test")(), env.URL, noScopes)

	imported, err := framework.ImportResourceState(ctx, &tfprotov6.ImportResourceStateRequest{TypeName: "renga_organization", ID: renamed.Id})
	if err != nil || len(imported.ImportedResources) != 1 || len(imported.ImportedResources[0].Private) == 0 {
		t.Fatalf("import: %v %+v", err, imported)
	}
	afterImport := imported.ImportedResources[0].Private

	for _, st := range states {
		name := fmt.Sprintf("%s v%d %s", st.typeName, st.version, st.json)
		raw := &tfprotov6.RawState{JSON: []byte(st.json)}
		if st.json == "" {
			raw = &tfprotov6.RawState{Flatmap: map[string]string{"id": id}}
		}
		upgrade := func() *tfprotov6.UpgradeResourceStateRequest {
			return &tfprotov6.UpgradeResourceStateRequest{TypeName: st.typeName, Version: st.version, RawState: raw}
		}
		fu, err := framework.UpgradeResourceState(ctx, upgrade())
		if err != nil {
			t.Fatal(err)
		}
		wu, err := wrapped.UpgradeResourceState(ctx, upgrade())
		if err != nil {
			t.Fatal(err)
		}
		same(t, "upgrade "+name, fu, wu)
		if fu.UpgradedState == nil {
			continue
		}
		for _, r := range []struct {
			name    string
			private []byte
			caps    *tfprotov6.ReadResourceClientCapabilities
		}{
			{"read", nil, nil},
			{"read with deferral allowed", nil, &tfprotov6.ReadResourceClientCapabilities{DeferralAllowed: true}},
			{"read after import", afterImport, nil},
		} {
			read := func() *tfprotov6.ReadResourceRequest {
				return &tfprotov6.ReadResourceRequest{TypeName: st.typeName, CurrentState: fu.UpgradedState,
					Private: append([]byte(nil), r.private...), ClientCapabilities: r.caps}
			}
			for _, p := range []struct {
				name               string
				framework, wrapped tfprotov6.ProviderServer
			}{
				{name: r.name, framework: framework, wrapped: wrapped},
				{name: r.name + " refused", framework: frameworkRefused, wrapped: wrappedRefused},
			} {
				fr, err := p.framework.ReadResource(ctx, read())
				if err != nil {
					t.Fatal(err)
				}
				wr, err := p.wrapped.ReadResource(ctx, read())
				if err != nil {
					t.Fatal(err)
				}
				same(t, p.name+" "+name, fr, wr)
			}
		}
	}
	// Most states above read and most reads have no private state: the shorter path must have
	// answered them.
	if n := shortpath.Answered(wrapped) + shortpath.Answered(wrappedRefused); n < 50 {
		t.Errorf("the shorter path answered %d calls; the comparison is mostly of the framework with itself", n)
	}
}

// TestOnlySimpleResources: a resource with a write-only attribute (renga_identity_provider's
// client secret, which the framework nulls in every state it returns) is left to the framework.
//
// Fails when: simple lets it through.
func TestOnlySimpleResources(t *testing.T) {
	s := shortpath.Wrap(providerserver.NewProtocol6(provider.New("test")())(), "renga", func() any { return nil },
		identityprovider.NewResource, organization.NewResource)
	ctx := context.Background()
	up, err := s.UpgradeResourceState(ctx, &tfprotov6.UpgradeResourceStateRequest{TypeName: "renga_identity_provider",
		RawState: &tfprotov6.RawState{JSON: []byte(`{"id":"idp_00000000000000000000000000"}`)}})
	if err != nil || up.UpgradedState == nil {
		t.Fatalf("upgrade: %v %+v", err, up)
	}
	if n := shortpath.Answered(s); n != 0 {
		t.Fatalf("answered %d calls for renga_identity_provider", n)
	}
	if _, err := s.UpgradeResourceState(ctx, &tfprotov6.UpgradeResourceStateRequest{TypeName: "renga_organization",
		RawState: &tfprotov6.RawState{JSON: []byte(`{"id":"org_00000000000000000000000000"}`)}}); err != nil {
		t.Fatal(err)
	}
	if n := shortpath.Answered(s); n != 1 {
		t.Fatalf("answered %d calls for renga_organization, want 1", n)
	}
}

type stored struct {
	typeName string
	version  int64
	json     string // "" for a flatmap state
}

func ptr[T any](v T) *T { return &v }

// configure configures s as Terraform would for url and token.
func configure(t *testing.T, s tfprotov6.ProviderServer, url, token string) tfprotov6.ProviderServer {
	t.Helper()
	ctx := context.Background()
	schemas, err := s.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil || len(schemas.Diagnostics) > 0 {
		t.Fatal(err, schemas.Diagnostics)
	}
	typ := schemas.Provider.ValueType()
	cfg, err := tfprotov6.NewDynamicValue(typ, tftypes.NewValue(typ, map[string]tftypes.Value{
		"url":   tftypes.NewValue(tftypes.String, url),
		"token": tftypes.NewValue(tftypes.String, token),
	}))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.ConfigureProvider(ctx, &tfprotov6.ConfigureProviderRequest{Config: &cfg})
	if err != nil || len(resp.Diagnostics) > 0 {
		t.Fatal(err, resp.Diagnostics)
	}
	return s
}

// requestID is the server's request ID in a diagnostic's detail (apiclient.Describe).
var requestID = regexp.MustCompile(`\(request [^)]+\)`)

// same fails t unless the two responses are equal, request IDs aside.
func same(t *testing.T, what string, framework, wrapped any) {
	t.Helper()
	for _, resp := range []any{framework, wrapped} {
		var diags []*tfprotov6.Diagnostic
		switch r := resp.(type) {
		case *tfprotov6.UpgradeResourceStateResponse:
			diags = r.Diagnostics
		case *tfprotov6.ReadResourceResponse:
			diags = r.Diagnostics
		case *tfprotov6.PlanResourceChangeResponse:
			diags = r.Diagnostics
		case *tfprotov6.ApplyResourceChangeResponse:
			diags = r.Diagnostics
		}
		for _, d := range diags {
			d.Detail = requestID.ReplaceAllString(d.Detail, "(request …)")
		}
	}
	if !reflect.DeepEqual(framework, wrapped) {
		t.Errorf("%s:\nframework: %s\nwrapped:   %s", what, describe(framework), describe(wrapped))
	}
}

func describe(resp any) string {
	b, err := json.Marshal(resp)
	if err != nil {
		return fmt.Sprintf("%#v", resp)
	}
	return string(b)
}
