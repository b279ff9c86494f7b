// Package ownerinvitation is the renga_owner_invitation resource.
package ownerinvitation

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/provider/internal/apiclient"
	"renga.dev/renga/provider/internal/organization"
	"renga.dev/renga/provider/internal/textrule"
)

var (
	_ resource.Resource                = (*Resource)(nil)
	_ resource.ResourceWithConfigure   = (*Resource)(nil)
	_ resource.ResourceWithImportState = (*Resource)(nil)
)

var (
	// The server stores addresses trimmed and in lowercase; asking for that form keeps state
	// and configuration equal (a required argument cannot be normalised in the plan).
	// Lowercase only (any script): the server stores addresses lowercased, and a required
	// argument cannot be normalised in the plan.
	emailPattern = regexp.MustCompile(`^[^@\s\p{Lu}\p{Lt}]+@[^@\s\p{Lu}\p{Lt}]+\.[^@\s\p{Lu}\p{Lt}]+$`)
	idPattern    = regexp.MustCompile(`^inv_[0-9a-z]{26}$`)
)

// Invitation states. A response's state is an open set (a string): one a newer server has that
// this provider does not know stays in Terraform's state as it is.
const (
	statePending  = string(client.InvitationStatePending)
	stateAccepted = string(client.InvitationStateAccepted)
	stateRevoked  = string(client.InvitationStateRevoked)
)

// Resource is renga_owner_invitation.
type Resource struct {
	client *apiclient.Client
}

// NewResource returns the renga_owner_invitation resource.
func NewResource() resource.Resource { return &Resource{} }

type resourceModel struct {
	ID             types.String `tfsdk:"id"`
	OrganizationID types.String `tfsdk:"organization_id"`
	Email          types.String `tfsdk:"email"`
	State          types.String `tfsdk:"state"`
	CreatedAt      types.String `tfsdk:"created_at"`
	ExpiresAt      types.String `tfsdk:"expires_at"`
	AcceptedAt     types.String `tfsdk:"accepted_at"`
}

func (r *Resource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_owner_invitation"
}

func (r *Resource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "An invitation for someone to become an owner of an organization. Creating it sends the " +
			"invitation mail (the secret is only ever in the mail; no response carries it). The invitation is " +
			"valid for 7 days. A new invitation for an address with a pending one replaces it.\n\n" +
			"**Destroying** it revokes the invitation if it is still pending. An invitation that was accepted stays " +
			"accepted (the person remains an owner; remove owners from the organization itself), and it stays in " +
			"state without a diff: acceptance is the invitation's purpose, not drift. An expired invitation also " +
			"stays in state; to send a fresh one, `terraform apply -replace=<address>`. An invitation revoked " +
			"outside Terraform is gone: the next plan proposes to invite again.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The invitation's ID, `inv_...`.",
				Computed:            true,
				PlanModifiers:       keep,
			},
			"organization_id": schema.StringAttribute{
				MarkdownDescription: "The organization to invite an owner to. Changing it sends a new invitation (the old one is revoked).",
				Required:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:          organization.IDValidators(),
			},
			"email": schema.StringAttribute{
				MarkdownDescription: "The address the invitation is mailed to, in lowercase (the server stores and compares addresses in lowercase; use `lower()` on an address from elsewhere). Changing it sends a new invitation (the old one is revoked).",
				Required:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators: []validator.String{
					stringvalidator.LengthBetween(3, 254),
					stringvalidator.RegexMatches(emailPattern, "must be an email address in lowercase (the server compares and stores addresses in lowercase)"),
					textrule.Visible(),
				},
			},
			"state": schema.StringAttribute{
				MarkdownDescription: "`pending`, `accepted` or `expired` (a revoked invitation leaves state). A state a newer server has that this provider does not know is shown as it is.",
				Computed:            true,
				PlanModifiers:       keep,
			},
			"created_at": schema.StringAttribute{
				MarkdownDescription: "When the invitation was created, RFC 3339 UTC.",
				Computed:            true,
				PlanModifiers:       keep,
			},
			"expires_at": schema.StringAttribute{
				MarkdownDescription: "When the invitation stops being valid if not accepted, RFC 3339 UTC.",
				Computed:            true,
				PlanModifiers:       keep,
			},
			"accepted_at": schema.StringAttribute{
				MarkdownDescription: "When it was accepted, RFC 3339 UTC, or null.",
				Computed:            true,
				PlanModifiers:       keep,
			},
		},
	}
}

func (r *Resource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.client = apiclient.FromProviderData(req.ProviderData, &resp.Diagnostics)
}

func (r *Resource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan resourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	inv, diags := r.create(ctx, plan.OrganizationID.ValueString(), plan.Email.ValueString())
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, toModel(*inv))...)
}

// create posts the invitation with a key derived from the request. A replayed response is
// adopted while its invitation is pending or accepted; one revoked or expired since (destroyed
// and now created again within the key window) sends the next generation's key.
func (r *Resource) create(ctx context.Context, orgID, email string) (*client.Invitation, diag.Diagnostics) {
	var diags diag.Diagnostics
	body := client.InvitationCreate{Email: client.Email(email)}
	action := fmt.Sprintf("invite %s to organization %s", email, orgID)
	for gen := 0; gen < apiclient.MaxKeyGenerations; gen++ {
		key, err := apiclient.CreateKey("renga_owner_invitation", "/api/v1/operator/organizations/"+orgID+"/invitations", body, gen)
		if err != nil {
			diags.AddError("Cannot build the create request", err.Error())
			return nil, diags
		}
		res, err := r.client.API.CreateInvitationWithResponse(ctx, orgID, &client.CreateInvitationParams{IdempotencyKey: key}, body)
		if err != nil {
			apiclient.AddError(&diags, action, res, err)
			return nil, diags
		}
		if res.StatusCode() != http.StatusCreated || res.JSON201 == nil {
			apiclient.AddError(&diags, action, res, nil)
			return nil, diags
		}
		if !apiclient.Replayed(res.HTTPResponse) {
			return res.JSON201, diags
		}
		cur, err := r.client.API.GetInvitationWithResponse(ctx, orgID, res.JSON201.Id)
		if err != nil {
			apiclient.AddError(&diags, "read invitation "+res.JSON201.Id, cur, err)
			return nil, diags
		}
		switch {
		case cur.StatusCode() == http.StatusOK && cur.JSON200 != nil:
			if s := cur.JSON200.State; s == statePending || s == stateAccepted {
				diags.AddWarning("Adopted an invitation created earlier",
					fmt.Sprintf("The deployment had already created invitation %s for an identical request from this token in the last %s "+
						"(an interrupted apply, or another resource inviting the same address): this resource now manages it.", cur.JSON200.Id, apiclient.KeyRetention))
				return cur.JSON200, diags
			}
		case cur.StatusCode() == http.StatusNotFound:
		default:
			apiclient.AddError(&diags, "read invitation "+res.JSON201.Id, cur, nil)
			return nil, diags
		}
	}
	diags.AddError("Too many earlier invitations from the same request",
		fmt.Sprintf("Inviting %s replayed %d earlier invitations made from the same request within the last %s, all since revoked or expired. Wait for the window to pass.", email, apiclient.MaxKeyGenerations, apiclient.KeyRetention))
	return nil, diags
}

func formatTime(t *time.Time) types.String {
	if t == nil {
		return types.StringNull()
	}
	return types.StringValue(t.UTC().Format(time.RFC3339))
}

func toModel(inv client.Invitation) resourceModel {
	return resourceModel{
		ID:             types.StringValue(inv.Id),
		OrganizationID: types.StringValue(inv.OrganizationId),
		Email:          types.StringValue(string(inv.Email)),
		State:          types.StringValue(string(inv.State)),
		CreatedAt:      formatTime(&inv.CreatedAt),
		ExpiresAt:      formatTime(&inv.ExpiresAt),
		AcceptedAt:     formatTime(inv.AcceptedAt),
	}
}

func (r *Resource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state resourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	orgID, id := state.OrganizationID.ValueString(), state.ID.ValueString()
	res, err := r.client.API.GetInvitationWithResponse(ctx, orgID, id)
	if err != nil {
		apiclient.AddError(&resp.Diagnostics, "read invitation "+id, res, err)
		return
	}
	switch {
	case res.StatusCode() == http.StatusOK && res.JSON200 != nil:
	case res.StatusCode() == http.StatusNotFound:
		resp.State.RemoveResource(ctx)
		return
	default:
		apiclient.AddError(&resp.Diagnostics, "read invitation "+id, res, nil)
		return
	}
	if res.JSON200.State == stateRevoked {
		resp.State.RemoveResource(ctx)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, toModel(*res.JSON200))...)
}

// Update is never planned (every argument forces replacement); it keeps the plan.
func (r *Resource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan resourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *Resource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state resourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	orgID, id := state.OrganizationID.ValueString(), state.ID.ValueString()
	// Revoking an invitation that is not pending is success and changes nothing, so retrying it
	// is safe and an accepted invitation stays accepted.
	res, err := r.client.API.RevokeInvitationWithResponse(apiclient.RetrySafe(ctx), orgID, id, &client.RevokeInvitationParams{})
	if err != nil {
		apiclient.AddError(&resp.Diagnostics, "revoke invitation "+id, res, err)
		return
	}
	switch res.StatusCode() {
	case http.StatusOK, http.StatusNotFound:
	default:
		apiclient.AddError(&resp.Diagnostics, "revoke invitation "+id, res, nil)
	}
}

func (r *Resource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	orgID, id, ok := strings.Cut(req.ID, "/")
	if !ok || !organization.IDPattern.MatchString(orgID) || !idPattern.MatchString(id) {
		resp.Diagnostics.AddError("Invalid import ID",
			fmt.Sprintf("Expected <organization_id>/<invitation_id>, e.g. org_01jc3x9m1h7r4v5n8q2w6e0t9y/inv_01jc3x9m1h7r4v5n8q2w6e0t9y; got %q.", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("organization_id"), orgID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), id)...)
}
