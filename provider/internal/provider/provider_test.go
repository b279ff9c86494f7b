package provider_test

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"renga.dev/renga/provider/internal/acctest"
)

const createOrg = `
resource "renga_organization" "test" {
  slug         = "scoped"
  display_name = "Scoped"
}
`

// Configuration mistakes and refused tokens fail with diagnostics that say what to fix.
func TestAccProvider_diagnostics(t *testing.T) {
	env := acctest.Start(t)
	readOnly := env.Server.Token(t, "organizations:read")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		Steps: []resource.TestStep{
			{
				Config:      acctest.ProviderConfig("ftp://renga.example", env.Token) + `data "renga_deployment" "this" {}`,
				ExpectError: acctest.ErrorText("Invalid Renga URL", "the scheme must be https"),
			},
			{
				Config:      acctest.ProviderConfig(env.URL, "renga_user_abc") + `data "renga_deployment" "this" {}`,
				ExpectError: acctest.ErrorText("Not an operator token"),
			},
			{
				Config:      acctest.ProviderConfig(env.URL, "renga_operator_0000000000000000000000000000000000000000000000000000") + `data "renga_deployment" "this" {}`,
				ExpectError: acctest.ErrorText("Renga rejected the operator token", "401 unauthenticated"),
			},
			{
				Config:      acctest.ProviderConfig(env.URL, readOnly) + createOrg,
				ExpectError: acctest.ErrorText("The operator token lacks the organizations:write scope", "--scope organizations:write"),
			},
			{
				Config:      acctest.ProviderConfig(env.URL, readOnly) + `data "renga_deployment" "this" {}`,
				ExpectError: acctest.ErrorText("lacks the deployment:read scope"),
			},
		},
	})
}

// Without url and token the provider reads RENGA_URL and RENGA_OPERATOR_TOKEN, and says which
// is missing. (Not parallel: it sets the process environment.)
func TestAccProvider_environment(t *testing.T) {
	env := acctest.Start(t)
	t.Setenv("RENGA_URL", "")
	t.Setenv("RENGA_OPERATOR_TOKEN", "")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		Steps: []resource.TestStep{
			{
				Config:      `data "renga_deployment" "this" {}`,
				ExpectError: acctest.ErrorText("Missing Renga URL", "Missing Renga operator token"),
			},
			{
				PreConfig: func() {
					t.Setenv("RENGA_URL", env.URL)
					t.Setenv("RENGA_OPERATOR_TOKEN", env.Token)
				},
				Config: `data "renga_deployment" "this" {}`,
				Check:  resource.TestCheckResourceAttr("data.renga_deployment.this", "environment", "development"),
			},
		},
	})
}
