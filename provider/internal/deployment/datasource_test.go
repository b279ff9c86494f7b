package deployment_test

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"renga.dev/renga/provider/internal/acctest"
)

func TestAccDeploymentDataSource(t *testing.T) {
	env := acctest.Start(t)
	const d = "data.renga_deployment.this"
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		Steps: []resource.TestStep{{
			Config: env.Config(`data "renga_deployment" "this" {}`),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(d, tfjsonpath.New("environment"), knownvalue.StringExact("development")),
				statecheck.ExpectKnownValue(d, tfjsonpath.New("public_url"), knownvalue.StringExact(env.Server.Config.PublicURL)),
				statecheck.ExpectKnownValue(d, tfjsonpath.New("version"), knownvalue.StringExact("test")),
				statecheck.ExpectKnownValue(d, tfjsonpath.New("identifier"), knownvalue.Null()),
				statecheck.ExpectKnownValue(d, tfjsonpath.New("deletion_grace_period"), knownvalue.StringExact("720h0m0s")),
				statecheck.ExpectKnownValue(d, tfjsonpath.New("policy_defaults").AtMapKey("limits").AtMapKey("max_agents"), knownvalue.Int64Exact(1000)),
				statecheck.ExpectKnownValue(d, tfjsonpath.New("policy_defaults").AtMapKey("entitlements").AtMapKey("owner_export"), knownvalue.Bool(false)),
				statecheck.ExpectKnownValue(d, tfjsonpath.New("policy_defaults").AtMapKey("locked_settings").AtMapKey("require_sso"), knownvalue.Null()),
			},
		}},
	})
}
