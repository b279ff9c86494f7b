package identityprovider

import (
	"context"
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/setdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/provider/internal/textrule"
)

// The API's patterns (openapi.yaml: ProviderSlug, ProviderScopes, EmailDomain; IDs).
var (
	slugPattern        = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`)
	scopePattern       = regexp.MustCompile(`^[\x21\x23-\x5b\x5d-\x7e]{1,100}$`)
	emailDomainPattern = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$`)
	// IDPattern is a deployment identity provider's ID.
	IDPattern = regexp.MustCompile(`^idp_[0-9a-z]{26}$`)
)

// defaultScopes are the scopes the server requests when a configuration names none
// (server/domain.DefaultProviderScopes); the resource's default, so that leaving scopes out
// after setting them goes back to them.
var defaultScopes = []string{"openid", "email", "profile"}

// Schema is the resource's declarative schema.
func (r *Resource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A deployment identity provider: the OpenID Connect provider the operator's support people sign in with " +
			"(`/signin`, then the support console). Every write stores the configuration as a **pending revision** without " +
			"contacting the issuer; the **active revision** keeps serving sign-in until a person tests the pending one " +
			"(`renga identity-provider test ID` prints a single-use test URL to open in a browser) and the test activates it.\n\n" +
			"**Enabling and disabling are not arguments.** A provider is enabled only by a successful test, which needs a person " +
			"signing in at the provider in a browser: Terraform cannot do it, so an `enabled = true` argument could never converge. " +
			"`state` (`enabled` or `disabled`) and the revisions are therefore read-only here; disable a provider with " +
			"`renga identity-provider disable ID`, enable it again by testing a revision. Neither shows as a change in a plan.\n\n" +
			"**The client secret is write-only.** `client_secret_wo` is sent to the deployment and never stored in Terraform's " +
			"state or plan (it needs Terraform 1.11 or later; give it from an ephemeral variable or resource so it is in no file " +
			"either). Because Terraform keeps no trace of it, a change of its value alone is not seen: change " +
			"`client_secret_wo_version` to send it again. The secret is sent when the provider is created and whenever " +
			"`client_secret_wo_version` changes (including the first apply after an import); every other update leaves it " +
			"out, and the deployment keeps the stored secret. Removing `client_secret_wo` does not clear the stored secret.\n\n" +
			"**Updates** replace the configuration whole (a new pending revision, which a test must activate) and send the " +
			"version held in state as `If-Match`, once. If the provider changed outside Terraform since it was last read " +
			"(another write, a test that activated a revision, a disable), the server refuses (`412`) and the apply fails " +
			"saying so; nothing is written and the write is not retried. Run `terraform plan` (or `terraform apply -refresh-only`) " +
			"to refresh, then apply again.\n\n" +
			"**Destroying** this resource deletes the provider and its revisions; its sign-in sessions end on their next use. " +
			"The deployment refuses (`409 lockout`) to delete its last usable sign-in method (an enabled provider with an " +
			"active revision, when no other provider, environment provider or open local recovery (`renga identity-provider " +
			"recover-local` on the server host) is usable): add and activate another provider first. It also refuses " +
			"(`409 provider_in_use`) to delete the provider an enabled support source (`renga_support_source`) names: point " +
			"the support source elsewhere, or disable it, and apply that first. Changing `slug`, `protocol` or `issuer` replaces " +
			"the provider (delete, then create), so the same checks apply.\n\n" +
			"Providers from `RENGA_IDENTITY_PROVIDERS` are read-only and cannot be managed or imported.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The provider's ID, `idp_...`.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"slug": schema.StringAttribute{
				MarkdownDescription: "Unique, immutable short name (`/signin?provider=SLUG`): 1 to 40 lowercase letters, digits and hyphens, starting with a letter or digit. Changing it replaces the provider.",
				Required:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators: []validator.String{stringvalidator.RegexMatches(slugPattern,
					"must be 1 to 40 lowercase letters, digits and hyphens, starting with a letter or digit")},
			},
			"protocol": schema.StringAttribute{
				MarkdownDescription: "The protocol, `oidc` (OpenID Connect; the default). Immutable: changing it replaces the provider.",
				Optional:            true,
				Computed:            true,
				Default:             stringdefault.StaticString(string(client.ProviderProtocolOidc)),
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"issuer": schema.StringAttribute{
				MarkdownDescription: "The OpenID issuer URL: `https`, or `http` to a loopback address. Immutable: changing it replaces the provider. The issuer is contacted only when a test starts.",
				Required:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:          []validator.String{stringvalidator.LengthBetween(1, 2048), textrule.Visible()},
			},
			"display_name": schema.StringAttribute{
				MarkdownDescription: "The name the sign-in page shows, 1 to 100 characters.",
				Required:            true,
				Validators:          []validator.String{stringvalidator.UTF8LengthBetween(1, 100), textrule.Visible()},
			},
			"client_id": schema.StringAttribute{
				MarkdownDescription: "The OAuth client ID registered at the provider, 1 to 255 characters.",
				Required:            true,
				Validators:          []validator.String{stringvalidator.LengthBetween(1, 255), textrule.Visible()},
			},
			"client_secret_wo": schema.StringAttribute{
				MarkdownDescription: "The OAuth client secret, 1 to 1024 characters. **Write-only**: never in Terraform's state or plan, never returned by the API. " +
					"Sent at creation and whenever `client_secret_wo_version` changes; requires `client_secret_wo_version`.",
				Optional:   true,
				Sensitive:  true,
				WriteOnly:  true,
				Validators: []validator.String{stringvalidator.LengthBetween(1, 1024)},
			},
			"client_secret_wo_version": schema.Int64Attribute{
				MarkdownDescription: "Any number you choose; change it (e.g. increment it) to send `client_secret_wo` again, for instance after rotating the secret at the provider. " +
					"Kept in state (the secret is not), so a change is an update.",
				Optional: true,
			},
			"scopes": schema.SetAttribute{
				MarkdownDescription: "The scopes requested at sign-in; must include `openid`. Default `[\"openid\", \"email\", \"profile\"]`.",
				ElementType:         types.StringType,
				Optional:            true,
				Computed:            true,
				Default:             setdefault.StaticValue(stringSetOf(defaultScopes)),
				Validators: []validator.Set{
					setvalidator.SizeBetween(1, 20),
					setvalidator.ValueStringsAre(stringvalidator.RegexMatches(scopePattern, "must be 1 to 100 printable characters without spaces, quotes or backslashes")),
				},
			},
			"allowed_email_domains": schema.SetAttribute{
				MarkdownDescription: "Email domains (lowercase) whose people may sign in through this provider; empty (the default) allows any. " +
					"Who may actually sign in is decided by the support source (`renga_support_source`).",
				ElementType: types.StringType,
				Optional:    true,
				Computed:    true,
				Default:     setdefault.StaticValue(stringSetOf(nil)),
				Validators: []validator.Set{
					setvalidator.SizeAtMost(100),
					setvalidator.ValueStringsAre(stringvalidator.RegexMatches(emailDomainPattern, "must be a lowercase domain name")),
				},
			},
			"state": schema.StringAttribute{
				MarkdownDescription: "`enabled` (serving sign-in, once a revision is active) or `disabled`. Read-only: a successful test enables the provider, `renga identity-provider disable` disables it. " +
					"A state a newer server has that this provider does not know is shown as it is.",
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"revision": schema.Int64Attribute{
				MarkdownDescription: "The revision of the configuration shown: the latest one written (each update writes one).",
				Computed:            true,
			},
			"active_revision": schema.Int64Attribute{
				MarkdownDescription: "The revision serving sign-in, or null until a test first activates one. An update does not change it.",
				Computed:            true,
				PlanModifiers:       []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
			},
			"pending_revision": schema.Int64Attribute{
				MarkdownDescription: "The revision waiting for a successful test, or null. Each update makes its new revision the pending one.",
				Computed:            true,
			},
			"version": schema.Int64Attribute{
				MarkdownDescription: "The provider's version (its `ETag`); every change, a test's activation and a disable included, increments it. Sent as `If-Match` on updates.",
				Computed:            true,
			},
		},
	}
}
