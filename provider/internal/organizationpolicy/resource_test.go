package organizationpolicy_test

import (
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
	"renga.dev/renga/provider/internal/policydoc"
)

const address = "renga_organization_policy.test"

func config(slug, policy string) string {
	return orgConfig(slug) + fmt.Sprintf(`
resource "renga_organization_policy" "test" {
  organization_id = renga_organization.test.id
%s
}
`, policy)
}

// orgConfig is the organization that config's policy belongs to, alone.
func orgConfig(slug string) string {
	return fmt.Sprintf(`
resource "renga_organization" "test" {
  slug         = %q
  display_name = "Policy Test"
}
`, slug)
}

const firstPolicy = `
  limits = {
    max_agents = 10
    max_users  = 5
  }
  locked_settings = {
    require_mfa           = true
    allowed_email_domains = ["b.example", "a.example"]
  }
`

const secondPolicy = `
  limits = {
    max_agents       = 20
    max_jobs_per_day = 0
  }
  entitlements = {
    jobs         = false
    owner_export = true
  }
`

func ptr[T any](v T) *T { return &v }

// policyIs checks the document the server holds for the organization in state.
func policyIs(env *acctest.Env, want client.Policy) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		orgID := s.RootModule().Resources["renga_organization.test"].Primary.ID
		got, err := env.Policy(orgID)
		if err != nil {
			return err
		}
		want.OrganizationId = orgID
		if want.Version == 0 {
			want.Version = got.Version
		}
		if jsonOf(got) != jsonOf(want) {
			return fmt.Errorf("the server holds %s, want %s", jsonOf(got), jsonOf(want))
		}
		return nil
	}
}

func jsonOf(p client.Policy) string {
	b, _ := json.Marshal(p)
	return string(b)
}

// checkReset asks the API that destroy left each organization's policy empty.
func checkReset(env *acctest.Env) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		for _, rs := range s.RootModule().Resources {
			if rs.Type != "renga_organization_policy" {
				continue
			}
			p, err := env.Policy(rs.Primary.Attributes["organization_id"])
			if err != nil {
				return err
			}
			if !policydoc.Empty(p) {
				return fmt.Errorf("after destroy the policy is %s, want empty", jsonOf(p))
			}
		}
		return nil
	}
}

func TestAccOrganizationPolicy(t *testing.T) {
	env := acctest.Start(t)
	slug := acctest.Name("policy")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		CheckDestroy:             checkReset(env),
		Steps: []resource.TestStep{
			{
				Config: env.Config(config(slug, firstPolicy)),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("version"), knownvalue.Int64Exact(2)),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("limits").AtMapKey("max_agents"), knownvalue.Int64Exact(10)),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("limits").AtMapKey("intake_bytes_per_day"), knownvalue.Null()),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("entitlements"), knownvalue.Null()),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("overwrite_existing"), knownvalue.Bool(false)),
				},
				Check: policyIs(env, client.Policy{
					Limits:         client.PolicyLimits{MaxAgents: ptr[int64](10), MaxUsers: ptr[int64](5)},
					LockedSettings: client.LockedSettings{RequireMfa: ptr(true), AllowedEmailDomains: &[]string{"a.example", "b.example"}},
				}),
			},
			{
				ResourceName:      address,
				ImportState:       true,
				ImportStateVerify: true,
			},
			{
				Config: env.Config(config(slug, secondPolicy)),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("version"), knownvalue.Int64Exact(3)),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("locked_settings"), knownvalue.Null()),
				},
				Check: policyIs(env, client.Policy{
					Limits:       client.PolicyLimits{MaxAgents: ptr[int64](20), MaxJobsPerDay: ptr[int64](0)},
					Entitlements: client.Entitlements{Jobs: ptr(false), OwnerExport: ptr(true)},
				}),
			},
			{
				// An empty object stays an empty object, not a diff against null.
				Config: env.Config(config(slug, "  limits = {}\n")),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("limits"), knownvalue.ObjectPartial(map[string]knownvalue.Check{"max_agents": knownvalue.Null()})),
				},
				Check: policyIs(env, client.Policy{}),
			},
			{
				// End on a non-empty policy, so that CheckDestroy proves destroy resets it.
				Config: env.Config(config(slug, secondPolicy)),
				Check: policyIs(env, client.Policy{
					Limits:       client.PolicyLimits{MaxAgents: ptr[int64](20), MaxJobsPerDay: ptr[int64](0)},
					Entitlements: client.Entitlements{Jobs: ptr(false), OwnerExport: ptr(true)},
				}),
			},
		},
	})
}

// The policy changes through the API after Terraform planned and before it applies: the update
// fails with the 412 diagnostic, is sent once and never retried, overwrites nothing; the next
// plan refreshes and the apply converges.
func TestAccOrganizationPolicy_changedOutsideTerraform(t *testing.T) {
	env := acctest.Start(t)
	proxy := acctest.NewProxy(t, env.URL)
	slug := acctest.Name("race")
	var orgID string
	byHand := client.PolicyWrite{Limits: &client.PolicyLimits{MaxAgents: ptr[int64](99)}}
	cfg := func(policy string) string { return acctest.ProviderConfig(proxy.URL, env.Token) + config(slug, policy) }
	var putsBefore int
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		CheckDestroy:             checkReset(env),
		Steps: []resource.TestStep{
			{
				Config: cfg(firstPolicy),
				Check: func(s *terraform.State) error {
					orgID = s.RootModule().Resources["renga_organization.test"].Primary.ID
					return nil
				},
			},
			{
				Config: cfg(secondPolicy),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate),
						acctest.Before(func() error {
							putsBefore = proxy.Seen(http.MethodPut, "/api/v1/operator/organizations/"+orgID+"/policy")
							_, err := env.PutPolicy(orgID, byHand)
							return err
						}),
					},
				},
				ExpectError: acctest.ErrorText("Policy changed outside Terraform", "The server holds version 3, but Terraform last read version 2", "Nothing was overwritten and the write was not retried", "Run `terraform plan`"),
			},
			{
				PreConfig: func() {
					if n := proxy.Seen(http.MethodPut, "/api/v1/operator/organizations/"+orgID+"/policy") - putsBefore; n != 1 {
						t.Errorf("the failed update sent %d PUTs, want exactly 1", n)
					}
					p, err := env.Policy(orgID)
					if err != nil || p.Version != 3 || p.Limits.MaxAgents == nil || *p.Limits.MaxAgents != 99 {
						t.Errorf("after the 412 the server holds %s (%v), want the change made by hand", jsonOf(p), err)
					}
				},
				Config: cfg(secondPolicy),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate)},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("version"), knownvalue.Int64Exact(4)),
				},
				Check: policyIs(env, client.Policy{
					Limits:       client.PolicyLimits{MaxAgents: ptr[int64](20), MaxJobsPerDay: ptr[int64](0)},
					Entitlements: client.Entitlements{Jobs: ptr(false), OwnerExport: ptr(true)},
				}),
			},
		},
	})
}

// A policy set by other means is not overwritten by a create unless overwrite_existing says so.
func TestAccOrganizationPolicy_existing(t *testing.T) {
	env := acctest.Start(t)
	slug := acctest.Name("existing")
	org := env.CreateOrganization(t, slug, "Existing Policy")
	if _, err := env.PutPolicy(org.Id, client.PolicyWrite{Entitlements: &client.Entitlements{Jobs: ptr(false)}}); err != nil {
		t.Fatal(err)
	}
	cfg := func(extra string) string {
		return env.Config(fmt.Sprintf(`
resource "renga_organization_policy" "test" {
  organization_id = %q
  limits = {
    max_users = 3
  }
%s
}
`, org.Id, extra))
	}
	var version int64
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		CheckDestroy:             checkReset(env),
		Steps: []resource.TestStep{
			{
				Config:      cfg(""),
				ExpectError: acctest.ErrorText("Organization already has a policy", "terraform import", "overwrite_existing = true"),
			},
			{
				Config: cfg("  overwrite_existing = true\n"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("entitlements"), knownvalue.Null()),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("limits").AtMapKey("max_users"), knownvalue.Int64Exact(3)),
				},
				Check: func(*terraform.State) error {
					p, err := env.Policy(org.Id)
					if err != nil {
						return err
					}
					if p.Entitlements.Jobs != nil || p.Limits.MaxUsers == nil || *p.Limits.MaxUsers != 3 {
						return fmt.Errorf("the server holds %s, want the configured document only", jsonOf(p))
					}
					version = p.Version
					return nil
				},
			},
			{
				// Dropping overwrite_existing afterwards changes nothing on the server.
				Config: cfg(""),
				Check: func(s *terraform.State) error {
					p, err := env.Policy(org.Id)
					if err != nil {
						return err
					}
					if p.Version != version {
						return fmt.Errorf("the policy was written again: version %d, was %d", p.Version, version)
					}
					return resource.TestCheckResourceAttr(address, "overwrite_existing", "false")(s)
				},
			},
		},
	})
}

// A policy destroyed and created again with the same document, within the Idempotency-Key's
// retention, is written again: the create's first write (at version 1, the unwritten policy's)
// repeats the first create's key, and its replayed answer is not taken for a write.
func TestAccOrganizationPolicy_recreatedWithTheSameDocument(t *testing.T) {
	env := acctest.Start(t)
	slug := acctest.Name("recreate")
	first := client.Policy{
		Limits:         client.PolicyLimits{MaxAgents: ptr[int64](10), MaxUsers: ptr[int64](5)},
		LockedSettings: client.LockedSettings{RequireMfa: ptr(true), AllowedEmailDomains: &[]string{"a.example", "b.example"}},
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		CheckDestroy:             checkReset(env),
		Steps: []resource.TestStep{
			{
				Config: env.Config(config(slug, firstPolicy)),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("version"), knownvalue.Int64Exact(2)),
				},
				Check: policyIs(env, first),
			},
			{
				// Destroyed: the policy is reset to empty, version 3.
				Config: env.Config(orgConfig(slug)),
				Check:  policyIs(env, client.Policy{Version: 3}),
			},
			{
				Config: env.Config(config(slug, firstPolicy)),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("version"), knownvalue.Int64Exact(4)),
				},
				Check: policyIs(env, client.Policy{Version: 4, Limits: first.Limits, LockedSettings: first.LockedSettings}),
			},
		},
	})
}
