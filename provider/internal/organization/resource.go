// Package organization is the renga_organization resource and data source.
package organization

import (
	"context"
	"fmt"
	"net/http"
	"regexp"

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
	"renga.dev/renga/provider/internal/textrule"
)

var (
	_ resource.Resource                = (*Resource)(nil)
	_ resource.ResourceWithConfigure   = (*Resource)(nil)
	_ resource.ResourceWithImportState = (*Resource)(nil)
)

// The API's own patterns (openapi.yaml: Slug, DisplayName, OrganizationId).
var (
	SlugPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,38}[a-z0-9]$`)
	IDPattern   = regexp.MustCompile(`^org_[0-9a-z]{26}$`)
)

// Resource is renga_organization.
type Resource struct {
	client *apiclient.Client
}

// NewResource returns the renga_organization resource.
func NewResource() resource.Resource { return &Resource{} }

type resourceModel struct {
	ID          types.String `tfsdk:"id"`
	Slug        types.String `tfsdk:"slug"`
	DisplayName types.String `tfsdk:"display_name"`
	State       types.String `tfsdk:"state"`
	Version     types.Int64  `tfsdk:"version"`
}

// SlugValidators check a slug as the API does.
func SlugValidators() []validator.String {
	return []validator.String{stringvalidator.RegexMatches(SlugPattern,
		"must be 3 to 40 lowercase letters, digits and hyphens, starting and ending with a letter or digit")}
}

// IDValidators check an organization ID's shape.
func IDValidators() []validator.String {
	return []validator.String{stringvalidator.RegexMatches(IDPattern, "must be an organization ID, org_ followed by 26 lowercase letters and digits")}
}

func (r *Resource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_organization"
}

func (r *Resource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "An organization hosted by the deployment.\n\n" +
			"**Destroying this resource schedules the organization's deletion**; it does not delete it at once. " +
			"The organization becomes `deletion_pending` and the purge removes everything it owns (agents, " +
			"observations, jobs, settings, memberships, pending invitations, Activity) after the deployment's " +
			"grace period (`RENGA_DELETION_GRACE_PERIOD`, 720 h by default; see the `renga_deployment` data source). " +
			"Until the purge starts, `renga org undelete <id>` cancels the deletion (then `terraform import` it back); " +
			"meanwhile its slug stays taken.\n\n" +
			"An organization whose deletion is scheduled (or that was purged or moved to another deployment) " +
			"is gone as far as Terraform is concerned: the next plan proposes to create it again.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The organization's ID, `org_...`.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"slug": schema.StringAttribute{
				MarkdownDescription: "Unique, immutable short name: 3 to 40 lowercase letters, digits and hyphens, starting and ending with a letter or digit. Changing it replaces the organization (the old one's deletion is scheduled).",
				Required:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:          SlugValidators(),
			},
			"display_name": schema.StringAttribute{
				MarkdownDescription: "Human-readable name, 1 to 200 characters, no control, invisible or direction-changing characters. Changed in place.",
				Required:            true,
				Validators: []validator.String{
					stringvalidator.UTF8LengthBetween(1, 200),
					textrule.Visible(),
				},
			},
			"state": schema.StringAttribute{
				MarkdownDescription: "Lifecycle state: `active` or `suspended` (suspension is managed outside Terraform, e.g. `renga org suspend`). " +
					"A state a newer server has that this provider does not know is shown as it is, and the organization stays managed.",
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"version": schema.Int64Attribute{
				MarkdownDescription: "The organization's version; each change increments it. Sent as `If-Match` when the display name changes.",
				Computed:            true,
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
	body := client.OrganizationCreate{Slug: plan.Slug.ValueString(), DisplayName: plan.DisplayName.ValueString()}
	o, diags := r.create(ctx, body)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	// An organization adopted from an earlier attempt had this display name when it was made
	// (the key covers the body), but it may have been renamed since.
	if o.DisplayName != body.DisplayName {
		o, diags = r.rename(ctx, o.Id, o.Version, body.DisplayName)
		resp.Diagnostics.Append(diags...)
		if resp.Diagnostics.HasError() {
			return
		}
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, toModel(*o))...)
}

// create posts the organization with a key derived from the request. A replayed response is
// adopted only while the organization it names is live; one whose deletion has been scheduled
// since (destroyed and now created again within the key window) sends the next generation's key.
func (r *Resource) create(ctx context.Context, body client.OrganizationCreate) (*client.Organization, diag.Diagnostics) {
	var diags diag.Diagnostics
	action := fmt.Sprintf("create organization %q", body.Slug)
	for gen := 0; gen < apiclient.MaxKeyGenerations; gen++ {
		key, err := apiclient.CreateKey("renga_organization", "/api/v1/operator/organizations", body, gen)
		if err != nil {
			diags.AddError("Cannot build the create request", err.Error())
			return nil, diags
		}
		res, err := r.client.API.CreateOrganizationWithResponse(ctx, &client.CreateOrganizationParams{IdempotencyKey: key}, body)
		if err != nil {
			apiclient.AddError(&diags, action, res, err)
			return nil, diags
		}
		switch {
		case res.StatusCode() == http.StatusCreated && res.JSON201 != nil:
			if !apiclient.Replayed(res.HTTPResponse) {
				return res.JSON201, diags
			}
			cur, err := r.client.API.GetOrganizationWithResponse(ctx, res.JSON201.Id)
			if err != nil {
				apiclient.AddError(&diags, "read organization "+res.JSON201.Id, cur, err)
				return nil, diags
			}
			switch {
			case cur.StatusCode() == http.StatusOK && cur.JSON200 != nil:
				if live(cur.JSON200.State) {
					diags.AddWarning("Adopted an organization created earlier",
						fmt.Sprintf("The deployment had already created organization %s for an identical create request from this token in the last %s "+
							"(an interrupted apply, or another resource with the same slug and display name): this resource now manages it. "+
							"If another resource manages it too, remove one of them.", cur.JSON200.Id, apiclient.KeyRetention))
					return cur.JSON200, diags
				}
			case cur.StatusCode() == http.StatusNotFound:
			default:
				apiclient.AddError(&diags, "read organization "+res.JSON201.Id, cur, nil)
				return nil, diags
			}
		case res.StatusCode() == http.StatusConflict:
			if p, ok := apiclient.Problem(res); ok && client.ErrorCode(p.Error) == client.ErrorCodeSlugTaken {
				diags.AddAttributeError(path.Root("slug"), "Slug already taken",
					fmt.Sprintf("An organization with slug %q already exists in the deployment (possibly one whose deletion is pending: its slug stays taken until the purge). "+
						"To manage the existing organization, import it: terraform import <address> <organization_id> (find the ID with `renga org list`; cancel a pending deletion with `renga org undelete`). Or choose another slug.", body.Slug))
				return nil, diags
			}
			apiclient.AddError(&diags, action, res, nil)
			return nil, diags
		default:
			apiclient.AddError(&diags, action, res, nil)
			return nil, diags
		}
	}
	diags.AddError("Too many earlier organizations from the same request",
		fmt.Sprintf("Creating organization %q replayed %d earlier organizations made from the same request within the last %s, all since deleted. Wait for the window to pass.", body.Slug, apiclient.MaxKeyGenerations, apiclient.KeyRetention))
	return nil, diags
}

// live says whether an organization in this state is one Terraform manages: one whose deletion
// is scheduled, being purged or moved away is gone. A state is an open set: one a newer server
// has that this provider does not know is live, kept in Terraform's state as it is (dropping the
// resource would plan creating an organization that exists; an update the server refuses in
// that state says why).
func live(s string) bool {
	switch client.OrganizationState(s) {
	case client.OrganizationStateDeletionPending, client.OrganizationStatePurging, client.OrganizationStateMoved:
		return false
	}
	return true
}

// toModel is the organization the server holds as the resource's state.
func toModel(o client.Organization) resourceModel {
	return resourceModel{
		ID:          types.StringValue(o.Id),
		Slug:        types.StringValue(o.Slug),
		DisplayName: types.StringValue(o.DisplayName),
		State:       types.StringValue(o.State),
		Version:     types.Int64Value(o.Version),
	}
}

func (r *Resource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state resourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id := state.ID.ValueString()
	res, err := r.client.API.GetOrganizationWithResponse(ctx, id)
	if err != nil {
		apiclient.AddError(&resp.Diagnostics, "read organization "+id, res, err)
		return
	}
	switch {
	case res.StatusCode() == http.StatusOK && res.JSON200 != nil:
	case res.StatusCode() == http.StatusNotFound:
		resp.State.RemoveResource(ctx)
		return
	default:
		apiclient.AddError(&resp.Diagnostics, "read organization "+id, res, nil)
		return
	}
	if !live(res.JSON200.State) {
		resp.State.RemoveResource(ctx)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, toModel(*res.JSON200))...)
}

func (r *Resource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state resourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	o, diags := r.rename(ctx, state.ID.ValueString(), state.Version.ValueInt64(), plan.DisplayName.ValueString())
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, toModel(*o))...)
}

// rename changes the display name, sending version as If-Match once; a 412 means someone
// changed the organization since Terraform read it, and is the user's to resolve.
func (r *Resource) rename(ctx context.Context, id string, version int64, displayName string) (*client.Organization, diag.Diagnostics) {
	var diags diag.Diagnostics
	body := client.OrganizationUpdate{DisplayName: displayName}
	key, err := apiclient.WriteKey("renga_organization", "/api/v1/operator/organizations/"+id, version, body)
	if err != nil {
		diags.AddError("Cannot build the update request", err.Error())
		return nil, diags
	}
	res, err := r.client.API.UpdateOrganizationWithResponse(ctx, id,
		&client.UpdateOrganizationParams{IfMatch: apiclient.IfMatch(version), IdempotencyKey: &key}, body)
	if err != nil {
		apiclient.AddError(&diags, "update organization "+id, res, err)
		return nil, diags
	}
	switch res.StatusCode() {
	case http.StatusOK:
		if res.JSON200 != nil {
			return res.JSON200, diags
		}
	case http.StatusPreconditionFailed:
		diags.AddError("Organization changed outside Terraform",
			fmt.Sprintf("Organization %s is at version %d on the server, but Terraform's state holds version %d: someone changed it since Terraform last read it. "+
				"Nothing was overwritten. Run `terraform plan` (or `terraform apply -refresh-only`) to see the change, then apply again.",
				id, apiclient.CurrentVersion(res), version))
		return nil, diags
	}
	apiclient.AddError(&diags, "update organization "+id, res, nil)
	return nil, diags
}

func (r *Resource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state resourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id := state.ID.ValueString()
	// Scheduling a deletion already scheduled is success, so retrying it is safe.
	res, err := r.client.API.ScheduleOrganizationDeletionWithResponse(apiclient.RetrySafe(ctx), id, &client.ScheduleOrganizationDeletionParams{})
	if err != nil {
		apiclient.AddError(&resp.Diagnostics, "schedule the deletion of organization "+id, res, err)
		return
	}
	switch res.StatusCode() {
	case http.StatusOK, http.StatusNotFound:
	case http.StatusConflict:
		// Already being purged (purge_started), or in a state that is gone to Terraform
		// (invalid_state: moved): either way, nothing is left to destroy.
		if p, ok := apiclient.Problem(res); ok && (client.ErrorCode(p.Error) == client.ErrorCodePurgeStarted || client.ErrorCode(p.Error) == client.ErrorCodeInvalidState) {
			return
		}
		apiclient.AddError(&resp.Diagnostics, "schedule the deletion of organization "+id, res, nil)
	default:
		apiclient.AddError(&resp.Diagnostics, "schedule the deletion of organization "+id, res, nil)
	}
}

func (r *Resource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if !IDPattern.MatchString(req.ID) {
		resp.Diagnostics.AddError("Invalid import ID", fmt.Sprintf("Expected an organization ID (org_...), got %q.", req.ID))
		return
	}
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}
