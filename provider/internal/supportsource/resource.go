// Package supportsource is the renga_support_source resource: the deployment's one support
// source document, naming who the operator's support people are.
package supportsource

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/setdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/provider/internal/apiclient"
	"renga.dev/renga/provider/internal/identityprovider"
	"renga.dev/renga/provider/internal/textrule"
)

var (
	_ resource.Resource                = (*Resource)(nil)
	_ resource.ResourceWithConfigure   = (*Resource)(nil)
	_ resource.ResourceWithImportState = (*Resource)(nil)
)

const (
	typeName = "renga_support_source"
	apiPath  = "/api/v1/operator/support/source"
	// ID is the support source's ID in Terraform (there is one per deployment) and its import ID.
	ID = "support_source"
)

var (
	// Lowercase, as the server stores them (it compares emails without case and lowercases them).
	emailPattern       = regexp.MustCompile(`^[^@\s\p{Lu}\p{Lt}]+@[^@\s\p{Lu}\p{Lt}]+$`)
	emailDomainPattern = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$`)
)

// Resource is renga_support_source.
type Resource struct {
	client *apiclient.Client
}

// NewResource returns the renga_support_source resource.
func NewResource() resource.Resource { return &Resource{} }

type resourceModel struct {
	ID                 types.String `tfsdk:"id"`
	Enabled            types.Bool   `tfsdk:"enabled"`
	ProviderID         types.String `tfsdk:"provider_id"`
	AllowedEmails      types.Set    `tfsdk:"allowed_emails"`
	AllowedEmailDomain types.String `tfsdk:"allowed_email_domain"`
	Version            types.Int64  `tfsdk:"version"`
}

func (r *Resource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_support_source"
}

func (r *Resource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "The deployment's support source: who the operator's support people are (one per deployment). A support person is " +
			"whoever signs in at `/signin` through `provider_id` with a verified email that `allowed_emails` lists or that is in " +
			"`allowed_email_domain`. It names people; it never grants access to an organization (only the organization's owners do).\n\n" +
			"The document is replaced whole on every change; left-out arguments take their defaults (disabled, no provider, nobody).\n\n" +
			"**Creating** this resource writes the document, unless the deployment's support source is already set (anything but the " +
			"default, disabled and empty document) and differs from the configuration: then it fails, so Terraform never overwrites " +
			"a support source set by other means. Import it first: `terraform import renga_support_source.NAME " + ID + "` (the import " +
			"ID is always `" + ID + "`).\n\n" +
			"**Updates** send the version held in state as `If-Match`, once. If the support source changed outside Terraform since it " +
			"was last read, the server refuses (`412`) and the apply fails saying so; nothing is written and the write is not retried. " +
			"Run `terraform plan` (or `terraform apply -refresh-only`) to refresh, then apply again.\n\n" +
			"**Destroying** this resource resets the support source to its default document (disabled, no provider, nobody), with " +
			"`If-Match` too: support people can no longer sign in, and their sessions end on their next request. (Removing it from " +
			"Terraform's state only would leave support people able to sign in with nothing in the configuration saying so.)",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "Always `" + ID + "`: there is one support source per deployment.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"enabled": schema.BoolAttribute{
				MarkdownDescription: "Whether support people can sign in at all. Default `false`. Enabled, it needs `provider_id` and at least one of `allowed_emails` and `allowed_email_domain`.",
				Optional:            true,
				Computed:            true,
				Default:             booldefault.StaticBool(false),
			},
			"provider_id": schema.StringAttribute{
				MarkdownDescription: "The deployment identity provider support people sign in with (`idp_...`; stored, e.g. a `renga_identity_provider`'s `id`, or from `RENGA_IDENTITY_PROVIDERS`).",
				Optional:            true,
				Validators: []validator.String{stringvalidator.RegexMatches(identityprovider.IDPattern,
					"must be an identity provider ID, idp_ followed by 26 lowercase letters and digits")},
			},
			"allowed_emails": schema.SetAttribute{
				MarkdownDescription: "Support people by email (lowercase; verified by the provider). Default empty.",
				ElementType:         types.StringType,
				Optional:            true,
				Computed:            true,
				Default:             setdefault.StaticValue(types.SetValueMust(types.StringType, []attr.Value{})),
				Validators: []validator.Set{
					setvalidator.SizeAtMost(100),
					setvalidator.ValueStringsAre(stringvalidator.LengthBetween(3, 254),
						stringvalidator.RegexMatches(emailPattern, "must be a lowercase email address"), textrule.Visible()),
				},
			},
			"allowed_email_domain": schema.StringAttribute{
				MarkdownDescription: "Everyone with a verified email of this domain (lowercase) is a support person.",
				Optional:            true,
				Validators: []validator.String{stringvalidator.LengthBetween(1, 253),
					stringvalidator.RegexMatches(emailDomainPattern, "must be a lowercase domain name")},
			},
			"version": schema.Int64Attribute{
				MarkdownDescription: "The support source's version (its `ETag`); each change increments it. Sent as `If-Match` on updates and on destroy.",
				Computed:            true,
			},
		},
	}
}

func (r *Resource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.client = apiclient.FromProviderData(req.ProviderData, &resp.Diagnostics)
}

// writeOf is the document a model says, emails sorted as the server stores them.
func writeOf(ctx context.Context, m resourceModel) (client.SupportSourceWrite, diag.Diagnostics) {
	var diags diag.Diagnostics
	emails := []string{}
	if !m.AllowedEmails.IsNull() && !m.AllowedEmails.IsUnknown() {
		diags.Append(m.AllowedEmails.ElementsAs(ctx, &emails, false)...)
	}
	slices.Sort(emails)
	list := make([]client.Email, len(emails))
	for i, e := range emails {
		list[i] = client.Email(e)
	}
	enabled := m.Enabled.ValueBool()
	return client.SupportSourceWrite{
		Enabled:            &enabled,
		ProviderId:         m.ProviderID.ValueStringPointer(),
		AllowedEmails:      &list,
		AllowedEmailDomain: m.AllowedEmailDomain.ValueStringPointer(),
	}, diags
}

// same says whether the stored document is the one w writes.
func same(s client.SupportSource, w client.SupportSourceWrite) bool {
	emails := slices.Clone(s.AllowedEmails)
	slices.Sort(emails)
	return s.Enabled == *w.Enabled && equalPtr(s.ProviderId, w.ProviderId) &&
		equalPtr(s.AllowedEmailDomain, w.AllowedEmailDomain) && slices.Equal(emails, *w.AllowedEmails)
}

func equalPtr(a, b *string) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// isDefault says whether the stored document is the default one: disabled, naming nobody.
func isDefault(s client.SupportSource) bool {
	return !s.Enabled && s.ProviderId == nil && len(s.AllowedEmails) == 0 && s.AllowedEmailDomain == nil
}

func toModel(s client.SupportSource) resourceModel {
	emails := make([]attr.Value, 0, len(s.AllowedEmails))
	for _, e := range s.AllowedEmails {
		emails = append(emails, types.StringValue(string(e)))
	}
	return resourceModel{
		ID:                 types.StringValue(ID),
		Enabled:            types.BoolValue(s.Enabled),
		ProviderID:         types.StringPointerValue(s.ProviderId),
		AllowedEmails:      types.SetValueMust(types.StringType, emails),
		AllowedEmailDomain: types.StringPointerValue(s.AllowedEmailDomain),
		Version:            types.Int64Value(s.Version),
	}
}

func (r *Resource) get(ctx context.Context) (*client.SupportSource, diag.Diagnostics) {
	var diags diag.Diagnostics
	res, err := r.client.API.GetSupportSourceWithResponse(ctx)
	if err != nil || res.StatusCode() != http.StatusOK || res.JSON200 == nil {
		apiclient.AddError(&diags, "read the support source", res, err)
		return nil, diags
	}
	return res.JSON200, diags
}

func (r *Resource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan resourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	body, diags := writeOf(ctx, plan)
	resp.Diagnostics.Append(diags...)
	stored, diags := r.get(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	switch {
	case same(*stored, body):
		// Already what the configuration says (an earlier apply whose response was lost, say):
		// adopt it without a write.
		resp.Diagnostics.Append(resp.State.Set(ctx, toModel(*stored))...)
		return
	case !isDefault(*stored):
		resp.Diagnostics.AddError("The support source is already set",
			fmt.Sprintf("The deployment's support source is already set outside this Terraform configuration (version %d; enabled: %t). Terraform does not overwrite it silently.\n\n"+
				"To manage it from here, import it first:\n  terraform import <address of this resource> %s\n"+
				"then make the configuration match (or change it deliberately).", stored.Version, stored.Enabled, ID))
		return
	}
	s, diags := r.put(ctx, stored.Version, body, "write")
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, toModel(*s))...)
}

// put replaces the document, sending version as If-Match once; a 412 is the user's to resolve.
func (r *Resource) put(ctx context.Context, version int64, body client.SupportSourceWrite, verb string) (*client.SupportSource, diag.Diagnostics) {
	var diags diag.Diagnostics
	key, err := apiclient.WriteKey(typeName, apiPath, version, body)
	if err != nil {
		diags.AddError("Cannot build the support source request", err.Error())
		return nil, diags
	}
	action := verb + " the support source"
	res, err := r.client.API.PutSupportSourceWithResponse(ctx, &client.PutSupportSourceParams{IfMatch: apiclient.IfMatch(version), IdempotencyKey: &key}, body)
	if err != nil {
		apiclient.AddError(&diags, action, res, err)
		return nil, diags
	}
	switch res.StatusCode() {
	case http.StatusOK:
		if res.JSON200 != nil {
			return res.JSON200, diags
		}
	case http.StatusPreconditionFailed:
		apiclient.AddChangedOutsideTerraform(&diags, "Support source changed outside Terraform", action, "the support source", "", res, version)
		return nil, diags
	}
	apiclient.AddError(&diags, action, res, nil)
	return nil, diags
}

func (r *Resource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	s, diags := r.get(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, toModel(*s))...)
}

func (r *Resource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state resourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	body, diags := writeOf(ctx, plan)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	s, diags := r.put(ctx, state.Version.ValueInt64(), body, "update")
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, toModel(*s))...)
}

func (r *Resource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state resourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// Resetting is a write like any other: If-Match with the version in state, so a change made
	// outside Terraform since the last refresh is not wiped out unseen.
	disabled := false
	_, diags := r.put(ctx, state.Version.ValueInt64(), client.SupportSourceWrite{Enabled: &disabled, AllowedEmails: &[]client.Email{}}, "reset")
	resp.Diagnostics.Append(diags...)
}

func (r *Resource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if req.ID != ID {
		resp.Diagnostics.AddError("Invalid import ID",
			fmt.Sprintf("There is one support source per deployment; its import ID is %q, got %q.", ID, req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), ID)...)
}
