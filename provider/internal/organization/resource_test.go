package organization_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
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

const address = "renga_organization.test"

const orgsPath = "/api/v1/operator/organizations"

func orgConfig(slug, name string) string {
	return fmt.Sprintf(`
resource "renga_organization" "test" {
  slug         = %q
  display_name = %q
}
`, slug, name)
}

// checkDestroyed asks the API that every organization Terraform managed has its deletion
// scheduled (or is gone).
func checkDestroyed(env *acctest.Env) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		for _, rs := range s.RootModule().Resources {
			if rs.Type != "renga_organization" {
				continue
			}
			res, err := env.API.GetOrganizationWithResponse(context.Background(), rs.Primary.ID)
			if err != nil {
				return err
			}
			switch res.StatusCode() {
			case http.StatusNotFound:
			case http.StatusOK:
				if client.OrganizationState(res.JSON200.State) != client.OrganizationStateDeletionPending {
					return fmt.Errorf("organization %s is %s after destroy, want deletion_pending", rs.Primary.ID, res.JSON200.State)
				}
			default:
				return fmt.Errorf("get organization %s: %d %s", rs.Primary.ID, res.StatusCode(), res.Body)
			}
		}
		return nil
	}
}

// exactlyOne checks that the deployment holds one organization with slug, and that it is the
// one in Terraform's state.
func exactlyOne(env *acctest.Env, slug string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		orgs, err := env.Organizations(slug)
		if err != nil {
			return err
		}
		if len(orgs) != 1 {
			return fmt.Errorf("%d organizations with slug %s, want 1", len(orgs), slug)
		}
		if got := s.RootModule().Resources[address].Primary.ID; got != orgs[0].Id {
			return fmt.Errorf("state holds %s, the deployment %s", got, orgs[0].Id)
		}
		return nil
	}
}

func TestAccOrganization(t *testing.T) {
	env := acctest.Start(t)
	slug := acctest.Name("acme")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		CheckDestroy:             checkDestroyed(env),
		Steps: []resource.TestStep{
			{
				// Refused while planning, as the server would refuse it (openapi.yaml's rule for names).
				Config:      env.Config(orgConfig(slug, "Acme\u202eCorporation")),
				ExpectError: acctest.ErrorText("must not contain control, invisible or direction-changing characters"),
			},
			{
				Config: env.Config(orgConfig(slug, "Acme Corporation")),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("id"), knownvalue.StringRegexp(regexp.MustCompile(`^org_[0-9a-z]{26}$`))),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("slug"), knownvalue.StringExact(slug)),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("display_name"), knownvalue.StringExact("Acme Corporation")),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("state"), knownvalue.StringExact("active")),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("version"), knownvalue.Int64Exact(1)),
				},
				Check: exactlyOne(env, slug),
			},
			{
				ResourceName:      address,
				ImportState:       true,
				ImportStateVerify: true,
			},
			{
				Config: env.Config(orgConfig(slug, "Acme Inc.")),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("display_name"), knownvalue.StringExact("Acme Inc.")),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("version"), knownvalue.Int64Exact(2)),
				},
				Check: func(s *terraform.State) error {
					orgs, err := env.Organizations(slug)
					if err != nil {
						return err
					}
					if len(orgs) != 1 || orgs[0].DisplayName != "Acme Inc." {
						return fmt.Errorf("the deployment holds %+v", orgs)
					}
					return nil
				},
			},
			{
				// A new slug is a new organization; the old one's deletion is scheduled.
				Config: env.Config(orgConfig(slug+"-2", "Acme Inc.")),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(address, plancheck.ResourceActionDestroyBeforeCreate)},
				},
				Check: func(s *terraform.State) error {
					old, err := env.Organizations(slug)
					if err != nil {
						return err
					}
					if len(old) != 1 || client.OrganizationState(old[0].State) != client.OrganizationStateDeletionPending {
						return fmt.Errorf("the replaced organization: %+v", old)
					}
					return nil
				},
			},
		},
	})
}

// Out-of-band changes: a new display name shows as a diff and is put back; a scheduled deletion
// makes the next plan create the organization again (and the apply explains that the slug is
// still taken by the organization pending deletion).
func TestAccOrganization_drift(t *testing.T) {
	env := acctest.Start(t)
	slug := acctest.Name("drift")
	config := env.Config(orgConfig(slug, "Drift Ltd"))
	var id string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		CheckDestroy:             checkDestroyed(env),
		Steps: []resource.TestStep{
			{
				Config: config,
				Check: func(s *terraform.State) error {
					id = s.RootModule().Resources[address].Primary.ID
					return nil
				},
			},
			{
				PreConfig: func() {
					res, err := env.API.UpdateOrganizationWithResponse(context.Background(), id,
						&client.UpdateOrganizationParams{IfMatch: apiclient.IfMatch(1)}, client.OrganizationUpdate{DisplayName: "Renamed by hand"})
					if err != nil || res.StatusCode() != http.StatusOK {
						t.Fatalf("rename out of band: %v %s", err, res.Body)
					}
				},
				Config:             config,
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PostApplyPostRefresh: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate),
						plancheck.ExpectKnownValue(address, tfjsonpath.New("display_name"), knownvalue.StringExact("Drift Ltd")),
					},
				},
			},
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("display_name"), knownvalue.StringExact("Drift Ltd")),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("version"), knownvalue.Int64Exact(3)),
				},
			},
			{
				PreConfig: func() {
					res, err := env.API.ScheduleOrganizationDeletionWithResponse(context.Background(), id, &client.ScheduleOrganizationDeletionParams{})
					if err != nil || res.StatusCode() != http.StatusOK {
						t.Fatalf("delete out of band: %v %s", err, res.Body)
					}
				},
				Config:             config,
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectResourceAction(address, plancheck.ResourceActionCreate)},
				},
			},
			{
				Config:      config,
				ExpectError: acctest.ErrorText("Slug already taken", "deletion is pending", "terraform import"),
			},
		},
	})
}

// The server commits a create but its response is lost on the way back: the provider's retry
// sends the same Idempotency-Key and adopts the organization the first attempt made.
func TestAccOrganization_lostResponseRetried(t *testing.T) {
	env := acctest.Start(t)
	proxy := acctest.NewProxy(t, env.URL)
	proxy.DropFirst(1, http.MethodPost, orgsPath)
	slug := acctest.Name("lost")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		CheckDestroy:             checkDestroyed(env),
		Steps: []resource.TestStep{{
			Config: acctest.ProviderConfig(proxy.URL, env.Token) + orgConfig(slug, "Lost & Found"),
			Check: resource.ComposeAggregateTestCheckFunc(
				exactlyOne(env, slug),
				adoptedDropped(proxy),
				func(*terraform.State) error {
					if n := proxy.Seen(http.MethodPost, orgsPath); n != 2 {
						return fmt.Errorf("%d creates reached the server, want 2 (the lost one and one retry)", n)
					}
					return nil
				},
			),
		}},
	})
}

// adoptedDropped checks that the organization in state is the one whose create response the
// proxy dropped.
func adoptedDropped(proxy *acctest.Proxy) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		dropped := proxy.Dropped()
		if len(dropped) == 0 || dropped[0].Status != http.StatusCreated {
			return fmt.Errorf("the proxy dropped %+v, want a committed create", dropped)
		}
		var first client.Organization
		if err := json.Unmarshal(dropped[0].Body, &first); err != nil {
			return err
		}
		if got := s.RootModule().Resources[address].Primary.ID; got != first.Id {
			return fmt.Errorf("state holds %s, the lost response created %s", got, first.Id)
		}
		return nil
	}
}

// Every attempt of the create loses its response, so the apply fails although the server made
// the organization; the next apply sends the same key and adopts it instead of failing on the
// taken slug or making a second one.
func TestAccOrganization_interruptedApplyConverges(t *testing.T) {
	env := acctest.Start(t)
	proxy := acctest.NewProxy(t, env.URL)
	proxy.Drop(func(r *http.Request) bool { return r.Method == http.MethodPost && r.URL.Path == orgsPath })
	slug := acctest.Name("interrupted")
	config := acctest.ProviderConfig(proxy.URL, env.Token) + orgConfig(slug, "Interrupted Inc")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		CheckDestroy:             checkDestroyed(env),
		Steps: []resource.TestStep{
			{
				Config:      config,
				ExpectError: acctest.ErrorText("Cannot reach the Renga API", "after 5 attempts"),
			},
			{
				PreConfig: func() {
					// Go's transport may repeat a keyed request once more on its own when a
					// reused connection breaks.
					if n := proxy.Seen(http.MethodPost, orgsPath); n < acctest.FastRetries.MaxAttempts {
						t.Errorf("%d create attempts in the failed apply, want at least %d", n, acctest.FastRetries.MaxAttempts)
					}
					orgs, err := env.Organizations(slug)
					if err != nil || len(orgs) != 1 {
						t.Fatalf("after the failed apply the deployment holds %v (%v), want the one organization the first attempt committed", orgs, err)
					}
					// Renamed in the meantime: the adopting apply puts the configured name back.
					res, err := env.API.UpdateOrganizationWithResponse(context.Background(), orgs[0].Id,
						&client.UpdateOrganizationParams{IfMatch: apiclient.IfMatch(orgs[0].Version)}, client.OrganizationUpdate{DisplayName: "Renamed meanwhile"})
					if err != nil || res.StatusCode() != http.StatusOK {
						t.Fatalf("rename: %v", err)
					}
					proxy.Drop(nil)
				},
				Config: config,
				Check: resource.ComposeAggregateTestCheckFunc(exactlyOne(env, slug), adoptedDropped(proxy),
					resource.TestCheckResourceAttr(address, "display_name", "Interrupted Inc"),
					resource.TestCheckResourceAttr(address, "version", "3")),
			},
		},
	})
}

// The organization is renamed through the API after Terraform planned a rename and before it
// applies: the update fails with the 412 diagnostic and overwrites nothing; the next plan
// refreshes and the apply converges.
func TestAccOrganization_renamedOutsideTerraform(t *testing.T) {
	env := acctest.Start(t)
	slug := acctest.Name("renamed")
	var orgID string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		CheckDestroy:             checkDestroyed(env),
		Steps: []resource.TestStep{
			{
				Config: env.Config(orgConfig(slug, "First")),
				Check: func(s *terraform.State) error {
					orgID = s.RootModule().Resources[address].Primary.ID
					return nil
				},
			},
			{
				Config: env.Config(orgConfig(slug, "Second")),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate),
						acctest.Before(func() error {
							res, err := env.API.UpdateOrganizationWithResponse(context.Background(), orgID,
								&client.UpdateOrganizationParams{IfMatch: `"1"`}, client.OrganizationUpdate{DisplayName: "By hand"})
							if err != nil {
								return err
							}
							if res.StatusCode() != http.StatusOK {
								return fmt.Errorf("rename by hand: %d %s", res.StatusCode(), res.Body)
							}
							return nil
						}),
					},
				},
				ExpectError: acctest.ErrorText("Organization changed outside Terraform", "Nothing was overwritten", "Run `terraform plan`"),
			},
			{
				PreConfig: func() {
					res, err := env.API.GetOrganizationWithResponse(context.Background(), orgID)
					if err != nil || res.JSON200 == nil || res.JSON200.DisplayName != "By hand" {
						t.Errorf("after the 412 the server does not hold the name given by hand (%v)", err)
					}
				},
				Config: env.Config(orgConfig(slug, "Second")),
				Check: func(s *terraform.State) error {
					res, err := env.API.GetOrganizationWithResponse(context.Background(), orgID)
					if err != nil {
						return fmt.Errorf("read the organization: %w", err)
					}
					if res.JSON200 == nil || res.JSON200.DisplayName != "Second" || res.JSON200.Version != 3 {
						return fmt.Errorf("after converging the server holds %s", res.Body)
					}
					return nil
				},
			},
		},
	})
}
