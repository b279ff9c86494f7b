package organizations_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/provider/internal/acctest"
)

func TestAccOrganizationsDataSource(t *testing.T) {
	env := acctest.Start(t)
	first := env.CreateOrganization(t, acctest.Name("first"), "First")
	second := env.CreateOrganization(t, acctest.Name("second"), "Second")
	res, err := env.API.ScheduleOrganizationDeletionWithResponse(context.Background(), second.Id, &client.ScheduleOrganizationDeletionParams{})
	if err != nil || res.StatusCode() != http.StatusOK {
		t.Fatalf("schedule deletion: %v", err)
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		Steps: []resource.TestStep{{
			Config: env.Config(`
data "renga_organizations" "all" {}

data "renga_organizations" "pending" {
  state = "deletion_pending"
}
`),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.renga_organizations.all", tfjsonpath.New("organizations"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.ObjectPartial(map[string]knownvalue.Check{"id": knownvalue.StringExact(first.Id), "state": knownvalue.StringExact("active")}),
					knownvalue.ObjectPartial(map[string]knownvalue.Check{"id": knownvalue.StringExact(second.Id), "purge_after": knownvalue.NotNull()}),
				})),
				statecheck.ExpectKnownValue("data.renga_organizations.pending", tfjsonpath.New("organizations"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.ObjectPartial(map[string]knownvalue.Check{"slug": knownvalue.StringExact(second.Slug), "state": knownvalue.StringExact("deletion_pending")}),
				})),
			},
		}},
	})
}
