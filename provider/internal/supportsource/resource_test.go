package supportsource_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/provider/internal/acctest"
	"renga.dev/renga/provider/internal/apiclient"
)

const address = "renga_support_source.test"

// config is an identity provider and the support source naming it.
func config(slug, source string) string {
	return fmt.Sprintf(`
resource "renga_identity_provider" "ops" {
  slug         = %q
  issuer       = "https://login.ops.example/%s"
  display_name = "Ops"
  client_id    = "renga"
}

resource "renga_support_source" "test" {
  provider_id = renga_identity_provider.ops.id
%s
}
`, slug, slug, source)
}

const firstSource = `
  enabled              = true
  allowed_emails       = ["bob@ops.example", "alice@ops.example"]
  allowed_email_domain = "support.ops.example"
`

const secondSource = `
  enabled        = true
  allowed_emails = ["carol@ops.example"]
`

func source(env *acctest.Env) (client.SupportSource, error) {
	res, err := env.API.GetSupportSourceWithResponse(context.Background())
	if err != nil {
		return client.SupportSource{}, err
	}
	if res.JSON200 == nil {
		return client.SupportSource{}, fmt.Errorf("get support source: %d %s", res.StatusCode(), res.Body)
	}
	return *res.JSON200, nil
}

func putSource(env *acctest.Env, w client.SupportSourceWrite) (client.SupportSource, error) {
	cur, err := source(env)
	if err != nil {
		return cur, err
	}
	res, err := env.API.PutSupportSourceWithResponse(context.Background(), &client.PutSupportSourceParams{IfMatch: apiclient.IfMatch(cur.Version)}, w)
	if err != nil {
		return client.SupportSource{}, err
	}
	if res.JSON200 == nil {
		return client.SupportSource{}, fmt.Errorf("put support source: %d %s", res.StatusCode(), res.Body)
	}
	return *res.JSON200, nil
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// sourceIs checks the document the server holds (version and updated_at aside); the provider
// ID is the one in state.
func sourceIs(env *acctest.Env, enabled bool, emails []string, domain *string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		got, err := source(env)
		if err != nil {
			return err
		}
		idp := s.RootModule().Resources["renga_identity_provider.ops"].Primary.ID
		want := client.SupportSource{Enabled: enabled, ProviderId: &idp, AllowedEmailDomain: domain, Version: got.Version, UpdatedAt: got.UpdatedAt}
		for _, e := range emails {
			want.AllowedEmails = append(want.AllowedEmails, client.Email(e))
		}
		if jsonOf(got) != jsonOf(want) {
			return fmt.Errorf("the server holds %s, want %s", jsonOf(got), jsonOf(want))
		}
		return nil
	}
}

// checkReset asks the API that destroy left the default support source: disabled, nobody.
func checkReset(env *acctest.Env) resource.TestCheckFunc {
	return func(*terraform.State) error {
		s, err := source(env)
		if err != nil {
			return err
		}
		if s.Enabled || s.ProviderId != nil || len(s.AllowedEmails) != 0 || s.AllowedEmailDomain != nil {
			return fmt.Errorf("after destroy the support source is %s, want the default", jsonOf(s))
		}
		return nil
	}
}

func ptr[T any](v T) *T { return &v }

// Create, import by the fixed ID, update, an empty plan after each apply; destroy resets the
// document (CheckDestroy).
//
// Fails when: the document is not written whole (the domain survives the second apply), the
// import ID is not "support_source", destroy only forgets the resource (checkReset).
func TestAccSupportSource(t *testing.T) {
	env := acctest.Start(t)
	slug := acctest.Name("ops")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		CheckDestroy:             checkReset(env),
		Steps: []resource.TestStep{
			{
				Config: env.Config(config(slug, firstSource)),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("id"), knownvalue.StringExact("support_source")),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("version"), knownvalue.Int64Exact(2)),
				},
				Check: sourceIs(env, true, []string{"alice@ops.example", "bob@ops.example"}, ptr("support.ops.example")),
			},
			{
				ResourceName:      address,
				ImportState:       true,
				ImportStateId:     "support_source",
				ImportStateVerify: true,
			},
			{
				ResourceName:  address,
				ImportState:   true,
				ImportStateId: "the-support-source",
				ExpectError:   acctest.ErrorText("Invalid import ID", `its import ID is "support_source"`),
			},
			{
				Config: env.Config(config(slug, secondSource)),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("allowed_email_domain"), knownvalue.Null()),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("version"), knownvalue.Int64Exact(3)),
				},
				Check: sourceIs(env, true, []string{"carol@ops.example"}, nil),
			},
			{
				// Disabled, the names kept (as `renga support disable` does).
				Config: env.Config(config(slug, "  enabled = false\n  allowed_emails = [\"carol@ops.example\"]\n")),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: sourceIs(env, false, []string{"carol@ops.example"}, nil),
			},
			{
				// End enabled, so that CheckDestroy proves destroy resets it.
				Config: env.Config(config(slug, secondSource)),
				Check:  sourceIs(env, true, []string{"carol@ops.example"}, nil),
			},
		},
	})
}

// The support source changes through the API after Terraform planned and before it applies:
// the update fails with the 412 diagnostic, sent once, overwriting nothing; the next plan
// refreshes and the apply converges.
//
// Fails when: the update does not send If-Match from state, or retries after the 412.
func TestAccSupportSource_changedOutsideTerraform(t *testing.T) {
	env := acctest.Start(t)
	proxy := acctest.NewProxy(t, env.URL)
	slug := acctest.Name("ops")
	cfg := func(src string) string { return acctest.ProviderConfig(proxy.URL, env.Token) + config(slug, src) }
	var putsBefore int
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		CheckDestroy:             checkReset(env),
		Steps: []resource.TestStep{
			{Config: cfg(firstSource)},
			{
				Config: cfg(secondSource),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate),
						acctest.Before(func() error {
							putsBefore = proxy.Seen(http.MethodPut, "/api/v1/operator/support/source")
							_, err := putSource(env, client.SupportSourceWrite{Enabled: ptr(false)})
							return err
						}),
					},
				},
				ExpectError: acctest.ErrorText("Support source changed outside Terraform", "The server holds version 3, but Terraform last read version 2",
					"Nothing was overwritten and the write was not retried", "Run `terraform plan`"),
			},
			{
				PreConfig: func() {
					if n := proxy.Seen(http.MethodPut, "/api/v1/operator/support/source") - putsBefore; n != 1 {
						t.Errorf("the failed update sent %d PUTs, want exactly 1", n)
					}
					s, err := source(env)
					if err != nil || s.Version != 3 || s.Enabled {
						t.Errorf("after the 412 the server holds %s (%v), want the change made by hand", jsonOf(s), err)
					}
				},
				Config: cfg(secondSource),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("version"), knownvalue.Int64Exact(4)),
				},
				Check: sourceIs(env, true, []string{"carol@ops.example"}, nil),
			},
		},
	})
}

// A support source set by other means is not overwritten by a create: it is imported first.
// One that already says what the configuration says is adopted.
//
// Fails when: Create writes over a document it did not read as the default.
func TestAccSupportSource_existing(t *testing.T) {
	env := acctest.Start(t)
	res, err := env.API.CreateIdentityProviderWithResponse(context.Background(), &client.CreateIdentityProviderParams{IdempotencyKey: acctest.Name("k")},
		client.IdentityProviderCreate{Slug: "ops", Protocol: client.ProviderProtocolOidc, Issuer: "https://login.ops.example", DisplayName: "Ops", ClientId: "renga"})
	if err != nil || res.JSON201 == nil {
		t.Fatalf("create provider: %v %s", err, res.Body)
	}
	idp := res.JSON201.Id
	if _, err := putSource(env, client.SupportSourceWrite{Enabled: ptr(true), ProviderId: &idp, AllowedEmails: &[]client.Email{"dave@ops.example"}}); err != nil {
		t.Fatal(err)
	}
	cfg := func(emails string) string {
		return env.Config(fmt.Sprintf(`
resource "renga_support_source" "test" {
  enabled        = true
  provider_id    = %q
  allowed_emails = [%s]
}
`, idp, emails))
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		CheckDestroy:             checkReset(env),
		Steps: []resource.TestStep{
			{
				Config:      cfg(`"erin@ops.example"`),
				ExpectError: acctest.ErrorText("The support source is already set", "terraform import <address of this resource> support_source"),
			},
			{
				PreConfig: func() {
					if s, err := source(env); err != nil || len(s.AllowedEmails) != 1 || s.AllowedEmails[0] != "dave@ops.example" {
						t.Errorf("the refused create changed the support source: %s (%v)", jsonOf(s), err)
					}
				},
				// The same document: adopted without a write.
				Config: cfg(`"dave@ops.example"`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("version"), knownvalue.Int64Exact(2)),
				},
			},
		},
	})
}
