// Package organizationpolicy is the renga_organization_policy resource.
package organizationpolicy

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/provider/internal/apiclient"
	"renga.dev/renga/provider/internal/organization"
	"renga.dev/renga/provider/internal/policydoc"
	"renga.dev/renga/server/domain/policyfield"
)

var (
	_ resource.Resource                = (*Resource)(nil)
	_ resource.ResourceWithConfigure   = (*Resource)(nil)
	_ resource.ResourceWithImportState = (*Resource)(nil)
)

// Resource is renga_organization_policy.
type Resource struct {
	client *apiclient.Client
}

// NewResource returns the renga_organization_policy resource.
func NewResource() resource.Resource { return &Resource{} }

type resourceModel struct {
	ID                types.String `tfsdk:"id"`
	OrganizationID    types.String `tfsdk:"organization_id"`
	Limits            types.Object `tfsdk:"limits"`
	LockedSettings    types.Object `tfsdk:"locked_settings"`
	Entitlements      types.Object `tfsdk:"entitlements"`
	OverwriteExisting types.Bool   `tfsdk:"overwrite_existing"`
	Version           types.Int64  `tfsdk:"version"`
}

// document is the model's policy document; setDocument puts one in the model.
func (m resourceModel) document() policydoc.Document {
	return policydoc.Document{policyfield.Limits: m.Limits, policyfield.LockedSettings: m.LockedSettings,
		policyfield.Entitlements: m.Entitlements}
}

func (m *resourceModel) setDocument(d policydoc.Document) {
	m.Limits = d.Section(policyfield.Limits)
	m.LockedSettings = d.Section(policyfield.LockedSettings)
	m.Entitlements = d.Section(policyfield.Entitlements)
}

func (r *Resource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_organization_policy"
}

func (r *Resource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "An organization's policy document: its limits, locked settings and entitlements (one per organization). " +
			"The document is replaced whole on every change; anything left out inherits the deployment default " +
			"(see `policy_defaults` of the `renga_deployment` data source) or is not locked.\n\n" +
			"Every organization has a policy document from the start, empty. **Creating** this resource over a " +
			"document that is not empty fails, so Terraform never overwrites a policy someone set by other means: " +
			"import it (`terraform import`, by organization ID), or set `overwrite_existing = true`.\n\n" +
			"**Updates** send the version held in state as `If-Match`, once. If the policy changed outside Terraform " +
			"since it was last read, the server refuses (`412`) and the apply fails with an error saying so; nothing " +
			"is overwritten and the write is not retried. Run `terraform plan` (or `terraform apply -refresh-only`) " +
			"to see the change, then apply again.\n\n" +
			"**Destroying** this resource resets the organization's policy to an empty document (`{}`): every limit " +
			"and entitlement inherits the deployment default again and nothing is locked.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The organization's ID (a policy has no ID of its own).",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"organization_id": schema.StringAttribute{
				MarkdownDescription: "The organization whose policy this is. Changing it moves the policy: the old organization's is reset to empty.",
				Required:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:          organization.IDValidators(),
			},
			"overwrite_existing": schema.BoolAttribute{
				MarkdownDescription: "Only at creation: replace a policy document that is not empty instead of failing. Default `false`. " +
					"(A document that already equals this configuration is adopted either way.)",
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(false),
			},
			"version": schema.Int64Attribute{
				MarkdownDescription: "The policy's version on the server; each change increments it. Sent as `If-Match` on updates and on destroy.",
				Computed:            true,
			},
		},
	}
	for _, sec := range policyfield.Sections {
		resp.Schema.Attributes[string(sec.Name)] = schema.SingleNestedAttribute{
			MarkdownDescription: sec.Description,
			Optional:            true,
			Attributes:          sectionAttributes(sec.Name),
		}
	}
}

// sectionAttributes are the attributes of a policy document's section, from the table of
// policy fields: the API's ranges become validators, the table's descriptions the docs.
func sectionAttributes(s policyfield.Section) map[string]schema.Attribute {
	out := map[string]schema.Attribute{}
	for _, f := range policyfield.In(s) {
		switch f.Kind {
		case policyfield.Integer:
			out[f.Path.Name()] = schema.Int64Attribute{
				MarkdownDescription: f.Description, Optional: true,
				Validators: []validator.Int64{int64validator.Between(f.Min, f.Max)},
			}
		case policyfield.Boolean:
			out[f.Path.Name()] = schema.BoolAttribute{MarkdownDescription: f.Description, Optional: true}
		case policyfield.StringSet:
			out[f.Path.Name()] = schema.SetAttribute{
				MarkdownDescription: f.Description,
				ElementType:         types.StringType,
				Optional:            true,
				Validators: []validator.Set{
					setvalidator.SizeAtMost(f.MaxItems),
					setvalidator.ValueStringsAre(
						stringvalidator.LengthBetween(f.Items.MinLength, f.Items.MaxLength),
						stringvalidator.RegexMatches(regexp.MustCompile(f.Items.Pattern), "must be "+f.Items.Meaning),
					),
				},
			}
		}
	}
	return out
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
	orgID := plan.OrganizationID.ValueString()
	body, diags := plan.document().ToAPI(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	// A policy nothing has written is empty at version 1 (getPolicy's description in the API):
	// the write at version 1 is then the whole create, as for an organization created in the
	// same apply. A policy written before refuses it (412, recorded in the audit log as a
	// refused attempt, nothing changed), and the create reads it and decides as below.
	p, written, diags := r.putIfUnwritten(ctx, orgID, body)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	if written {
		resp.Diagnostics.Append(r.setState(ctx, &resp.State, plan.document().Kept, plan.OverwriteExisting.ValueBool(), *p)...)
		return
	}
	cur, err := r.client.API.GetPolicyWithResponse(ctx, orgID)
	if err != nil || cur.StatusCode() != http.StatusOK || cur.JSON200 == nil {
		apiclient.AddError(&resp.Diagnostics, "read the policy of organization "+orgID, cur, err)
		return
	}
	stored := *cur.JSON200
	if !policydoc.Empty(stored) {
		same, err := sameDocument(stored, body)
		if err != nil {
			resp.Diagnostics.AddError("Cannot compare policy documents", err.Error())
			return
		}
		switch {
		case same:
			// Already what the configuration says (for instance written by an earlier apply
			// whose response was lost): adopt it without a write.
			resp.Diagnostics.Append(r.setState(ctx, &resp.State, plan.document().Kept, plan.OverwriteExisting.ValueBool(), stored)...)
			return
		case !plan.OverwriteExisting.ValueBool():
			resp.Diagnostics.AddError("Organization already has a policy",
				fmt.Sprintf("Organization %s already has a policy document that is not empty (version %d), set outside this Terraform configuration. Terraform does not overwrite it silently.\n\n"+
					"To manage it from here, import it first:\n  terraform import <address of this resource> %s\n"+
					"then make the configuration match (or change it deliberately). Or set overwrite_existing = true in this resource to replace the existing document with the configured one.",
					orgID, stored.Version, orgID))
			return
		}
	}
	p, diags = r.put(ctx, orgID, stored.Version, body, "create")
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(r.setState(ctx, &resp.State, plan.document().Kept, plan.OverwriteExisting.ValueBool(), *p)...)
}

// unwrittenVersion is the version of a policy nothing has written: empty, as every
// organization's policy starts (getPolicy's description in the API).
const unwrittenVersion = 1

// putIfUnwritten writes body as the policy's first version, if nothing has written the policy:
// written is false, without diagnostics, when the server holds a policy written since (412),
// and when the answer is a replay. The key of a write at version 1 is the same whenever the
// same document is written to that organization's unwritten policy: a replay is this write,
// retried after its response was lost, or a write of the same document before the policy was
// written again and reset since (a destroy and a create within the key's retention). Only a
// read tells the two apart, so the create reads, as for a 412.
func (r *Resource) putIfUnwritten(ctx context.Context, orgID string, body client.PolicyWrite) (p *client.Policy, written bool, diags diag.Diagnostics) {
	res, diags := r.send(ctx, orgID, unwrittenVersion, body, "create")
	switch {
	case diags.HasError():
		return nil, false, diags
	case res.StatusCode() == http.StatusPreconditionFailed,
		res.StatusCode() == http.StatusOK && res.HTTPResponse.Header.Get("Idempotent-Replayed") == "true":
		return nil, false, diags
	case res.StatusCode() == http.StatusOK && res.JSON200 != nil:
		return res.JSON200, true, diags
	}
	apiclient.AddError(&diags, "create the policy of organization "+orgID, res, nil)
	return nil, false, diags
}

// send sends body as the policy at version (If-Match), with an Idempotency-Key made of both.
func (r *Resource) send(ctx context.Context, orgID string, version int64, body client.PolicyWrite, verb string) (*client.PutPolicyResponse, diag.Diagnostics) {
	var diags diag.Diagnostics
	key, err := apiclient.WriteKey("renga_organization_policy", "/api/v1/operator/organizations/"+orgID+"/policy", version, body)
	if err != nil {
		diags.AddError("Cannot build the policy request", err.Error())
		return nil, diags
	}
	res, err := r.client.API.PutPolicyWithResponse(ctx, orgID, &client.PutPolicyParams{IfMatch: apiclient.IfMatch(version), IdempotencyKey: &key}, body)
	if err != nil {
		apiclient.AddError(&diags, verb+" the policy of organization "+orgID, res, err)
		return nil, diags
	}
	return res, diags
}

// put replaces the document, sending version as If-Match once. A 412 is an error for the user to
// resolve with a refresh, never a reason to read the new version and write again.
func (r *Resource) put(ctx context.Context, orgID string, version int64, body client.PolicyWrite, verb string) (*client.Policy, diag.Diagnostics) {
	res, diags := r.send(ctx, orgID, version, body, verb)
	if diags.HasError() {
		return nil, diags
	}
	action := verb + " the policy of organization " + orgID
	switch res.StatusCode() {
	case http.StatusOK:
		if res.JSON200 != nil {
			return res.JSON200, diags
		}
	case http.StatusPreconditionFailed:
		apiclient.AddChangedOutsideTerraform(&diags, "Policy changed outside Terraform", action, "the policy", "", res, version)
		return nil, diags
	}
	apiclient.AddError(&diags, action, res, nil)
	return nil, diags
}

// sameDocument compares a stored document with a body about to be written, as the server would
// store it (sets sorted, without duplicates).
func sameDocument(stored client.Policy, body client.PolicyWrite) (bool, error) {
	return sameWrite(stored, body)
}

// sameWrite says whether two documents (stored or about to be written) store the same policy.
func sameWrite(a, b any) (bool, error) {
	x, err := policydoc.Normal(a)
	if err != nil {
		return false, err
	}
	y, err := policydoc.Normal(b)
	if err != nil {
		return false, err
	}
	return reflect.DeepEqual(x, y), nil
}

// setState writes what the server holds. keep says which parts the state or plan it replaces
// had as an object rather than null (policydoc.FromAPI), overwrite is overwrite_existing's value.
func (r *Resource) setState(ctx context.Context, st *tfsdk.State, keep func(policyfield.Section) bool, overwrite bool, p client.Policy) diag.Diagnostics {
	doc, diags := policydoc.FromAPI(p, keep)
	m := resourceModel{
		ID:                types.StringValue(p.OrganizationId),
		OrganizationID:    types.StringValue(p.OrganizationId),
		OverwriteExisting: types.BoolValue(overwrite),
		Version:           types.Int64Value(p.Version),
	}
	m.setDocument(doc)
	diags.Append(st.Set(ctx, &m)...)
	return diags
}

func (r *Resource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state resourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	orgID := state.OrganizationID.ValueString()
	res, err := r.client.API.GetPolicyWithResponse(ctx, orgID)
	if err != nil {
		apiclient.AddError(&resp.Diagnostics, "read the policy of organization "+orgID, res, err)
		return
	}
	switch {
	case res.StatusCode() == http.StatusOK && res.JSON200 != nil:
		resp.Diagnostics.Append(r.setState(ctx, &resp.State, state.document().Kept, state.OverwriteExisting.ValueBool(), *res.JSON200)...)
	case res.StatusCode() == http.StatusNotFound:
		resp.State.RemoveResource(ctx)
	default:
		apiclient.AddError(&resp.Diagnostics, "read the policy of organization "+orgID, res, nil)
	}
}

func (r *Resource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state resourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	body, diags := plan.document().ToAPI(ctx)
	resp.Diagnostics.Append(diags...)
	current, diags := state.document().ToAPI(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	// Only overwrite_existing changed (or a part went from null to empty): nothing to write.
	if same, err := sameWrite(current, body); err == nil && same {
		state.OverwriteExisting = plan.OverwriteExisting
		state.setDocument(plan.document())
		resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
		return
	}
	p, diags := r.put(ctx, state.OrganizationID.ValueString(), state.Version.ValueInt64(), body, "update")
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(r.setState(ctx, &resp.State, plan.document().Kept, plan.OverwriteExisting.ValueBool(), *p)...)
}

func (r *Resource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state resourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	orgID := state.OrganizationID.ValueString()
	// Resetting is a write like any other: If-Match with the version in state, so a change made
	// outside Terraform since the last refresh is not wiped out unseen.
	key, err := apiclient.WriteKey("renga_organization_policy", "/api/v1/operator/organizations/"+orgID+"/policy", state.Version.ValueInt64(), client.PolicyWrite{})
	if err != nil {
		resp.Diagnostics.AddError("Cannot build the policy request", err.Error())
		return
	}
	res, err := r.client.API.PutPolicyWithResponse(ctx, orgID,
		&client.PutPolicyParams{IfMatch: apiclient.IfMatch(state.Version.ValueInt64()), IdempotencyKey: &key}, client.PolicyWrite{})
	if err != nil {
		apiclient.AddError(&resp.Diagnostics, "reset the policy of organization "+orgID, res, err)
		return
	}
	switch res.StatusCode() {
	case http.StatusOK, http.StatusNotFound:
	case http.StatusPreconditionFailed:
		resp.Diagnostics.AddError("Policy changed outside Terraform",
			fmt.Sprintf("Could not reset the policy of organization %s to empty: the policy changed outside Terraform (the server holds version %d, Terraform's state holds version %d). "+
				"Nothing was overwritten. Run `terraform plan` (or `terraform apply -refresh-only`) to refresh, then destroy again.",
				orgID, apiclient.CurrentVersion(res), state.Version.ValueInt64()))
	default:
		apiclient.AddError(&resp.Diagnostics, "reset the policy of organization "+orgID, res, nil)
	}
}

func (r *Resource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if !organization.IDPattern.MatchString(req.ID) {
		resp.Diagnostics.AddError("Invalid import ID", fmt.Sprintf("Expected the organization's ID (org_...), got %q.", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("organization_id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}
