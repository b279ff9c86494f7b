// Package identityprovider is the renga_identity_provider resource: a deployment identity
// provider (the OpenID Connect provider the operator's support people sign in with).
package identityprovider

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/provider/internal/apiclient"
)

var (
	_ resource.Resource                   = (*Resource)(nil)
	_ resource.ResourceWithConfigure      = (*Resource)(nil)
	_ resource.ResourceWithImportState    = (*Resource)(nil)
	_ resource.ResourceWithValidateConfig = (*Resource)(nil)
)

const (
	// sourceEnvironment is the source of a provider from RENGA_IDENTITY_PROVIDERS.
	sourceEnvironment = "environment"
	typeName          = "renga_identity_provider"
	collectionPath    = "/api/v1/operator/identity-providers"
)

// Resource is renga_identity_provider.
type Resource struct {
	client *apiclient.Client
}

// NewResource returns the renga_identity_provider resource.
func NewResource() resource.Resource { return &Resource{} }

type resourceModel struct {
	ID                    types.String `tfsdk:"id"`
	Slug                  types.String `tfsdk:"slug"`
	Protocol              types.String `tfsdk:"protocol"`
	Issuer                types.String `tfsdk:"issuer"`
	DisplayName           types.String `tfsdk:"display_name"`
	ClientID              types.String `tfsdk:"client_id"`
	ClientSecretWO        types.String `tfsdk:"client_secret_wo"`
	ClientSecretWOVersion types.Int64  `tfsdk:"client_secret_wo_version"`
	Scopes                types.Set    `tfsdk:"scopes"`
	AllowedEmailDomains   types.Set    `tfsdk:"allowed_email_domains"`
	State                 types.String `tfsdk:"state"`
	Revision              types.Int64  `tfsdk:"revision"`
	ActiveRevision        types.Int64  `tfsdk:"active_revision"`
	PendingRevision       types.Int64  `tfsdk:"pending_revision"`
	Version               types.Int64  `tfsdk:"version"`
}

func (r *Resource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_identity_provider"
}

func stringSetOf(values []string) types.Set {
	elems := make([]attr.Value, 0, len(values))
	for _, v := range values {
		elems = append(elems, types.StringValue(v))
	}
	return types.SetValueMust(types.StringType, elems)
}

// ValidateConfig requires the secret and its version together: a secret without a version could
// never be sent again, a version without a secret sends nothing.
func (r *Resource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var secret types.String
	var version types.Int64
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("client_secret_wo"), &secret)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("client_secret_wo_version"), &version)...)
	if resp.Diagnostics.HasError() || secret.IsUnknown() || version.IsUnknown() {
		return
	}
	switch {
	case !secret.IsNull() && version.IsNull():
		resp.Diagnostics.AddAttributeError(path.Root("client_secret_wo_version"), "Missing client_secret_wo_version",
			"client_secret_wo is write-only: Terraform keeps no trace of it and cannot see it change. Set client_secret_wo_version too (any number, e.g. 1), and change it whenever the secret should be sent again.")
	case secret.IsNull() && !version.IsNull():
		resp.Diagnostics.AddAttributeError(path.Root("client_secret_wo"), "Missing client_secret_wo",
			"client_secret_wo_version says when to send client_secret_wo, which is not set. Set both, or neither (the deployment then keeps whatever secret it holds).")
	}
}

func (r *Resource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.client = apiclient.FromProviderData(req.ProviderData, &resp.Diagnostics)
}

// setStrings reads a set of strings (nil when null or unknown).
func setStrings(ctx context.Context, s types.Set, diags *diag.Diagnostics) []string {
	if s.IsNull() || s.IsUnknown() {
		return nil
	}
	var out []string
	diags.Append(s.ElementsAs(ctx, &out, false)...)
	slices.Sort(out)
	return out
}

// configuredSecret is client_secret_wo from the configuration: write-only values are only there,
// never in the plan or the state.
func configuredSecret(ctx context.Context, cfg interface {
	GetAttribute(context.Context, path.Path, any) diag.Diagnostics
}, diags *diag.Diagnostics) *string {
	var secret types.String
	diags.Append(cfg.GetAttribute(ctx, path.Root("client_secret_wo"), &secret)...)
	if secret.IsNull() || secret.IsUnknown() {
		return nil
	}
	v := secret.ValueString()
	return &v
}

func (r *Resource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan resourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	secret := configuredSecret(ctx, req.Config, &resp.Diagnostics)
	scopes := setStrings(ctx, plan.Scopes, &resp.Diagnostics)
	domains := setStrings(ctx, plan.AllowedEmailDomains, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	body := client.IdentityProviderCreate{
		Slug: plan.Slug.ValueString(), Protocol: client.ProviderProtocol(plan.Protocol.ValueString()), Issuer: plan.Issuer.ValueString(),
		DisplayName: plan.DisplayName.ValueString(), ClientId: plan.ClientID.ValueString(),
		Scopes: &scopes, AllowedEmailDomains: &domains,
	}
	if secret != nil {
		body.ClientSecret = &client.ClientSecret{Value: secret}
	}
	p, adopted, diags := r.create(ctx, body, plan.ClientSecretWOVersion.ValueInt64())
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	// A provider adopted from an earlier attempt had this configuration when it was made (the
	// key covers the body and the secret's version), but it may have been changed since.
	if adopted && !sameConfig(*p, writeOf(plan, scopes, domains, nil)) {
		p, diags = r.put(ctx, p.Id, p.Version, writeOf(plan, scopes, domains, secret), "update")
		resp.Diagnostics.Append(diags...)
		if resp.Diagnostics.HasError() {
			return
		}
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, toModel(*p, plan.ClientSecretWOVersion))...)
}

// create posts the provider with a key derived from the request, as renga_organization does: a
// replayed response is adopted while the provider it names exists; one deleted since sends the
// next generation's key.
//
// The key is derived from the body without the client secret, and from the secret's version
// instead: a key is a request header, which proxies may log, and a hash of a weak secret can be
// guessed offline.
func (r *Resource) create(ctx context.Context, body client.IdentityProviderCreate, secretVersion int64) (*client.IdentityProvider, bool, diag.Diagnostics) {
	var diags diag.Diagnostics
	action := fmt.Sprintf("create identity provider %q", body.Slug)
	keyed := body
	keyed.ClientSecret = nil
	keyInput := struct {
		Body          client.IdentityProviderCreate `json:"body"`
		SecretVersion int64                         `json:"client_secret_wo_version"`
	}{keyed, secretVersion}
	for gen := 0; gen < apiclient.MaxKeyGenerations; gen++ {
		key, err := apiclient.CreateKey(typeName, collectionPath, keyInput, gen)
		if err != nil {
			diags.AddError("Cannot build the create request", err.Error())
			return nil, false, diags
		}
		res, err := r.client.API.CreateIdentityProviderWithResponse(ctx, &client.CreateIdentityProviderParams{IdempotencyKey: key}, body)
		if err != nil {
			apiclient.AddError(&diags, action, res, err)
			return nil, false, diags
		}
		switch {
		case res.StatusCode() == http.StatusCreated && res.JSON201 != nil:
			if !apiclient.Replayed(res.HTTPResponse) {
				return res.JSON201, false, diags
			}
			cur, err := r.client.API.GetIdentityProviderWithResponse(ctx, res.JSON201.Id)
			if err != nil {
				apiclient.AddError(&diags, "read identity provider "+res.JSON201.Id, cur, err)
				return nil, false, diags
			}
			switch {
			case cur.StatusCode() == http.StatusOK && cur.JSON200 != nil:
				diags.AddWarning("Adopted an identity provider created earlier",
					fmt.Sprintf("The deployment had already created identity provider %s for an identical create request from this token in the last %s "+
						"(an interrupted apply): this resource now manages it.", cur.JSON200.Id, apiclient.KeyRetention))
				return cur.JSON200, true, diags
			case cur.StatusCode() == http.StatusNotFound:
			default:
				apiclient.AddError(&diags, "read identity provider "+res.JSON201.Id, cur, nil)
				return nil, false, diags
			}
		case res.StatusCode() == http.StatusConflict:
			if p, ok := apiclient.Problem(res); ok && client.ErrorCode(p.Error) == client.ErrorCodeSlugTaken {
				diags.AddAttributeError(path.Root("slug"), "Slug already taken",
					fmt.Sprintf("The deployment already has an identity provider with slug %q (stored, or from RENGA_IDENTITY_PROVIDERS). "+
						"To manage a stored one, import it: terraform import <address> <provider_id> (find the ID with `renga identity-provider list`). Or choose another slug.", body.Slug))
				return nil, false, diags
			}
			apiclient.AddError(&diags, action, res, nil)
			return nil, false, diags
		default:
			apiclient.AddError(&diags, action, res, nil)
			return nil, false, diags
		}
	}
	diags.AddError("Too many earlier identity providers from the same request",
		fmt.Sprintf("Creating identity provider %q replayed %d earlier providers made from the same request within the last %s, all since deleted. Wait for the window to pass.", body.Slug, apiclient.MaxKeyGenerations, apiclient.KeyRetention))
	return nil, false, diags
}

// writeOf is the PUT body for a planned configuration; secret nil leaves the stored secret as
// it is. slug, protocol and issuer go along (the server checks they did not change).
func writeOf(m resourceModel, scopes, domains []string, secret *string) client.IdentityProviderWrite {
	slug, protocol, issuer := m.Slug.ValueString(), m.Protocol.ValueString(), m.Issuer.ValueString()
	w := client.IdentityProviderWrite{
		DisplayName: m.DisplayName.ValueString(), ClientId: m.ClientID.ValueString(),
		Scopes: &scopes, AllowedEmailDomains: &domains,
		Slug: &slug, Protocol: &protocol, Issuer: &issuer,
	}
	if secret != nil {
		w.ClientSecret = &struct {
			Value *string `json:"value,omitempty"`
		}{Value: secret}
	}
	return w
}

// sameConfig says whether the provider's configuration (the secret aside) is the one w writes.
func sameConfig(p client.IdentityProvider, w client.IdentityProviderWrite) bool {
	sorted := func(s []string) []string {
		s = slices.Clone(s)
		slices.Sort(s)
		return s
	}
	return p.DisplayName == w.DisplayName && p.ClientId == w.ClientId &&
		slices.Equal(sorted(p.Scopes), sorted(*w.Scopes)) &&
		slices.Equal(sorted(p.AllowedEmailDomains), sorted(*w.AllowedEmailDomains))
}

// put replaces the configuration, sending version as If-Match once. A 412 is for the user to
// resolve with a refresh, never a reason to read the new version and write again.
func (r *Resource) put(ctx context.Context, id string, version int64, body client.IdentityProviderWrite, verb string) (*client.IdentityProvider, diag.Diagnostics) {
	var diags diag.Diagnostics
	key, err := apiclient.WriteKey(typeName, collectionPath+"/"+id, version, body)
	if err != nil {
		diags.AddError("Cannot build the identity provider request", err.Error())
		return nil, diags
	}
	action := verb + " identity provider " + id
	res, err := r.client.API.PutIdentityProviderWithResponse(ctx, id,
		&client.PutIdentityProviderParams{IfMatch: apiclient.IfMatch(version), IdempotencyKey: &key}, body)
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
		apiclient.AddChangedOutsideTerraform(&diags, "Identity provider changed outside Terraform", action, "the provider",
			"another write, a test that activated a revision, a disable", res, version)
		return nil, diags
	case http.StatusConflict:
		if p, ok := apiclient.Problem(res); ok && client.ErrorCode(p.Error) == client.ErrorCodeReadOnly {
			diags.AddError("Identity provider is read-only", readOnlyDetail(action, id))
			return nil, diags
		}
	}
	apiclient.AddError(&diags, action, res, nil)
	return nil, diags
}

func readOnlyDetail(action, id string) string {
	return fmt.Sprintf("Could not %s: identity provider %s comes from the deployment's RENGA_IDENTITY_PROVIDERS and is read-only through the API. "+
		"Change it in the server's environment instead, and remove it from this configuration (terraform state rm <address>).", action, id)
}

func int64OrNull(v *int64) types.Int64 {
	if v == nil {
		return types.Int64Null()
	}
	return types.Int64Value(*v)
}

// toModel is the state for a provider as the server holds it. The secret is never there; its
// version is the configuration's (the server knows nothing of it).
func toModel(p client.IdentityProvider, secretVersion types.Int64) resourceModel {
	if secretVersion.IsUnknown() {
		secretVersion = types.Int64Null()
	}
	return resourceModel{
		ID:                    types.StringValue(p.Id),
		Slug:                  types.StringValue(p.Slug),
		Protocol:              types.StringValue(p.Protocol),
		Issuer:                types.StringValue(p.Issuer),
		DisplayName:           types.StringValue(p.DisplayName),
		ClientID:              types.StringValue(p.ClientId),
		ClientSecretWO:        types.StringNull(),
		ClientSecretWOVersion: secretVersion,
		Scopes:                stringSetOf(p.Scopes),
		AllowedEmailDomains:   stringSetOf(p.AllowedEmailDomains),
		State:                 types.StringValue(p.State),
		Revision:              types.Int64Value(p.Revision),
		ActiveRevision:        int64OrNull(p.ActiveRevision),
		PendingRevision:       int64OrNull(p.PendingRevision),
		Version:               types.Int64Value(p.Version),
	}
}

func (r *Resource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state resourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id := state.ID.ValueString()
	res, err := r.client.API.GetIdentityProviderWithResponse(ctx, id)
	if err != nil {
		apiclient.AddError(&resp.Diagnostics, "read identity provider "+id, res, err)
		return
	}
	switch {
	case res.StatusCode() == http.StatusOK && res.JSON200 != nil:
	case res.StatusCode() == http.StatusNotFound:
		resp.State.RemoveResource(ctx)
		return
	default:
		apiclient.AddError(&resp.Diagnostics, "read identity provider "+id, res, nil)
		return
	}
	if res.JSON200.Source == sourceEnvironment {
		resp.Diagnostics.AddError("Identity provider is read-only", readOnlyDetail("manage identity provider "+id, id))
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, toModel(*res.JSON200, state.ClientSecretWOVersion))...)
}

func (r *Resource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state resourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	scopes := setStrings(ctx, plan.Scopes, &resp.Diagnostics)
	domains := setStrings(ctx, plan.AllowedEmailDomains, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	// The secret goes along only when its version changed: it cannot be compared (it is in
	// neither the state nor the plan), and sending it every time would make every update rotate it.
	var secret *string
	if !plan.ClientSecretWOVersion.Equal(state.ClientSecretWOVersion) {
		secret = configuredSecret(ctx, req.Config, &resp.Diagnostics)
		if resp.Diagnostics.HasError() {
			return
		}
	}
	body := writeOf(plan, scopes, domains, secret)
	current := client.IdentityProvider{DisplayName: state.DisplayName.ValueString(), ClientId: state.ClientID.ValueString(),
		Scopes: setStrings(ctx, state.Scopes, &resp.Diagnostics), AllowedEmailDomains: setStrings(ctx, state.AllowedEmailDomains, &resp.Diagnostics)}
	if secret == nil && sameConfig(current, body) {
		// Only client_secret_wo_version changed, with nothing to send (the secret was removed
		// too): no new revision for nothing.
		state.ClientSecretWOVersion = plan.ClientSecretWOVersion
		resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
		return
	}
	p, diags := r.put(ctx, state.ID.ValueString(), state.Version.ValueInt64(), body, "update")
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, toModel(*p, plan.ClientSecretWOVersion))...)
}

func (r *Resource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state resourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id := state.ID.ValueString()
	action := "delete identity provider " + id
	// Keyed, so a retry after a lost response replays the 204 instead of answering 404.
	key, err := apiclient.WriteKey(typeName, collectionPath+"/"+id, state.Version.ValueInt64(), "delete")
	if err != nil {
		resp.Diagnostics.AddError("Cannot build the identity provider request", err.Error())
		return
	}
	res, err := r.client.API.DeleteIdentityProviderWithResponse(ctx, id, &client.DeleteIdentityProviderParams{IdempotencyKey: &key})
	if err != nil {
		apiclient.AddError(&resp.Diagnostics, action, res, err)
		return
	}
	switch res.StatusCode() {
	case http.StatusNoContent, http.StatusNotFound:
		return
	case http.StatusConflict:
		p, _ := apiclient.Problem(res)
		switch client.ErrorCode(p.Error) {
		case client.ErrorCodeLockout:
			resp.Diagnostics.AddError("Cannot delete the last usable sign-in method",
				fmt.Sprintf("Could not %s (%s): it is the deployment's last usable sign-in method (an enabled provider with an active revision), "+
					"and deleting it would lock everyone out of /signin and the support console (409 lockout). Nothing was deleted.\n\n"+
					"Add another identity provider and activate it with a successful test (`renga identity-provider test ID`), or configure one in "+
					"RENGA_IDENTITY_PROVIDERS, or open a local recovery on the server host (`renga identity-provider recover-local`), "+
					"then destroy this one again.", action, state.Slug.ValueString()))
			return
		case client.ErrorCodeProviderInUse:
			resp.Diagnostics.AddError("Identity provider is named by the support source",
				fmt.Sprintf("Could not %s (%s): the deployment's enabled support source names it as the provider support people sign in "+
					"with (409 provider_in_use). Nothing was deleted.\n\n"+
					"Point the support source (renga_support_source) at another provider, or disable it, and apply that first; "+
					"then destroy or replace this provider.", action, state.Slug.ValueString()))
			return
		case client.ErrorCodeReadOnly:
			resp.Diagnostics.AddError("Identity provider is read-only", readOnlyDetail(action, id))
			return
		}
	}
	apiclient.AddError(&resp.Diagnostics, action, res, nil)
}

func (r *Resource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if !IDPattern.MatchString(req.ID) {
		resp.Diagnostics.AddError("Invalid import ID", fmt.Sprintf("Expected an identity provider's ID (idp_...), got %q.", req.ID))
		return
	}
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}
