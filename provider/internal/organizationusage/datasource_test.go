package organizationusage_test

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"renga.dev/renga/provider/internal/acctest"
)

func TestAccOrganizationUsageDataSource(t *testing.T) {
	env := acctest.Start(t)
	org := env.CreateOrganization(t, acctest.Name("usage"), "Usage")
	cfg := func(from, to string) string {
		return env.Config(fmt.Sprintf(`
data "renga_organization_usage" "test" {
  organization_id = %q
  from            = %q
  to              = %q
}
`, org.Id, from, to))
	}
	zero := knownvalue.Int64Exact(0)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		Steps: []resource.TestStep{
			{
				Config:      cfg("2026-03-10", "2026-03-01"),
				ExpectError: regexp.MustCompile(`to must not be before from`),
			},
			{
				Config:      cfg("2025-01-01", "2026-03-01"),
				ExpectError: regexp.MustCompile(`at most 400 days`),
			},
			{
				Config: cfg("2026-02-27", "2026-03-01"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.renga_organization_usage.test", tfjsonpath.New("days"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.ObjectExact(map[string]knownvalue.Check{"day": knownvalue.StringExact("2026-02-27"), "intake_requests": zero, "intake_bytes": zero, "jobs_created": zero, "terminal_minutes": zero}),
						knownvalue.ObjectPartial(map[string]knownvalue.Check{"day": knownvalue.StringExact("2026-02-28")}),
						knownvalue.ObjectPartial(map[string]knownvalue.Check{"day": knownvalue.StringExact("2026-03-01")}),
					})),
					statecheck.ExpectKnownValue("data.renga_organization_usage.test", tfjsonpath.New("totals").AtMapKey("intake_bytes"), zero),
				},
			},
		},
	})
}
