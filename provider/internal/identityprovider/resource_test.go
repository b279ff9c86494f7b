package identityprovider_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tfconfig "github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/provider/internal/acctest"
	"renga.dev/renga/provider/internal/apiclient"
	"renga.dev/renga/server/domain"
)

const address = "renga_identity_provider.test"

// config is a provider block for slug; with a secret version, the client secret comes from the
// ephemeral variable client_secret (its value in the step's ConfigVariables, vars), as the
// documentation advises: then no file Terraform writes and no plan should hold it.
func config(slug, displayName, extra string, secretVersion int) string {
	wo := ""
	if secretVersion != 0 {
		wo = fmt.Sprintf("  client_secret_wo         = var.client_secret\n  client_secret_wo_version = %d\n", secretVersion)
	}
	return fmt.Sprintf(`
variable "client_secret" {
  type      = string
  sensitive = true
  ephemeral = true
  default   = null
}

resource "renga_identity_provider" "test" {
  slug                  = %q
  issuer                = "https://login.example.com/%s"
  display_name          = %q
  client_id             = "renga-%s"
  allowed_email_domains = ["example.com"]
%s%s}
`, slug, slug, displayName, slug, wo, extra)
}

// vars gives the ephemeral variable client_secret its value.
func vars(secret string) tfconfig.Variables {
	return tfconfig.Variables{"client_secret": tfconfig.StringVariable(secret)}
}

// storedSecret opens the client secret a provider's revision holds on the server ("" when
// none), as the server's own tests do: the deployment's secret box opens the sealed value.
func storedSecret(env *acctest.Env, id string, revision int64) (string, error) {
	p := domain.Providers{Env: env.Server.Config.IdentityProviders, Secrets: env.Server.Config.Secrets}
	s, ok, err := p.ProviderClientSecret(context.Background(), env.Server.Pool, id, revision)
	if err != nil || !ok {
		return "", err
	}
	return s, nil
}

// secretIs checks the secret the server holds for the revision in state.
func secretIs(env *acctest.Env, want string, revision int64) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		id := s.RootModule().Resources[address].Primary.ID
		got, err := storedSecret(env, id, revision)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("revision %d holds client secret %q, want %q", revision, got, want)
		}
		return nil
	}
}

// noSecretInState fails when any secret appears anywhere in the state Terraform shows
// (`terraform show -json`: values, sensitive values, everything).
type noSecretInState []string

func (secrets noSecretInState) CheckState(_ context.Context, req statecheck.CheckStateRequest, resp *statecheck.CheckStateResponse) {
	b, err := json.Marshal(req.State)
	if err != nil {
		resp.Error = err
		return
	}
	if len(b) < 100 || !strings.Contains(string(b), "client_secret_wo_version") {
		resp.Error = fmt.Errorf("the state shown is not the one expected: %s", b)
		return
	}
	for _, s := range secrets {
		if strings.Contains(string(b), s) {
			resp.Error = fmt.Errorf("the client secret %q is in Terraform's state: %s", s, b)
		}
	}
}

// noSecretInPlan fails when any secret appears anywhere in the plan (`terraform show -json` of
// the saved plan: changes, planned values, prior state, variables, configuration).
type noSecretInPlan []string

func (secrets noSecretInPlan) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	b, err := json.Marshal(req.Plan)
	if err != nil {
		resp.Error = err
		return
	}
	if !strings.Contains(string(b), address) {
		resp.Error = fmt.Errorf("the plan does not show %s: %s", address, b)
		return
	}
	for _, s := range secrets {
		if strings.Contains(string(b), s) {
			resp.Error = fmt.Errorf("the client secret %q is in Terraform's plan: %s", s, b)
		}
	}
}

// noSecretInFiles fails when any secret is in a file Terraform wrote in dir (the raw state
// file, its backup, saved plans, lock files), the configuration it was given aside (the .tf
// files, and the .tfvars.json the test framework writes the variables' values to).
func noSecretInFiles(dir string, secrets ...string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		states := 0
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !d.Type().IsRegular() {
				return err
			}
			name := d.Name()
			if strings.HasSuffix(name, ".tf") || strings.HasSuffix(name, ".tf.json") || strings.HasSuffix(name, ".tfvars.json") {
				return nil
			}
			if name == "terraform.tfstate" {
				states++
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, s := range secrets {
				if strings.Contains(string(b), s) {
					return fmt.Errorf("the client secret %q is in %s", s, p)
				}
			}
			return nil
		})
		if err == nil && states == 0 {
			err = fmt.Errorf("no terraform.tfstate under %s: the scan looked at nothing", dir)
		}
		return err
	}
}

// provider reads the provider in state from the server.
func provider(env *acctest.Env, s *terraform.State) (client.IdentityProvider, error) {
	id := s.RootModule().Resources[address].Primary.ID
	res, err := env.API.GetIdentityProviderWithResponse(context.Background(), id)
	if err != nil {
		return client.IdentityProvider{}, err
	}
	if res.JSON200 == nil {
		return client.IdentityProvider{}, fmt.Errorf("get identity provider: %d %s", res.StatusCode(), res.Body)
	}
	return *res.JSON200, nil
}

// checkDeleted asks the API that destroy deleted every provider in state.
func checkDeleted(env *acctest.Env) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		for _, rs := range s.RootModule().Resources {
			if rs.Type != "renga_identity_provider" {
				continue
			}
			res, err := env.API.GetIdentityProviderWithResponse(context.Background(), rs.Primary.ID)
			if err != nil {
				return err
			}
			if res.StatusCode() != http.StatusNotFound {
				return fmt.Errorf("after destroy, GET %s answers %d", rs.Primary.ID, res.StatusCode())
			}
		}
		return nil
	}
}

// The lifecycle: create with a write-only secret, import, update without and with the secret.
// The secret is never in the state (shown or raw), the plan, or a file Terraform wrote, and the
// server holds what the configuration sent.
//
// Fails when: client_secret_wo is not write-only (it lands in the state: noSecretInState and
// noSecretInFiles), the version change does not send the secret (secretIs at revision 3), an
// update without a version change sends it or clears it (secretIs at revision 2).
func TestAccIdentityProvider(t *testing.T) {
	env := acctest.Start(t)
	slug := acctest.Name("idp")
	first, second, third := "first-secret-"+acctest.Name("s"), "second-secret-"+acctest.Name("s"), "third-secret-"+acctest.Name("s")
	env.Server.Track(first, second, third) // the server's own scan: logs, audit, idempotency records
	secrets := []string{first, second, third}
	dir := t.TempDir()
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		WorkingDir:               dir,
		CheckDestroy:             checkDeleted(env),
		Steps: []resource.TestStep{
			{
				Config:          env.Config(config(slug, "Example Corp", "", 1)),
				ConfigVariables: vars(first),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(address, plancheck.ResourceActionCreate), noSecretInPlan(secrets)},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					noSecretInState(secrets),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("client_secret_wo"), knownvalue.Null()),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("client_secret_wo_version"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("protocol"), knownvalue.StringExact("oidc")),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("scopes"), knownvalue.SetExact([]knownvalue.Check{
						knownvalue.StringExact("openid"), knownvalue.StringExact("email"), knownvalue.StringExact("profile")})),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("state"), knownvalue.StringExact("enabled")),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("revision"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("pending_revision"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("active_revision"), knownvalue.Null()),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("version"), knownvalue.Int64Exact(1)),
				},
				Check: resource.ComposeTestCheckFunc(secretIs(env, first, 1), noSecretInFiles(dir, secrets...)),
			},
			{
				ResourceName:      address,
				ImportState:       true,
				ImportStateVerify: true,
				// Write-only: never in state, so nothing to compare; the version is the
				// configuration's alone (the server knows nothing of it).
				ImportStateVerifyIgnore: []string{"client_secret_wo", "client_secret_wo_version"},
			},
			{
				// Configuration changes, the secret and its version do not: the PUT leaves the
				// secret out and the server keeps it in the new revision.
				Config:          env.Config(config(slug, "Example Corp (renamed)", `  scopes = ["openid", "email"]`+"\n", 1)),
				ConfigVariables: vars(first),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate), noSecretInPlan(secrets)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					noSecretInState(secrets),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("display_name"), knownvalue.StringExact("Example Corp (renamed)")),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("revision"), knownvalue.Int64Exact(2)),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("pending_revision"), knownvalue.Int64Exact(2)),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("version"), knownvalue.Int64Exact(2)),
				},
				Check: resource.ComposeTestCheckFunc(secretIs(env, first, 2), noSecretInFiles(dir, secrets...),
					func(s *terraform.State) error {
						p, err := provider(env, s)
						if err == nil && (p.DisplayName != "Example Corp (renamed)" || strings.Join(p.Scopes, " ") != "email openid") {
							err = fmt.Errorf("the server holds %+v", p)
						}
						return err
					}),
			},
			{
				// A new secret with a new version: sent, and the server holds it.
				Config:          env.Config(config(slug, "Example Corp (renamed)", `  scopes = ["openid", "email"]`+"\n", 2)),
				ConfigVariables: vars(second),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate), noSecretInPlan(secrets)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					noSecretInState(secrets),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("client_secret_wo_version"), knownvalue.Int64Exact(2)),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("revision"), knownvalue.Int64Exact(3)),
				},
				Check: resource.ComposeTestCheckFunc(secretIs(env, second, 3), noSecretInFiles(dir, secrets...)),
			},
			{
				// A new secret under the same version is not seen (write-only values cannot be
				// diffed): nothing to do, nothing sent. That is what the version is for.
				Config:          env.Config(config(slug, "Example Corp (renamed)", `  scopes = ["openid", "email"]`+"\n", 2)),
				ConfigVariables: vars(third),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: resource.ComposeTestCheckFunc(secretIs(env, second, 3), noSecretInFiles(dir, secrets...),
					func(s *terraform.State) error {
						p, err := provider(env, s)
						if err == nil && p.Revision != 3 {
							err = fmt.Errorf("revision %d, want 3: something was written", p.Revision)
						}
						return err
					}),
			},
		},
	})
}

// A configuration that sets the secret without its version (or the reverse) is refused before
// anything is sent.
func TestAccIdentityProvider_secretNeedsItsVersion(t *testing.T) {
	env := acctest.Start(t)
	slug := acctest.Name("idp")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		Steps: []resource.TestStep{
			{
				Config:      env.Config(config(slug, "Example Corp", `  client_secret_wo = "only-the-secret"`+"\n", 0)),
				ExpectError: acctest.ErrorText("Missing client_secret_wo_version", "Set client_secret_wo_version too"),
			},
			{
				Config:      env.Config(config(slug, "Example Corp", `  client_secret_wo_version = 1`+"\n", 0)),
				ExpectError: acctest.ErrorText("Missing client_secret_wo"),
			},
		},
	})
}

// The provider changes through the API after Terraform planned and before it applies: the update
// fails with the 412 diagnostic, sent once and never retried, and overwrites nothing; the next
// plan refreshes and the apply converges.
//
// Fails when: the update does not send If-Match from state (no 412: the change made by hand is
// overwritten), or retries after the 412 (two PUTs).
func TestAccIdentityProvider_changedOutsideTerraform(t *testing.T) {
	env := acctest.Start(t)
	proxy := acctest.NewProxy(t, env.URL)
	slug := acctest.Name("race")
	secret := "race-secret-" + acctest.Name("s")
	env.Server.Track(secret)
	cfg := func(name string) string {
		return acctest.ProviderConfig(proxy.URL, env.Token) + config(slug, name, "", 1)
	}
	var id string
	var putsBefore int
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		CheckDestroy:             checkDeleted(env),
		Steps: []resource.TestStep{
			{
				Config:          cfg("Before"),
				ConfigVariables: vars(secret),
				Check: func(s *terraform.State) error {
					id = s.RootModule().Resources[address].Primary.ID
					return nil
				},
			},
			{
				Config:          cfg("By Terraform"),
				ConfigVariables: vars(secret),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate),
						acctest.Before(func() error {
							putsBefore = proxy.Seen(http.MethodPut, "/api/v1/operator/identity-providers/"+id)
							return putByHand(env, id, "By hand")
						}),
					},
				},
				ExpectError: acctest.ErrorText("Identity provider changed outside Terraform", "The server holds version 2, but Terraform last read version 1",
					"Nothing was overwritten and the write was not retried", "Run `terraform plan`"),
			},
			{
				PreConfig: func() {
					if n := proxy.Seen(http.MethodPut, "/api/v1/operator/identity-providers/"+id) - putsBefore; n != 1 {
						t.Errorf("the failed update sent %d PUTs, want exactly 1", n)
					}
					res, err := env.API.GetIdentityProviderWithResponse(context.Background(), id)
					if err != nil || res.JSON200 == nil || res.JSON200.DisplayName != "By hand" || res.JSON200.Version != 2 {
						t.Errorf("after the 412 the server holds %s (%v), want the change made by hand", res.Body, err)
					}
				},
				Config:          cfg("By Terraform"),
				ConfigVariables: vars(secret),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate)},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("version"), knownvalue.Int64Exact(3)),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("display_name"), knownvalue.StringExact("By Terraform")),
				},
				Check: secretIs(env, secret, 3),
			},
		},
	})
}

// putByHand renames a provider through the API, outside Terraform.
func putByHand(env *acctest.Env, id, name string) error {
	ctx := context.Background()
	cur, err := env.API.GetIdentityProviderWithResponse(ctx, id)
	if err != nil {
		return err
	}
	if cur.JSON200 == nil {
		return fmt.Errorf("get identity provider: %d %s", cur.StatusCode(), cur.Body)
	}
	p := *cur.JSON200
	res, err := env.API.PutIdentityProviderWithResponse(ctx, id, &client.PutIdentityProviderParams{IfMatch: fmt.Sprintf("%q", fmt.Sprint(p.Version))},
		client.IdentityProviderWrite{DisplayName: name, ClientId: p.ClientId, Scopes: &p.Scopes, AllowedEmailDomains: &p.AllowedEmailDomains})
	if err != nil {
		return err
	}
	if res.JSON200 == nil {
		return fmt.Errorf("put identity provider: %d %s", res.StatusCode(), res.Body)
	}
	return nil
}

// activate makes a provider's pending revision active and the provider enabled, as a successful
// test does (a test needs a person at a real OpenID provider; the server's tests cover that).
func activate(t *testing.T, env *acctest.Env, id string) {
	t.Helper()
	if _, err := env.Server.Pool.Exec(context.Background(), `UPDATE identity_providers
		SET state = 'enabled', active_revision = pending_revision, pending_revision = NULL, version = version + 1 WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
}

// Destroying the deployment's last usable sign-in method is refused by the lockout guard, with a
// diagnostic that says what to do; with another usable provider, destroy goes through.
//
// Fails when: Delete does not report the 409 (the destroy "succeeds" and Terraform forgets a
// provider that still exists), or the diagnostic does not explain the lockout.
func TestAccIdentityProvider_lockout(t *testing.T) {
	env := acctest.Start(t)
	slug := acctest.Name("last")
	var id string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		CheckDestroy:             checkDeleted(env),
		Steps: []resource.TestStep{
			{
				Config: env.Config(config(slug, "The Only One", "", 0)),
				Check: func(s *terraform.State) error {
					id = s.RootModule().Resources[address].Primary.ID
					activate(t, env, id)
					return nil
				},
			},
			{
				// The refresh sees the activation; nothing to change.
				Config: env.Config(config(slug, "The Only One", "", 0)),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("active_revision"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("pending_revision"), knownvalue.Null()),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("version"), knownvalue.Int64Exact(2)),
				},
			},
			{
				Config:      env.Config(""),
				ExpectError: acctest.ErrorText("Cannot delete the last usable sign-in method", "409 lockout", "Nothing was deleted", "Add another identity provider and activate it"),
			},
			{
				PreConfig: func() {
					res, err := env.API.GetIdentityProviderWithResponse(context.Background(), id)
					if err != nil || res.StatusCode() != http.StatusOK {
						t.Errorf("after the refused destroy the provider answers %v %v, want it still there", res.StatusCode(), err)
					}
					// Another usable provider: now this one may go.
					key := acctest.Name("key")
					other, err := env.API.CreateIdentityProviderWithResponse(context.Background(), &client.CreateIdentityProviderParams{IdempotencyKey: key},
						client.IdentityProviderCreate{Slug: acctest.Name("other"), Protocol: client.ProviderProtocolOidc, Issuer: "https://other.example.com",
							DisplayName: "Other", ClientId: "other"})
					if err != nil || other.JSON201 == nil {
						t.Fatalf("create another provider: %v %s", err, other.Body)
					}
					activate(t, env, other.JSON201.Id)
				},
				Config: env.Config(""),
			},
		},
	})
}

// Destroying the provider the support source names (here set outside Terraform) is refused with
// a diagnostic that says what to do, and nothing is deleted; once the source names none, destroy
// goes through. (When both are in one configuration, the source is destroyed first and releases
// the provider: provider/internal/supportsource's tests end that way.)
//
// Fails when: Delete does not report the 409 (the destroy "succeeds" and Terraform forgets a
// provider that still exists), or the diagnostic does not say the support source holds it.
func TestAccIdentityProvider_namedBySupportSource(t *testing.T) {
	env := acctest.Start(t)
	slug := acctest.Name("named")
	var id string
	source := func(providerID *string) {
		t.Helper()
		cur, err := env.API.GetSupportSourceWithResponse(context.Background())
		if err != nil || cur.JSON200 == nil {
			t.Fatalf("get support source: %v", err)
		}
		enabled := providerID != nil
		w := client.SupportSourceWrite{Enabled: &enabled, ProviderId: providerID}
		if enabled {
			w.AllowedEmails = &[]client.Email{"alice@ops.example"}
		}
		res, err := env.API.PutSupportSourceWithResponse(context.Background(),
			&client.PutSupportSourceParams{IfMatch: apiclient.IfMatch(cur.JSON200.Version)}, w)
		if err != nil || res.JSON200 == nil {
			t.Fatalf("put support source: %v %s", err, res.Body)
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		CheckDestroy:             checkDeleted(env),
		Steps: []resource.TestStep{
			{
				Config: env.Config(config(slug, "Named", "", 0)),
				Check: func(s *terraform.State) error {
					id = s.RootModule().Resources[address].Primary.ID
					return nil
				},
			},
			{
				PreConfig:   func() { source(&id) },
				Config:      env.Config(""),
				ExpectError: acctest.ErrorText("Identity provider is named by the support source", "409 provider_in_use", "Nothing was deleted", "Point the support source"),
			},
			{
				PreConfig: func() {
					res, err := env.API.GetIdentityProviderWithResponse(context.Background(), id)
					if err != nil || res.StatusCode() != http.StatusOK {
						t.Errorf("after the refused destroy the provider answers %v %v, want it still there", res.StatusCode(), err)
					}
					source(nil)
				},
				Config: env.Config(""),
			},
		},
	})
}

// A provider made outside Terraform, then imported (an import block): Terraform cannot read the
// stored secret back, so the first apply sends the configured one (its version goes from none to
// the configured one), and the server holds it from then on.
//
// Fails when: an update whose client_secret_wo_version changed from null leaves the secret out
// (the server keeps the secret set by hand).
func TestAccIdentityProvider_importSendsTheSecret(t *testing.T) {
	env := acctest.Start(t)
	slug := acctest.Name("imported")
	byHand, configured := "by-hand-"+acctest.Name("s"), "configured-"+acctest.Name("s")
	env.Server.Track(byHand, configured)
	domains := []string{"example.com"}
	res, err := env.API.CreateIdentityProviderWithResponse(context.Background(), &client.CreateIdentityProviderParams{IdempotencyKey: acctest.Name("k")},
		client.IdentityProviderCreate{Slug: slug, Protocol: client.ProviderProtocolOidc, Issuer: "https://login.example.com/" + slug,
			DisplayName: "Example Corp", ClientId: "renga-" + slug, AllowedEmailDomains: &domains, ClientSecret: &client.ClientSecret{Value: &byHand}})
	if err != nil || res.JSON201 == nil {
		t.Fatalf("create provider: %v %s", err, res.Body)
	}
	id := res.JSON201.Id
	dir := t.TempDir()
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		WorkingDir:               dir,
		CheckDestroy:             checkDeleted(env),
		Steps: []resource.TestStep{
			{
				Config:          env.Config(fmt.Sprintf("import {\n  to = %s\n  id = %q\n}\n", address, id) + config(slug, "Example Corp", "", 1)),
				ConfigVariables: vars(configured),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(address, plancheck.ResourceActionUpdate),
						noSecretInPlan{byHand, configured}},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					noSecretInState{byHand, configured},
					statecheck.ExpectKnownValue(address, tfjsonpath.New("id"), knownvalue.StringExact(id)),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("revision"), knownvalue.Int64Exact(2)),
				},
				Check: resource.ComposeTestCheckFunc(secretIs(env, byHand, 1), secretIs(env, configured, 2), noSecretInFiles(dir, byHand, configured)),
			},
		},
	})
}
