package ownerinvitation_test

import (
	"context"
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
	"github.com/jackc/pgx/v5"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/provider/internal/acctest"
)

const address = "renga_owner_invitation.test"

func config(slug, email string) string {
	return fmt.Sprintf(`
resource "renga_organization" "test" {
  slug         = %q
  display_name = "Invitation Test"
}

resource "renga_owner_invitation" "test" {
  organization_id = renga_organization.test.id
  email           = %q
}
`, slug, email)
}

func invitation(env *acctest.Env, orgID, id string) (client.Invitation, error) {
	res, err := env.API.GetInvitationWithResponse(context.Background(), orgID, id)
	if err != nil {
		return client.Invitation{}, err
	}
	if res.JSON200 == nil {
		return client.Invitation{}, fmt.Errorf("get invitation: %d %s", res.StatusCode(), res.Body)
	}
	return *res.JSON200, nil
}

// checkRevoked asks the API that destroy revoked every pending invitation (or left an accepted
// one accepted, when accepted is set).
func checkRevoked(env *acctest.Env, accepted bool) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		for _, rs := range s.RootModule().Resources {
			if rs.Type != "renga_owner_invitation" {
				continue
			}
			inv, err := invitation(env, rs.Primary.Attributes["organization_id"], rs.Primary.ID)
			if err != nil {
				return err
			}
			want := string(client.InvitationStateRevoked)
			if accepted {
				want = string(client.InvitationStateAccepted)
			}
			if inv.State != want {
				return fmt.Errorf("invitation %s is %s after destroy, want %s", inv.Id, inv.State, want)
			}
		}
		return nil
	}
}

func TestAccOwnerInvitation(t *testing.T) {
	env := acctest.Start(t)
	slug := acctest.Name("invite")
	var first, orgID string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		CheckDestroy:             checkRevoked(env, false),
		Steps: []resource.TestStep{
			{
				Config:      env.Config(config(slug, "Olivia@Example.COM")),
				ExpectError: regexp.MustCompile(`must be an email address in lowercase`),
			},
			{
				Config:      env.Config(config(slug, "Émile@example.com")),
				ExpectError: regexp.MustCompile(`must be an email address in lowercase`),
			},
			{
				Config:      env.Config(config(slug, "olivia\u200b@example.com")),
				ExpectError: acctest.ErrorText("must not contain control, invisible or direction-changing characters"),
			},
			{
				Config: env.Config(config(slug, "olivia@example.com")),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("id"), knownvalue.StringRegexp(regexp.MustCompile(`^inv_`))),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("state"), knownvalue.StringExact("pending")),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("email"), knownvalue.StringExact("olivia@example.com")),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("accepted_at"), knownvalue.Null()),
				},
				Check: func(s *terraform.State) error {
					rs := s.RootModule().Resources[address].Primary
					first, orgID = rs.ID, rs.Attributes["organization_id"]
					inv, err := invitation(env, orgID, first)
					if err != nil {
						return err
					}
					if inv.Email != "olivia@example.com" || inv.State != string(client.InvitationStatePending) {
						return fmt.Errorf("the server holds %+v", inv)
					}
					return nil
				},
			},
			{
				ResourceName:      address,
				ImportState:       true,
				ImportStateVerify: true,
				ImportStateIdFunc: func(s *terraform.State) (string, error) {
					rs := s.RootModule().Resources[address].Primary
					return rs.Attributes["organization_id"] + "/" + rs.ID, nil
				},
			},
			{
				Config: env.Config(config(slug, "peter@example.com")),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(address, plancheck.ResourceActionDestroyBeforeCreate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: func(s *terraform.State) error {
					old, err := invitation(env, orgID, first)
					if err != nil {
						return err
					}
					if old.State != string(client.InvitationStateRevoked) {
						return fmt.Errorf("the replaced invitation is %s, want revoked", old.State)
					}
					return nil
				},
			},
			{
				// Revoked outside Terraform: the next plan invites again.
				PreConfig: func() {
					res, err := env.API.ListInvitationsWithResponse(context.Background(), orgID, &client.ListInvitationsParams{State: new(client.InvitationStatePending)})
					if err != nil || res.JSON200 == nil || len(res.JSON200.Items) != 1 {
						t.Fatalf("list pending invitations: %v", err)
					}
					rev, err := env.API.RevokeInvitationWithResponse(context.Background(), orgID, res.JSON200.Items[0].Id, &client.RevokeInvitationParams{})
					if err != nil || rev.StatusCode() != http.StatusOK {
						t.Fatalf("revoke out of band: %v", err)
					}
				},
				Config:             env.Config(config(slug, "peter@example.com")),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectResourceAction(address, plancheck.ResourceActionCreate)},
				},
			},
			{
				// Applying invites again: a pending invitation that the destroy at the end must
				// revoke (CheckDestroy asks the API).
				Config: env.Config(config(slug, "peter@example.com")),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("state"), knownvalue.StringExact("pending")),
				},
			},
		},
	})
}

var inviteSecret = regexp.MustCompile(`renga_invite_[a-z2-7]{52}`)

// accept redeems the invitation the way its recipient would, with the secret from its mail
// (still in the outbox: this server runs no mail worker).
func accept(t *testing.T, env *acctest.Env, orgID string) {
	t.Helper()
	ctx := context.Background()
	rows, err := env.Server.Pool.Query(ctx, `SELECT body FROM outbound_mail WHERE organization_id = $1 AND body IS NOT NULL`, orgID)
	if err != nil {
		t.Fatal(err)
	}
	bodies, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(bodies) != 1 {
		t.Fatalf("outbox: %d mails (%v), want 1", len(bodies), err)
	}
	secret := inviteSecret.FindString(bodies[0])
	if secret == "" {
		t.Fatal("the invitation mail carries no secret")
	}
	env.Server.Track(secret)
	res, err := env.API.AcceptInvitationWithResponse(ctx, client.InvitationAccept{Token: secret, DisplayName: "Olivia Owner"})
	if err != nil || res.JSON201 == nil {
		t.Fatalf("accept: %v %d %s", err, res.StatusCode(), res.Body)
	}
	env.Server.Track(res.JSON201.ApiKey)
}

// An accepted invitation stays in state without a diff, and destroying it leaves it accepted.
func TestAccOwnerInvitation_accepted(t *testing.T) {
	env := acctest.Start(t)
	slug := acctest.Name("accepted")
	cfg := env.Config(config(slug, "olivia@example.com"))
	var orgID string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.Factories(),
		CheckDestroy:             checkRevoked(env, true),
		Steps: []resource.TestStep{
			{
				Config: cfg,
				Check: func(s *terraform.State) error {
					orgID = s.RootModule().Resources["renga_organization.test"].Primary.ID
					return nil
				},
			},
			{
				PreConfig: func() { accept(t, env, orgID) },
				Config:    cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(address, tfjsonpath.New("state"), knownvalue.StringExact("accepted")),
					statecheck.ExpectKnownValue(address, tfjsonpath.New("accepted_at"), knownvalue.NotNull()),
				},
			},
		},
	})
}
