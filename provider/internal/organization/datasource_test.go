package organization_test

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

func TestAccOrganizationDataSource(t *testing.T) {
	env := acctest.Start(t)
	slug := acctest.Name("lookup")
	org := env.CreateOrganization(t, slug, "Lookup GmbH")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		// The invalid configurations come first: the last step's configuration is the one
		// destroyed at the end.
		Steps: []resource.TestStep{
			{
				Config:      env.Config(`data "renga_organization" "missing" { slug = "no-such-org" }`),
				ExpectError: regexp.MustCompile(`No such organization`),
			},
			{
				Config: env.Config(fmt.Sprintf(`
data "renga_organization" "both" {
  id   = %q
  slug = %q
}
`, org.Id, slug)),
				ExpectError: regexp.MustCompile(`Invalid Attribute Combination`),
			},
			{
				Config: env.Config(fmt.Sprintf(`
data "renga_organization" "by_id" {
  id = %q
}

data "renga_organization" "by_slug" {
  slug = %q
}
`, org.Id, slug)),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.renga_organization.by_id", tfjsonpath.New("slug"), knownvalue.StringExact(slug)),
					statecheck.ExpectKnownValue("data.renga_organization.by_id", tfjsonpath.New("display_name"), knownvalue.StringExact("Lookup GmbH")),
					statecheck.ExpectKnownValue("data.renga_organization.by_id", tfjsonpath.New("state"), knownvalue.StringExact("active")),
					statecheck.ExpectKnownValue("data.renga_organization.by_id", tfjsonpath.New("purge_after"), knownvalue.Null()),
					statecheck.ExpectKnownValue("data.renga_organization.by_slug", tfjsonpath.New("id"), knownvalue.StringExact(org.Id)),
					statecheck.ExpectKnownValue("data.renga_organization.by_slug", tfjsonpath.New("version"), knownvalue.Int64Exact(1)),
				},
			},
		},
	})
}
